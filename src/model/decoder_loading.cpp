#include "qjoule/model/decoder_loading.h"

#include <utility>

#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/calibrated_linear_factory.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/decoder_params.h"
#include "qjoule/model/device_backend.h"
#include "qjoule/model/unused_tensors.h"

namespace qjoule::model {

LoadedDecoder load_decoder(const std::filesystem::path& dir, int gpu, const quant::LayerPolicy& policy,
                           std::shared_ptr<CalibratedInt4> calibrated) {
  const auto checkpoint = io::Checkpoint::open(dir.string());
  auto config = load_decoder_config(dir.string(), checkpoint);
  auto tokenizer = tokenize::BpeTokenizer::from_tokenizer_json(dir.string());
  if (tokenizer.vocab_size() > config.vocab_size)
    fail("{}: the tokenizer has {} tokens but the model's vocabulary only {}", dir.string(), tokenizer.vocab_size(),
         config.vocab_size);
  auto params = load_decoder_params(checkpoint, config, /*defer_linears=*/true);  // built one Linear at a time
  if (calibrated) apply_calibrated_norms(params, *calibrated);                    // AWQ's scales folded into them
  auto backend = device_backend(gpu, policy);
  const LinearFactory linears =
      calibrated ? calibrated_linear_factory(backend.linears, std::move(calibrated), backend.int4_codes)
                 : backend.linears;
  return LoadedDecoder{DecoderLM(std::move(params), linears, backend.ops), std::move(tokenizer), gpu >= 0,
                       unused_tensors_warning(checkpoint), ""};
}

}  // namespace qjoule::model
