// The models and inputs a benchmark run times: the built-in synthetic DistilBERT or a checkpoint's
// config, and fixed token ids for classifiers and decoder prompts (the same for every precision).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "qjoule/model/encoder_config.h"

namespace qjoule::bench::detail {

bool is_synthetic(const std::string& model);  // the name of the built-in synthetic DistilBERT-base

// The encoder config of `model` (the synthetic model's sizes, or the checkpoint's config.json).
model::EncoderConfig config_of(const std::string& model);

// Token ids for timing: `count` sequences of exactly `seq` real tokens ([CLS] ... [SEP] where the
// vocabulary has them), so that the shape asked for is the shape timed.
std::vector<int32_t> timing_token_ids(const std::string& model, int64_t vocab, std::size_t count, std::size_t seq);

// Decoder prompts: `count` prompts of `n` pseudo-random ids in [0, vocab), the same for every
// precision. Prefill and decode throughput do not depend on which tokens they are (each token costs
// the same matmuls, and attention over the same number of positions), so no text or tokenizer is
// needed; a fixed sequence keeps runs comparable.
std::vector<int32_t> decoder_prompt_ids(int64_t vocab, std::size_t count, std::size_t n);

}  // namespace qjoule::bench::detail
