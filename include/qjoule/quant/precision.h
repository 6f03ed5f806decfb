// A precision spec as written and as parsed. The text is parsed once, where it enters (a flag, a sweep
// file, a record read back): run names, kernels and checks read the typed FormatSpec it carries, and the
// text stays as written for records and messages ("int4" stays "int4", not "int4:g=128:sym").
//
// A text that is not a spec this qjoule reads (a typo, a record written by another version, a label
// such as "torch-int8-dynamic" from the Python API) still makes a Precision: spec() is then nullopt,
// and spec_or_fail() stops with the line parse_format_spec gave for it.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "qjoule/quant/format_spec.h"

namespace qjoule::quant {

class Precision {
 public:
  Precision() : Precision(std::string("fp32")) {}
  // Implicit: a text becomes a Precision where it enters a configuration (`config.precision = "int8"`).
  Precision(std::string text);                                        // NOLINT(google-explicit-constructor)
  Precision(const char* text) : Precision(std::string(text)) {}       // NOLINT(google-explicit-constructor)
  Precision(std::string_view text) : Precision(std::string(text)) {}  // NOLINT(google-explicit-constructor)

  const std::string& text() const { return text_; }
  bool empty() const { return text_.empty(); }
  // The parsed spec, or nullopt when the text is not one.
  const std::optional<FormatSpec>& spec() const { return spec_; }
  // The parsed spec; where the text is not one, one line naming it and what was expected.
  const FormatSpec& spec_or_fail() const;

  friend bool operator==(const Precision& a, const Precision& b) { return a.text_ == b.text_; }
  friend bool operator==(const Precision& a, std::string_view b) { return a.text_ == b; }
  friend bool operator==(const Precision& a, const std::string& b) { return a.text_ == b; }
  friend bool operator==(const Precision& a, const char* b) { return a.text_ == b; }
  friend std::ostream& operator<<(std::ostream& out, const Precision& p) { return out << p.text_; }

 private:
  std::string text_;
  std::optional<FormatSpec> spec_;
  std::string error_;  // parse_format_spec's line when spec_ is nullopt
};

}  // namespace qjoule::quant

template <>
struct fmt::formatter<qjoule::quant::Precision> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const qjoule::quant::Precision& p, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(p.text(), ctx);
  }
};
