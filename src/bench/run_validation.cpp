// What `qjoule bench` checks before any run: which models are decoders, that each precision is a
// format spec some kernel on its device runs, and every configuration of a sweep (one line naming the run).
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "bench/bench_inputs.h"
#include "qjoule/bench/bench_runner.h"
#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/linear_cuda.h"
#include "qjoule/kernels/make_linear.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/prequantized_linear.h"
#include "qjoule/quant/format_spec.h"

namespace qjoule::bench {

using detail::config_of;
using detail::is_synthetic;

bool is_decoder_model(const std::string& model) {
  if (is_synthetic(model)) return false;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::filesystem::path(model) / "config.json", ec)) return false;
  return model::model_family(model) == model::ModelFamily::Decoder;
}

void validate_configs(const std::vector<RunConfig>& configs, std::size_t decode_tokens) {
  struct ModelShape {
    bool decoder = false;
    int64_t max_positions = 0;
    std::string prequantized_precision, prequantized_from;  // a pre-quantized checkpoint's own format
  };
  std::map<std::string, ModelShape> models;
  const auto shape_of = [](const std::string& model) {
    if (!is_decoder_model(model)) return ModelShape{false, config_of(model).max_positions, "", ""};
    const auto checkpoint = io::Checkpoint::open(model);
    const auto config = model::load_decoder_config(model, checkpoint);
    ModelShape shape{true, config.max_positions, "", ""};
    if (config.quantization) {
      shape.prequantized_precision = model::prequantized_precision(*config.quantization);
      shape.prequantized_from = config.quantization->describe();
    }
    return shape;
  };
  for (const auto& c : configs) {
    const bool on_gpu = c.device != "cpu";
    if (on_gpu) kernels::require_cuda_device(c.device);  // one line saying why not, where no GPU can run
    const std::string what = fmt::format("run {}: precision '{}'", run_name(c), c.precision);
    const quant::FormatSpec spec = quant::parse_format_spec(c.precision);
    if (on_gpu) {
      kernels::check_cuda_format(spec, what);
    } else {
      kernels::require_cpu_format(spec, what);
    }
    if (c.batch == 0) fail("run {}: batch 0, expected at least 1", run_name(c));
    if (c.threads <= 0) fail("run {}: threads {}, expected at least 1", run_name(c), c.threads);
    auto it = models.find(c.model);
    if (it == models.end()) it = models.emplace(c.model, shape_of(c.model)).first;
    if (it->second.decoder) {
      if (c.batch != 1)
        fail(
            "run {}: batch {} with decoder model '{}': decoder runs time one sequence (a prefill of seq prompt "
            "tokens, then decode steps), expected batch 1",
            run_name(c), c.batch, c.model);
      if (spec.smoothquant_alpha)
        fail("run {}: precision '{}': SmoothQuant is not supported for decoder model '{}'", run_name(c), c.precision,
             c.model);
      if (decode_tokens == 0) fail("run {}: 0 decode tokens, expected at least 1 (--decode-tokens)", run_name(c));
      const auto& own = it->second.prequantized_precision;
      if (!own.empty() && spec != quant::parse_format_spec(own))
        fail(
            "run {}: precision '{}', but model '{}' is a pre-quantized checkpoint ({}) whose codes run as {}: give "
            "--precisions {} (for other formats, bench the unquantized model)",
            run_name(c), c.precision, c.model, it->second.prequantized_from, own, own);
      if (!own.empty() && on_gpu)
        fail("run {}: model '{}' is a pre-quantized checkpoint ({}); its Linears run on the CPU only, for now",
             run_name(c), c.model, it->second.prequantized_from);
      if (c.seq + decode_tokens > static_cast<std::size_t>(it->second.max_positions))
        fail(
            "run {}: {} prompt tokens (seq) + {} decode tokens (--decode-tokens) = {} is more than the {} positions "
            "model '{}' has (max_position_embeddings)",
            run_name(c), c.seq, decode_tokens, c.seq + decode_tokens, it->second.max_positions, c.model);
      continue;
    }
    if (c.seq < 2 || c.seq > static_cast<std::size_t>(it->second.max_positions))
      fail("run {}: sequence length {} is outside what model '{}' takes: 2 to {} tokens (max_position_embeddings)",
           run_name(c), c.seq, c.model, it->second.max_positions);
  }
}

}  // namespace qjoule::bench
