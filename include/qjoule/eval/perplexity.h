// Perplexity of a decoder language model over a token sequence, in windows of `ctx` tokens moved by
// `stride` (Hugging Face's strided perplexity):
//   for begin = 0, stride, 2·stride, ...: end = min(begin + ctx, N); the window runs ids[begin, end)
//   from an empty KV cache and scores the targets t in [max(begin + 1, previous end), end), each with
//   −log p(ids[t] | ids[begin, t)); the last window is the one that reaches N.
//   PPL = exp(Σ nll / scored tokens). With stride < ctx every token but the first is scored exactly
//   once; with stride = ctx the first token of each window has no context and is not scored.
//   Its standard error is PPL · sqrt(var(nll) / (n − 1)) (var over the n scored tokens' NLLs, the
//   delta method, as llama.cpp's perplexity tool reports it).
// With a KL base (an FP32 run's log-probabilities over the same tokens, see kl_base.h) it also gives,
// per scored token t with base distribution P and this run's Q (natural logs, so nats):
//   KL_t = Σ_v P(v) (log P(v) − log Q(v))      (KL(base ‖ this), over the whole vocabulary)
//   mean, median, p99 (linear interpolation between order statistics) and max of KL_t;
//   the same-top-token rate: the fraction of t with argmax Q = argmax P;
//   RMS Δp = sqrt(mean_t (Q(x_t) − P(x_t))²), x_t the text's token (a probability, 0..1);
//   ΔPPL = PPL − the base's PPL.
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
  double median_kl = 0.0, p99_kl = 0.0, max_kl = 0.0;
  double top1_agreement = 0.0;  // same-top-token rate: fraction of scored tokens whose argmax equals the base's
  double rms_dp = 0.0;          // RMS of the text token's probability change
  double base_ppl = 0.0;
  double delta_ppl = 0.0;  // ppl − base_ppl
  // Standard errors, paired token by token with the base: ΔPPL's by the delta method over the two runs'
  // per-token NLLs and their covariance (llama.cpp's perplexity tool does the same), the base's NLL of
  // each token read from its FP16 log-probabilities; mean_kl's as the mean of the per-token KLs.
  double delta_ppl_stderr = 0.0, kl_stderr = 0.0;
};

struct PerplexityResult {
  int64_t n_tokens = 0, scored = 0, windows = 0;
  int64_t ctx = 0, stride = 0;
  double nll_sum = 0.0, nll_sq_sum = 0.0;  // Σ nll and Σ nll² over the scored tokens
  double seconds = 0.0;
  bool has_kl = false;
  KlStats kl;
  double ppl() const;
  double nll_mean() const;
  double ppl_stderr() const;  // 0 with fewer than 2 scored tokens
};

// One scored window, as evaluate_perplexity hands it to PerplexityOptions::on_window.
struct ScoredWindow {
  int64_t index = 0, windows = 0;            // this window, of how many
  int64_t scored = 0;                        // tokens it scored
  int64_t scored_before = 0;                 // tokens the windows before it scored
  double nll_sum = 0.0;                      // of its scored tokens
  const uint16_t* fp16_log_probs = nullptr;  // [scored, vocab] when PerplexityOptions::fp16_log_probs
};

struct PerplexityOptions {
  int64_t ctx = 0;
  int64_t stride = 0;
  const KlBase* kl_base = nullptr;  // compare with it (must match ids, ctx and stride)
  KlBase* save_kl_base = nullptr;   // fill it with this run's log-probabilities
  // Windows before this one are not run (their tokens still count in `scored`, not in the sums): a
  // resumed KL base computation. Not with kl_base.
  int64_t first_window = 0;
  bool fp16_log_probs = false;  // hand each window's FP16 log-probabilities to on_window
  std::function<void(const ScoredWindow&)> on_window;
  std::function<void(int64_t windows_done, int64_t windows_total)> progress;
};

PerplexityResult evaluate_perplexity(const model::DecoderLM& model, const std::vector<int32_t>& ids,
                                     const PerplexityOptions& options);

}  // namespace qjoule::eval
