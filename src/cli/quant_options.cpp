#include "cli/quant_options.h"

#include <fmt/format.h>

#include <utility>

#include "qjoule/error.h"
#include "qjoule/kernels/linear_cuda.h"
#include "qjoule/kernels/make_linear.h"
#include "qjoule/quant/format_spec.h"
#include "qjoule/quant/layer_policy.h"
#include "qjoule/kernels/backend_registry.h"

namespace qjoule::cli {

void add_quant_options(CLI::App* cmd, QuantArgs& a, const std::string& layer_example) {
  a.precision_flag = cmd->add_option("--precision", a.precision,
                                     "Format of the Linear layers inside transformer blocks: " +
                                         kernels::backend_format_names(kernels::Backend::cpu) +
                                         " (see `qjoule info --formats`); options as NAME:OPTION, e.g. "
                                         "int4:g=64:asym, nf4:dq, int8:sq=0.5 (SmoothQuant). Default: fp32, or a "
                                         "pre-quantized checkpoint's own format (GPTQ, AWQ, bitsandbytes)")
                         ->capture_default_str();
  cmd->add_option("--quant-include", a.quant_include,
                  "Comma-separated globs over layer names to quantize (default: the Linears inside blocks)");
  cmd->add_option("--quant-exclude", a.quant_exclude, "Comma-separated globs over layer names to keep in FP32");
  cmd->add_option("--layer-precision", a.layer_precision,
                  "Per-layer formats, first match wins: 'PATTERN=FORMAT,...', e.g. '" + layer_example + "'");
  a.group_size_flag =
      cmd->add_option("--group-size", a.group_size, "int4: weights per scale along the input dimension (32, 64, 128)")
          ->capture_default_str();
  a.int4_scheme_flag =
      cmd->add_option("--int4-scheme", a.int4_scheme, "int4: sym or asym (with zero points)")->capture_default_str();
  a.double_quant_flag = cmd->add_flag("--double-quant", a.double_quant,
                                      "nf4: quantize the absmax values to 8 bits (bitsandbytes' scheme)");
  cmd->add_flag("--emulate", a.emulate,
                "Fake quantization (quantize, dequantize, FP32 kernels): accuracy studies only; its speed is "
                "not representative and is labelled so");
}

model::QuantizationOptions quantization_options(const QuantArgs& a) {
  model::QuantizationOptions q;
  q.policy.precision = a.precision;
  q.policy.include = a.quant_include;
  q.policy.exclude = a.quant_exclude;
  q.policy.layer_precision = a.layer_precision;
  if (a.group_size != 32 && a.group_size != 64 && a.group_size != 128)
    fail("--group-size {} is not supported, expected 32, 64 or 128", a.group_size);
  if (a.int4_scheme != "sym" && a.int4_scheme != "asym")
    fail("--int4-scheme '{}' is not supported, expected sym or asym", a.int4_scheme);
  q.format_defaults.group_size = a.group_size;
  q.format_defaults.int4_asymmetric = a.int4_scheme == "asym";
  q.format_defaults.nf4_double_quant = a.double_quant;
  q.format_defaults.emulate = a.emulate;
  // A flag that sets one format's defaults means nothing where no layer runs that format: say so
  // rather than ignore it (`--precision int8 --group-size 64`).
  const auto runs = [&](quant::Format format) {
    const auto policy = quant::LayerPolicy::parse(q.policy, q.format_defaults);
    if (policy.precision_spec().format == format) return true;
    for (const auto& rule : policy.rules())
      if (rule.spec.format == format) return true;
    return false;
  };
  const auto given = [](const CLI::Option* flag) { return flag != nullptr && flag->count() > 0; };
  for (const auto& [flag, format] :
       {std::pair{a.group_size_flag, quant::Format::int4}, std::pair{a.int4_scheme_flag, quant::Format::int4},
        std::pair{a.double_quant_flag, quant::Format::nf4}}) {
    if (given(flag) && !runs(format))
      fail(
          "{} applies to {} only, and no layer runs {} (--precision {}{}); expected --precision {} or a "
          "--layer-precision rule with it",
          flag->get_name(), format, format, a.precision,
          a.layer_precision.empty() ? "" : ", --layer-precision '" + a.layer_precision + "'", format);
  }
  if (const auto spec = quant::parse_format_spec(a.precision, q.format_defaults); spec.smoothquant_alpha)
    q.smoothquant_alpha = *spec.smoothquant_alpha;
  return q;
}

quant::LayerPolicy parse_layer_policy(const model::QuantizationOptions& q) {
  // The one parse of the formats (with the flags' defaults); below this, every layer reads its FormatSpec.
  auto policy = quant::LayerPolicy::parse(q.policy, q.format_defaults);
  const auto check = [&](const std::string& text, const quant::FormatSpec& spec, const std::string& what) {
    kernels::require_cpu_format(spec, what);
    if (const auto note = quant::old_spelling_note(text); !note.empty()) fmt::print(stderr, "note: {}\n", note);
  };
  check(policy.precision(), policy.precision_spec(), "--precision " + policy.precision());
  for (const auto& rule : policy.rules()) {
    const std::string what = fmt::format("--layer-precision '{}={}'", rule.pattern, rule.format);
    check(rule.format, rule.spec, what);
    if (rule.spec.smoothquant_alpha)
      fail("{}: SmoothQuant takes one alpha for the whole model; write it in --precision (e.g. int8:sq=0.5)", what);
  }
  return policy;
}

// The layer policy for the GPU model: every format it names must have a CUDA kernel ("tf32" and "fp8"
// are names there too), checked before any model is loaded.
quant::LayerPolicy parse_cuda_layer_policy(const model::QuantizationOptions& q) {
  auto policy = quant::LayerPolicy::parse(q.policy, q.format_defaults);
  kernels::check_cuda_format(policy.precision_spec(), "--precision " + policy.precision() + " on the GPU");
  for (const auto& rule : policy.rules())
    kernels::check_cuda_format(rule.spec,
                               fmt::format("--layer-precision '{}={}' on the GPU", rule.pattern, rule.format));
  return policy;
}

std::string kernel_summary(const std::map<std::string, int>& counts) {
  std::string out;
  for (const auto& [path, n] : counts) out += fmt::format("{}{} ×{}", out.empty() ? "" : ", ", path, n);
  return out;
}

}  // namespace qjoule::cli
