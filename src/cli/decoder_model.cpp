#include "cli/decoder_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/format_util.h"
#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/model/device_backend.h"
#include "qjoule/model/unused_tensors.h"

namespace qjoule::cli {

LoadedDecoder load_decoder(const std::string& dir, const QuantArgs& quant, const std::string& device) {
  // --device first: without a usable GPU, that is the one line to say.
  const bool on_gpu = device != "cpu";
  const int gpu = on_gpu ? kernels::require_cuda_device(device) : -1;
  const auto qopts = quantization_options(quant);
  const auto policy = on_gpu ? parse_cuda_layer_policy(qopts) : parse_layer_policy(qopts);
  if (qopts.smoothquant_alpha >= 0.0f)
    fail(
        "--precision {}: SmoothQuant is not supported for decoder models (it calibrates encoder classifiers); "
        "expected int8 without sq",
        quant.precision);
  const auto checkpoint = io::Checkpoint::open(dir);
  auto config = model::load_decoder_config(dir, checkpoint);
  auto tokenizer = tokenize::BpeTokenizer::from_tokenizer_json(dir);
  if (tokenizer.vocab_size() > config.vocab_size)
    fail("{}: the tokenizer has {} tokens but the model's vocabulary only {}", dir, tokenizer.vocab_size(),
         config.vocab_size);
  auto params = model::load_decoder_params(checkpoint, config, /*defer_linears=*/true);  // built one Linear at a time
  auto backend = model::device_backend(gpu, policy, qopts.format_defaults);
  LoadedDecoder out{model::DecoderLM(std::move(params), backend.linears, backend.ops), std::move(tokenizer), on_gpu};
  if (const auto unused = model::unused_tensors_warning(checkpoint); !unused.empty())
    fmt::print(stderr, "warning: {}\n", unused);
  return out;
}

void print_decoder_header(const std::string& dir, const LoadedDecoder& d, const QuantArgs& quant) {
  const auto& c = d.model.config();
  fmt::print("model      {} ({}: {} layers, hidden {}, heads {}/{}, vocab {}, positions {})\n", dir, c.architecture,
             c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.vocab_size, c.max_positions);
  if (!c.inferred_fields.empty())
    fmt::print("inferred   {} (absent from config.json)\n", fmt::join(c.inferred_fields, ", "));
  fmt::print("precision  {}: {}\n", quant.precision, kernel_summary(d.model.kernel_path_counts()));
  if (d.on_gpu)
    fmt::print("device     {} (every weight and the KV cache on the GPU; non-GEMM operations {})\n",
               d.model.device_name(), d.model.nongemm_path());
  fmt::print("size       {} held in {} ({} as FP32)\n", human_bytes(double(d.model.bytes_held())),
             d.on_gpu ? "GPU memory" : "memory", human_bytes(double(d.model.fp32_bytes())));
}

}  // namespace qjoule::cli
