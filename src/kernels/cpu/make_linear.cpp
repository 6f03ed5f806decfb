#include "qjoule/kernels/make_linear.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "qjoule/error.h"
#include "qjoule/kernels/linear_onednn_lowp.h"
#include "qjoule/kernels/linear_weight_only.h"

namespace qjoule::kernels {
namespace {

std::vector<std::string_view> split_colons(std::string_view s) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t colon = s.find(':', start);
    parts.push_back(s.substr(start, colon == std::string_view::npos ? s.npos : colon - start));
    if (colon == std::string_view::npos) return parts;
    start = colon + 1;
  }
}

void require(bool ok, std::string_view spec, std::string_view option, std::string_view applies_to) {
  if (!ok) fail("precision '{}': option '{}' applies to {} only", spec, option, applies_to);
}

}  // namespace

std::vector<std::string> supported_precisions() { return {"fp32", "bf16", "fp16", "int8", "w8", "int4", "nf4"}; }

LinearFormat parse_precision(std::string_view spec, const LinearFormat& defaults) {
  const std::vector<std::string_view> parts = split_colons(spec);
  LinearFormat f = defaults;
  f.precision = std::string(parts[0]);
  const auto names = supported_precisions();
  if (std::find(names.begin(), names.end(), f.precision) == names.end()) {
    fail("precision '{}': unknown format '{}'; expected one of {} (optionally with :g32|g64|g128, :sym|asym, :a8, "
         ":dq, :emulate)",
         spec, f.precision, fmt::join(names, ", "));
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string_view o = parts[i];
    if (o == "g32" || o == "g64" || o == "g128") {
      require(f.precision == "int4", spec, o, "int4");
      f.group_size = o == "g32" ? 32 : o == "g64" ? 64 : 128;
    } else if (o == "sym" || o == "asym") {
      require(f.precision == "int4", spec, o, "int4");
      f.int4_asymmetric = o == "asym";
    } else if (o == "a8") {
      require(f.precision == "int4", spec, o, "int4");
      f.int4_int8_activations = true;
    } else if (o == "dq") {
      require(f.precision == "nf4", spec, o, "nf4");
      f.nf4_double_quant = true;
    } else if (o == "emulate") {
      f.emulate = true;
    } else {
      fail("precision '{}': unknown option '{}'; expected g32, g64, g128, sym, asym, a8 (int4), dq (nf4) or emulate",
           spec, o);
    }
  }
  if (f.group_size != 32 && f.group_size != 64 && f.group_size != 128) {
    fail("precision '{}': int4 group size {}; expected 32, 64 or 128", spec, f.group_size);
  }
  return f;
}

std::string format_spec(const LinearFormat& f) {
  std::string s = f.precision;
  if (f.precision == "int4") {
    s += fmt::format(":g{}:{}", f.group_size, f.int4_asymmetric ? "asym" : "sym");
    if (f.int4_int8_activations) s += ":a8";
  }
  if (f.precision == "nf4" && f.nf4_double_quant) s += ":dq";
  if (f.emulate) s += ":emulate";
  return s;
}

std::unique_ptr<Linear> make_linear(const LinearFormat& format, const float* W, const float* bias, int64_t out,
                                    int64_t in, const std::string& tensor_name, const float* int8_smoothing) {
  const std::string& p = format.precision;
  if (int8_smoothing != nullptr && p != "int8") {
    fail("{}: SmoothQuant factors given for precision '{}'; expected them with int8 only", tensor_name, p);
  }
  if (p == "fp32") return make_linear_f32_onednn(W, bias, out, in);
  if (format.emulate) return make_linear_emulated(format, W, bias, out, in, tensor_name, int8_smoothing);
  if (p == "bf16") return make_linear_bf16(W, bias, out, in, tensor_name);
  if (p == "fp16") return make_linear_fp16_weights(W, bias, out, in, tensor_name);
  if (p == "int8") return make_linear_int8_w8a8(W, bias, out, in, tensor_name, int8_smoothing);
  if (p == "w8") return make_linear_w8(W, bias, out, in, tensor_name);
  if (p == "int4") {
    Int4Options o;
    o.group_size = format.group_size;
    o.asymmetric = format.int4_asymmetric;
    o.int8_activations = format.int4_int8_activations;
    return make_linear_int4(W, bias, out, in, o, tensor_name);
  }
  if (p == "nf4") {
    Nf4Options o;
    o.double_quant = format.nf4_double_quant;
    return make_linear_nf4(W, bias, out, in, o, tensor_name);
  }
  fail("{}: unknown precision '{}'; expected one of {}", tensor_name, p, fmt::join(supported_precisions(), ", "));
}

}  // namespace qjoule::kernels
