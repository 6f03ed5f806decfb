// Perplexity of a decoder language model over a token sequence, in windows of `ctx` tokens moved by
// `stride` (Hugging Face's strided perplexity):
//   for begin = 0, stride, 2·stride, ...: end = min(begin + ctx, N); the window runs ids[begin, end)
//   from an empty KV cache and scores the targets t in [max(begin + 1, previous end), end), each with
//   −log p(ids[t] | ids[begin, t)); the last window is the one that reaches N.
//   PPL = exp(Σ nll / scored tokens). With stride < ctx every token but the first is scored exactly
//   once; with stride = ctx the first token of each window has no context and is not scored.
// With a KL base (an FP32 run's log-probabilities over the same tokens, see kl_base.h) it also gives
// the mean KL divergence KL(base ‖ this), top-1 agreement and ΔPPL.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "qjoule/eval/kl_base.h"
#include "qjoule/model/decoder_lm.h"

namespace qjoule::eval {

struct PerplexityWindow {
  int64_t begin = 0, end = 0;  // the tokens the window runs
  int64_t score_from = 0;      // the first target it scores
};

// The windows for n_tokens (≥ 2); ctx ≥ 2 and 1 ≤ stride ≤ ctx, else an error naming the option.
std::vector<PerplexityWindow> perplexity_windows(int64_t n_tokens, int64_t ctx, int64_t stride);

struct KlStats {
  double mean_kl = 0.0;  // nats per scored token
  double max_kl = 0.0;
  double top1_agreement = 0.0;  // fraction of scored tokens whose argmax equals the base's
  double base_ppl = 0.0;
  double delta_ppl = 0.0;  // ppl − base_ppl
};

struct PerplexityResult {
  int64_t n_tokens = 0, scored = 0, windows = 0;
  int64_t ctx = 0, stride = 0;
  double nll_sum = 0.0;
  double seconds = 0.0;
  bool has_kl = false;
  KlStats kl;
  double ppl() const;
};

struct PerplexityOptions {
  int64_t ctx = 0;
  int64_t stride = 0;
  const KlBase* kl_base = nullptr;  // compare with it (must match ids, ctx and stride)
  KlBase* save_kl_base = nullptr;   // fill it with this run's log-probabilities
  std::function<void(int64_t windows_done, int64_t windows_total)> progress;
};

PerplexityResult evaluate_perplexity(const model::DecoderLM& model, const std::vector<int32_t>& ids,
                                     const PerplexityOptions& options);

}  // namespace qjoule::eval
