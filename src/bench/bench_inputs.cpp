#include "bench/bench_inputs.h"

#include "qjoule/bench/bench_runner.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/synthetic/synthetic_encoder.h"

namespace qjoule::bench::detail {

bool is_synthetic(const std::string& model) { return model == kSyntheticModelName; }

model::EncoderConfig config_of(const std::string& model) {
  if (is_synthetic(model)) {
    const auto spec = model::distilbert_base_spec();
    model::EncoderConfig c;
    c.vocab_size = spec.vocab_size;
    c.max_positions = spec.max_positions;
    c.num_labels = spec.num_labels;
    return c;
  }
  const auto checkpoint = io::Checkpoint::open(model);
  return model::load_encoder_config(model, checkpoint);
}

std::vector<int32_t> timing_token_ids(const std::string& model, int64_t vocab, std::size_t count, std::size_t seq) {
  if (is_synthetic(model)) return model::synthetic_token_ids(model::distilbert_base_spec(), count, seq);
  std::vector<int32_t> ids(count * seq);
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  const int64_t low = vocab > 2000 ? 1000 : 0;
  for (std::size_t s = 0; s < count; ++s) {
    for (std::size_t t = 0; t < seq; ++t) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      ids[s * seq + t] = static_cast<int32_t>(low + static_cast<int64_t>((state >> 33) % std::uint64_t(vocab - low)));
    }
    if (vocab > 102) {
      ids[s * seq] = 101;
      ids[s * seq + seq - 1] = 102;
    }
  }
  return ids;
}

std::vector<int32_t> decoder_prompt_ids(int64_t vocab, std::size_t count, std::size_t n) {
  std::vector<int32_t> ids(count * n);
  std::uint64_t state = 0x2545f4914f6cdd1dull;
  for (auto& id : ids) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((state >> 33) % static_cast<std::uint64_t>(vocab));
  }
  return ids;
}

}  // namespace qjoule::bench::detail
