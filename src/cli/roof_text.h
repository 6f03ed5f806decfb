// The roofline fraction `qjoule generate` and `ppl` print beside their speeds, as `bench` records it
// (bench/record_roofline.h): "41% of the limit (memory: read 24.6 GB/s)". On a GPU, and where the
// machine's limits lack a figure, the text says so instead.
#pragma once

#include <cstdint>
#include <string>

#include "qjoule/model/decoder_lm.h"

namespace qjoule::cli {

// A forward of `seq` tokens with logits for `logits_rows` of them, at `tokens_per_s` tokens forwarded.
std::string prefill_roof_text(const model::DecoderLM& m, int64_t seq, int64_t logits_rows, double tokens_per_s,
                              bool on_gpu);
// `steps` decode steps after a `prompt`-token prefill, at `tokens_per_s`.
std::string decode_roof_text(const model::DecoderLM& m, int64_t prompt, int64_t steps, double tokens_per_s,
                             bool on_gpu);

}  // namespace qjoule::cli
