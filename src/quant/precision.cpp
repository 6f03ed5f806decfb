#include "qjoule/quant/precision.h"

#include <utility>

#include "qjoule/error.h"

namespace qjoule::quant {

Precision::Precision(std::string text) : text_(std::move(text)) {
  try {
    spec_ = parse_format_spec(text_);
  } catch (const Error& e) {
    error_ = e.what();
  }
}

const FormatSpec& Precision::spec_or_fail() const {
  if (!spec_) fail("{}", error_);
  return *spec_;
}

}  // namespace qjoule::quant
