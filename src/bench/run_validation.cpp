// What `qjoule bench` checks before any run: which models are decoders, how a precision splits into
// the Linear format and SmoothQuant, and every configuration of a sweep (one line naming the run).
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

namespace qjoule::bench {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const auto end = text.find(sep, start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

}  // namespace

using detail::config_of;
using detail::is_synthetic;

bool is_decoder_model(const std::string& model) {
  if (is_synthetic(model)) return false;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::filesystem::path(model) / "config.json", ec)) return false;
  return model::model_family(model) == model::ModelFamily::Decoder;
}

PrecisionPlan plan_precision(const std::string& precision) {
  PrecisionPlan plan;
  const auto parts = split(precision, ':');
  plan.linear_spec = parts.front();
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string& opt = parts[i];
    if (opt.size() > 2 && opt.rfind("sq", 0) == 0) {
      try {
        std::size_t used = 0;
        plan.smoothquant_alpha = std::stof(opt.substr(2), &used);
        if (used != opt.size() - 2) throw std::invalid_argument(opt);
      } catch (const std::exception&) {
        fail("precision '{}': SmoothQuant option '{}' is not sq<ALPHA>, e.g. sq0.5", precision, opt);
      }
      if (!(plan.smoothquant_alpha >= 0.0f && plan.smoothquant_alpha <= 1.0f))
        fail("precision '{}': SmoothQuant alpha {} is outside [0, 1]", precision, plan.smoothquant_alpha);
      if (parts.front() != "int8") fail("precision '{}': SmoothQuant (sq) applies to int8 only", precision);
      continue;
    }
    plan.linear_spec += ":" + opt;
  }
  return plan;
}

void validate_configs(const std::vector<RunConfig>& configs, std::size_t decode_tokens) {
  struct ModelShape {
    bool decoder = false;
    int64_t max_positions = 0;
  };
  std::map<std::string, ModelShape> models;
  const auto shape_of = [](const std::string& model) {
    if (!is_decoder_model(model)) return ModelShape{false, config_of(model).max_positions};
    const auto checkpoint = io::Checkpoint::open(model);
    return ModelShape{true, model::load_decoder_config(model, checkpoint).max_positions};
  };
  for (const auto& c : configs) {
    const bool on_gpu = c.device != "cpu";
    if (on_gpu) kernels::require_cuda_device(c.device);  // one line saying why not, where no GPU can run
    const PrecisionPlan plan = plan_precision(c.precision);
    if (on_gpu) {
      kernels::check_cuda_format(kernels::parse_cuda_precision(plan.linear_spec),
                                 fmt::format("run {}: precision '{}'", run_name(c), c.precision));
      if (plan.smoothquant_alpha >= 0.0f)
        fail("run {}: precision '{}': SmoothQuant runs on the CPU only (the GPU int8 layers quantize activations per "
             "token without smoothing)",
             run_name(c), c.precision);
    } else {
      kernels::parse_precision(plan.linear_spec);
    }
    if (c.batch == 0) fail("run {}: batch 0, expected at least 1", run_name(c));
    if (c.threads <= 0) fail("run {}: threads {}, expected at least 1", run_name(c), c.threads);
    auto it = models.find(c.model);
    if (it == models.end()) it = models.emplace(c.model, shape_of(c.model)).first;
    if (it->second.decoder) {
      if (on_gpu)
        fail("run {}: decoder model '{}' on --device {}: decoder models do not run on the GPU yet; use --device cpu",
             run_name(c), c.model, c.device);
      if (c.batch != 1)
        fail("run {}: batch {} with decoder model '{}': decoder runs time one sequence (a prefill of seq prompt "
             "tokens, then decode steps), expected batch 1",
             run_name(c), c.batch, c.model);
      if (plan_precision(c.precision).smoothquant_alpha >= 0.0f)
        fail("run {}: precision '{}': SmoothQuant is not supported for decoder model '{}'", run_name(c), c.precision,
             c.model);
      if (decode_tokens == 0) fail("run {}: 0 decode tokens, expected at least 1 (--decode-tokens)", run_name(c));
      if (c.seq + decode_tokens > static_cast<std::size_t>(it->second.max_positions))
        fail("run {}: {} prompt tokens (seq) + {} decode tokens (--decode-tokens) = {} is more than the {} positions "
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
