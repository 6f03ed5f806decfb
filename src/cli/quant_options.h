// The quantization options shared by `qjoule eval`, `ppl` and `generate`: --precision and its
// per-layer rules and format options, parsed into a layer policy that is validated before any model
// is loaded.
#pragma once

#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "qjoule/model/quantization_plan.h"
#include "qjoule/quant/format.h"

namespace qjoule::cli {

struct QuantArgs {
  std::string precision{quant::name(quant::Format::fp32)};
  std::string quant_include, quant_exclude, layer_precision;
  int group_size = 128;
  std::string int4_scheme = "sym";
  bool double_quant = false;
  bool emulate = false;
  // Which of the format-default flags the command line gave (add_quant_options binds them): each
  // applies to one format, and is refused where no layer runs that format.
  const CLI::Option *group_size_flag = nullptr, *int4_scheme_flag = nullptr, *double_quant_flag = nullptr;
  const CLI::Option* precision_flag = nullptr;
  std::string precision_origin;  // why `precision` is what it is, when the command line did not say (header)
};

// Adds --precision, --quant-include, --quant-exclude, --layer-precision, --group-size, --int4-scheme,
// --double-quant and --emulate; `layer_example` shows a --layer-precision rule with this model
// family's layer names.
void add_quant_options(CLI::App* cmd, QuantArgs& a, const std::string& layer_example);

// The options as the model layer takes them; bad values fail naming the option. SmoothQuant is on
// when --precision says int8:sq=ALPHA (smoothquant_alpha = ALPHA), off otherwise.
model::QuantizationOptions quantization_options(const QuantArgs& a);

// The layer policy, with every format it names checked (options included) against the defaults and
// against the CPU's kernels; SmoothQuant in a --layer-precision rule fails (one alpha per model, in
// --precision). A spec in the old spelling (int4:g64) prints one note on stderr.
quant::LayerPolicy parse_layer_policy(const model::QuantizationOptions& q);

// The layer policy for a GPU model: every format it names must have a CUDA kernel (tf32 and fp8 are
// names there too), checked before any model is loaded.
quant::LayerPolicy parse_cuda_layer_policy(const model::QuantizationOptions& q);

// Kernel paths used, with how many Linears ran each: "fp32 onednn:gemm:jit:f32 ×30, ...".
std::string kernel_summary(const std::map<std::string, int>& counts);

}  // namespace qjoule::cli
