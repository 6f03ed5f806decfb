// What `qjoule bench` checks before any run: which models are decoders, that each precision is a
// format spec some kernel on its device runs, and every configuration of a sweep (one line naming the run).
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_inputs.h"
#include "qjoule/bench/bench_runner.h"
#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/linear_cuda.h"
#include "qjoule/kernels/make_linear.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/prequantized/prequantized_linear.h"
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
    std::optional<quant::FormatSpec> prequantized;  // a pre-quantized checkpoint's own format
    std::string prequantized_from;
  };
  std::map<std::string, ModelShape> models;
  const auto shape_of = [](const std::string& model) {
    const auto with_quantization = [](ModelShape shape, const std::optional<model::CheckpointQuantization>& q) {
      if (q) {
        shape.prequantized = model::prequantized_spec(*q);
        shape.prequantized_from = q->describe();
      }
      return shape;
    };
    if (!is_decoder_model(model)) {
      const auto config = config_of(model);
      return with_quantization(ModelShape{false, config.max_positions, std::nullopt, ""}, config.quantization);
    }
    const auto checkpoint = io::Checkpoint::open(model);
    const auto config = model::load_decoder_config(model, checkpoint);
    return with_quantization(ModelShape{true, config.max_positions, std::nullopt, ""}, config.quantization);
  };
  for (const auto& c : configs) {
    const bool on_gpu = c.device != "cpu";
    if (on_gpu) kernels::require_cuda_device(c.device);  // one line saying why not, where no GPU can run
    const std::string what = fmt::format("run {}: precision '{}'", run_name(c), c.precision);
    const quant::FormatSpec& spec = c.precision.spec_or_fail();
    if (on_gpu) {
      kernels::check_cuda_format(spec, what);
    } else {
      kernels::require_cpu_format(spec, what);
    }
    if (c.batch == 0) fail("run {}: batch 0, expected at least 1", run_name(c));
    if (c.threads <= 0) fail("run {}: threads {}, expected at least 1", run_name(c), c.threads);
    auto it = models.find(c.model);
    if (it == models.end()) it = models.emplace(c.model, shape_of(c.model)).first;
    const auto& own = it->second.prequantized;
    if (own && spec != *own)
      fail(
          "run {}: precision '{}', but model '{}' is a pre-quantized checkpoint ({}) whose codes run as {}: give "
          "--precisions {} (for other formats, bench the unquantized model)",
          run_name(c), c.precision, c.model, it->second.prequantized_from, quant::to_string(*own),
          quant::to_string(*own));
    if (own && on_gpu)
      fail("run {}: model '{}' is a pre-quantized checkpoint ({}); its Linears run on the CPU only, for now",
           run_name(c), c.model, it->second.prequantized_from);
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

void validate_reference(const std::vector<RunConfig>& configs, const std::string& reference) {
  if (reference.empty()) return;
  const std::string where = "--reference " + reference;
  std::error_code ec;
  if (!std::filesystem::is_directory(reference, ec))
    fail("{}: not a folder; expected the unquantized model of the sweep's pre-quantized checkpoints", where);
  bool any = false;
  std::set<std::string> seen;
  for (const auto& c : configs) {
    if (!seen.insert(c.model).second || is_synthetic(c.model)) continue;
    // (name, the model's value, the reference's value) of every shape both must share.
    std::vector<std::tuple<const char*, int64_t, int64_t>> shapes;
    std::optional<model::CheckpointQuantization> q, ref_q;
    std::string arch, ref_arch;
    if (is_decoder_model(c.model)) {
      if (!is_decoder_model(reference))
        fail("{}: not a decoder language model, but model '{}' is one; expected its unquantized model", where, c.model);
      const auto ck = io::Checkpoint::open(c.model), ref_ck = io::Checkpoint::open(reference);
      const auto m = model::load_decoder_config(c.model, ck), r = model::load_decoder_config(reference, ref_ck);
      q = m.quantization;
      ref_q = r.quantization;
      arch = m.architecture;
      ref_arch = r.architecture;
      shapes = {{"hidden_size", m.hidden_size, r.hidden_size},
                {"num_hidden_layers", m.num_layers, r.num_layers},
                {"num_attention_heads", m.num_heads, r.num_heads},
                {"num_key_value_heads", m.num_kv_heads, r.num_kv_heads},
                {"intermediate_size", m.intermediate_size, r.intermediate_size},
                {"vocab_size", m.vocab_size, r.vocab_size}};
    } else {
      if (is_decoder_model(reference))
        fail("{}: a decoder language model, but model '{}' is an encoder classifier; expected its unquantized model",
             where, c.model);
      const auto m = config_of(c.model), r = config_of(reference);
      q = m.quantization;
      ref_q = r.quantization;
      arch = m.architecture;
      ref_arch = r.architecture;
      shapes = {{"hidden_size", m.hidden_size, r.hidden_size},
                {"num_hidden_layers", m.num_layers, r.num_layers},
                {"num_attention_heads", m.num_heads, r.num_heads},
                {"intermediate_size", m.intermediate_size, r.intermediate_size},
                {"vocab_size", m.vocab_size, r.vocab_size},
                {"num_labels", m.num_labels, r.num_labels}};
    }
    if (!q) continue;
    any = true;
    if (ref_q)
      fail("{}: a pre-quantized checkpoint itself ({}); expected the unquantized model of '{}'", where,
           ref_q->describe(), c.model);
    if (arch != ref_arch)
      fail("{}: a {}, but model '{}' is a {}; expected its unquantized model", where, ref_arch, c.model, arch);
    for (const auto& [name, mine, theirs] : shapes)
      if (mine != theirs)
        fail("{}: {} = {}, but model '{}' has {}; expected its unquantized model", where, name, theirs, c.model, mine);
  }
  if (!any)
    fail("{}: no model of this sweep is a pre-quantized checkpoint; an unquantized model is its own FP32 reference",
         where);
}

}  // namespace qjoule::bench
