// The work of a run's measured phases, from the built model's shapes and formats, for the roofline
// (qjoule/limits/roofline.h): arithmetic per token (every Linear's 2·N·K, the attention's products) and
// bytes read from memory per token (the Linears' weights as held, once per forward pass over that
// pass's tokens; in decode also one embedding row and the KV cache). Heads that run on one token per
// sequence (a classifier's pooler and classifier, a decoder's lm_head in prefill) count once per
// sequence. Activations are not counted: at these shapes they stay near the caches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qjoule/limits/roofline.h"
#include "qjoule/model/encoder_classifier.h"

namespace qjoule::model {
class DecoderLM;
}

namespace qjoule::bench {

// The type a Linear's prefill GEMM (more than 4 rows) multiplies in, from its kernel path: int8 for
// u8·s8 products, bf16 for BF16 products (bf16 panels, oneDNN's bf16bf16f32, AMX BF16), else fp32; on
// the GPU cuBLASLt's type (f32, tf32, f16, bf16, s8, e4m3; the 4-bit panels' f16).
limits::ComputeType prefill_compute_type(const std::string& kernel_path);

// An encoder's timed batches: batch sequences of seq tokens, run in passes of
// EncoderClassifier::sequences_per_pass sequences (the weights read once per pass).
limits::PhaseWork encoder_phase_work(const model::EncoderClassifier& m, int64_t batch, int64_t seq);

// A decoder's forward of `seq` tokens in one pass with the lm_head on its last `logits_rows` tokens (a
// prefill: the last token only; a perplexity window: the tokens it scores).
limits::PhaseWork decoder_prefill_work(const model::DecoderLM& m, int64_t seq, int64_t logits_rows = 1);

// A decoder's decode steps after a `prompt`-token prefill, `steps` of them: bytes read per generated
// token (every Linear, one embedding row, the FP32 keys and values each layer's attention reads: the mean
// context, or at most a sliding window).
double decoder_decode_bytes_per_token(const model::DecoderLM& m, int64_t prompt, int64_t steps);
// Their arithmetic per generated token: every Linear (the lm_head included) and the attention over the
// mean context.
double decoder_decode_flops_per_token(const model::DecoderLM& m, int64_t prompt, int64_t steps);

}  // namespace qjoule::bench
