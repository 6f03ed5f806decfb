#include "cli/decoder_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/format_util.h"
#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/unused_tensors.h"

namespace qjoule::cli {

LoadedDecoder load_decoder(const std::string& dir, const QuantArgs& quant) {
  const auto qopts = quantization_options(quant);
  const auto policy = parse_layer_policy(qopts);
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
  LoadedDecoder out{model::DecoderLM(std::move(params), model::quantized_linear_factory(policy, qopts.format_defaults)),
                    std::move(tokenizer)};
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
  fmt::print("size       {} held in memory ({} as FP32)\n", human_bytes(double(d.model.bytes_held())),
             human_bytes(double(d.model.fp32_bytes())));
}

}  // namespace qjoule::cli
