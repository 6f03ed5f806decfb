#include "qjoule/eval/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "qjoule/eval/finite_logits.h"
#include "qjoule/error.h"
#include "qjoule/kernels/decoder_ops.h"
#include "qjoule/quant/fp16_convert.h"

namespace qjoule::eval {
namespace {

int64_t argmax(const float* x, int64_t n) { return std::max_element(x, x + n) - x; }

void check_kl_base(const KlBase& base, const std::vector<int32_t>& ids, int64_t ctx, int64_t stride, int64_t vocab,
                   int64_t scored) {
  if (base.vocab_size != vocab)
    fail("--kl-base: written for a vocabulary of {} tokens, but this model has {}", base.vocab_size, vocab);
  if (base.ctx != ctx || base.stride != stride)
    fail("--kl-base: written with --ctx {} --stride {}, but this run uses --ctx {} --stride {}", base.ctx, base.stride,
         ctx, stride);
  if (base.token_ids.size() != ids.size())
    fail("--kl-base: written over {} tokens, but this run has {} (same text, tokenizer and --max-tokens?)",
         base.token_ids.size(), ids.size());
  const auto diff = std::mismatch(ids.begin(), ids.end(), base.token_ids.begin());
  if (diff.first != ids.end())
    fail("--kl-base: token {} differs (base id {}, this run {}): not the same text or tokenizer",
         diff.first - ids.begin(), *diff.second, *diff.first);
  if (base.scored != scored) fail("--kl-base: scores {} tokens, this run {}", base.scored, scored);
}

}  // namespace

double PerplexityResult::ppl() const { return scored > 0 ? std::exp(nll_sum / static_cast<double>(scored)) : 0.0; }

double PerplexityResult::nll_mean() const { return scored > 0 ? nll_sum / static_cast<double>(scored) : 0.0; }

double PerplexityResult::ppl_stderr() const {
  if (scored < 2) return 0.0;
  const double n = static_cast<double>(scored);
  const double mean = nll_sum / n;
  const double variance = std::max(0.0, nll_sq_sum / n - mean * mean);
  return ppl() * std::sqrt(variance / (n - 1.0));
}

std::vector<PerplexityWindow> perplexity_windows(int64_t n_tokens, int64_t ctx, int64_t stride) {
  if (ctx < 2) fail("--ctx {} is too small, expected at least 2 tokens", ctx);
  if (stride < 1 || stride > ctx) fail("--stride {} is out of range, expected 1 to --ctx ({})", stride, ctx);
  if (n_tokens < 2) fail("the text has {} token(s), perplexity needs at least 2", n_tokens);
  std::vector<PerplexityWindow> windows;
  int64_t prev_end = 0;
  for (int64_t begin = 0;; begin += stride) {
    const int64_t end = std::min(begin + ctx, n_tokens);
    windows.push_back({begin, end, std::max(begin + 1, prev_end)});
    prev_end = end;
    if (end == n_tokens) break;
  }
  return windows;
}

// Linear interpolation between order statistics, p in [0, 1].
static double percentile_of_sorted(const std::vector<double>& sorted, double p) {
  const double rank = (static_cast<double>(sorted.size()) - 1.0) * p;
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (rank - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

PerplexityResult evaluate_perplexity(const model::DecoderLM& model, const std::vector<int32_t>& ids,
                                     const PerplexityOptions& options) {
  const auto& cfg = model.config();
  if (options.ctx > cfg.max_positions)
    fail("--ctx {} is beyond the model's max_position_embeddings = {}", options.ctx, cfg.max_positions);
  const auto windows = perplexity_windows(static_cast<int64_t>(ids.size()), options.ctx, options.stride);
  const int64_t vocab = cfg.vocab_size;
  PerplexityResult r;
  r.n_tokens = static_cast<int64_t>(ids.size());
  r.ctx = options.ctx;
  r.stride = options.stride;
  r.windows = static_cast<int64_t>(windows.size());
  for (const auto& w : windows) r.scored += w.end - w.score_from;
  if (options.kl_base) check_kl_base(*options.kl_base, ids, options.ctx, options.stride, vocab, r.scored);
  if (options.first_window < 0 || options.first_window > r.windows || (options.first_window > 0 && options.kl_base))
    fail("perplexity: first window {} of {} (resuming is for computing a KL base only)", options.first_window,
         r.windows);
  if (options.save_kl_base) {
    auto& s = *options.save_kl_base;
    s = KlBase{};
    s.vocab_size = static_cast<int32_t>(vocab);
    s.ctx = options.ctx;
    s.stride = options.stride;
    s.token_ids = ids;
    s.scored = r.scored;
    s.log_probs.resize(static_cast<size_t>(r.scored * vocab));
  }

  const auto start = std::chrono::steady_clock::now();
  auto cache = model.make_cache(options.ctx);
  std::vector<float> logits, logp(static_cast<size_t>(vocab)), base(static_cast<size_t>(vocab));
  std::vector<uint16_t> window_rows;
  std::vector<double> token_kl;
  if (options.kl_base) token_kl.reserve(static_cast<size_t>(r.scored));
  int64_t k = 0;  // scored-token index
  double kl_sum = 0.0, kl_sq_sum = 0.0, dp_sq_sum = 0.0;
  double base_nll_sum = 0.0, base_nll_sq_sum = 0.0, nll_cross_sum = 0.0;  // the base's NLL, for ΔPPL's error
  int64_t agree = 0;
  for (std::size_t wi = 0; wi < windows.size(); ++wi) {
    const auto& w = windows[wi];
    const int64_t scored_before = k;
    if (static_cast<int64_t>(wi) < options.first_window) {
      k += w.end - w.score_from;
      continue;
    }
    // Row j of the window's logits predicts token begin + j + 1; only the rows that score are needed.
    const int64_t first_row = w.score_from - 1 - w.begin;
    const int64_t n = w.end - w.begin;
    logits.resize(static_cast<size_t>((n - first_row) * vocab));
    cache.clear();
    model.forward(ids.data() + w.begin, n, cache, logits.data(), first_row);
    require_finite_logits(logits.data(), logits.size(),
                          fmt::format("perplexity, window of tokens {} to {}", w.begin, w.end - 1), "perplexity");
    if (options.fp16_log_probs) window_rows.resize(static_cast<size_t>((w.end - w.score_from) * vocab));
    double window_nll = 0.0;
    for (int64_t t = w.score_from; t < w.end; ++t, ++k) {
      const float* row = logits.data() + (t - 1 - w.begin - first_row) * vocab;
      kernels::log_softmax_f32(row, 1, vocab, logp.data());
      const auto target = static_cast<size_t>(ids[static_cast<size_t>(t)]);
      const double nll = -static_cast<double>(logp[target]);
      window_nll += nll;
      r.nll_sum += nll;
      r.nll_sq_sum += nll * nll;
      uint16_t* fp16_out = nullptr;
      if (options.save_kl_base) fp16_out = options.save_kl_base->log_probs.data() + k * vocab;
      if (options.fp16_log_probs) {
        uint16_t* rows = window_rows.data() + (t - w.score_from) * vocab;
        for (int64_t j = 0; j < vocab; ++j)
          rows[j] = quant::fp32_to_fp16_bits(std::max(logp[static_cast<size_t>(j)], -65504.0f));
        if (fp16_out) std::copy(rows, rows + vocab, fp16_out);
      } else if (fp16_out) {
        for (int64_t j = 0; j < vocab; ++j)
          fp16_out[j] = quant::fp32_to_fp16_bits(std::max(logp[static_cast<size_t>(j)], -65504.0f));
      }
      if (options.kl_base) {
        const uint16_t* in = options.kl_base->rows() + k * vocab;
        double kl = 0.0;
        for (int64_t j = 0; j < vocab; ++j) {
          const float b = quant::fp16_bits_to_fp32(in[j]);
          base[static_cast<size_t>(j)] = b;
          kl += std::exp(static_cast<double>(b)) *
                (static_cast<double>(b) - static_cast<double>(logp[static_cast<size_t>(j)]));
        }
        kl_sum += kl;
        kl_sq_sum += kl * kl;
        token_kl.push_back(kl);
        const double base_nll = -static_cast<double>(base[target]);
        base_nll_sum += base_nll;
        base_nll_sq_sum += base_nll * base_nll;
        nll_cross_sum += nll * base_nll;
        r.kl.max_kl = std::max(r.kl.max_kl, kl);
        const double dp = std::exp(static_cast<double>(logp[target])) - std::exp(static_cast<double>(base[target]));
        dp_sq_sum += dp * dp;
        if (argmax(base.data(), vocab) == argmax(logp.data(), vocab)) ++agree;
      }
    }
    if (options.on_window)
      options.on_window({static_cast<int64_t>(wi), r.windows, w.end - w.score_from, scored_before, window_nll,
                         options.fp16_log_probs ? window_rows.data() : nullptr});
    if (options.progress) options.progress(static_cast<int64_t>(wi + 1), r.windows);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options.save_kl_base) options.save_kl_base->nll_sum = r.nll_sum;
  if (options.kl_base) {
    r.has_kl = true;
    const double n = static_cast<double>(r.scored);
    r.kl.mean_kl = kl_sum / n;
    std::sort(token_kl.begin(), token_kl.end());
    r.kl.median_kl = percentile_of_sorted(token_kl, 0.5);
    r.kl.p99_kl = percentile_of_sorted(token_kl, 0.99);
    r.kl.top1_agreement = static_cast<double>(agree) / n;
    r.kl.rms_dp = std::sqrt(dp_sq_sum / n);
    r.kl.base_ppl = options.kl_base->ppl();
    r.kl.delta_ppl = r.ppl() - r.kl.base_ppl;
    if (r.scored > 1) {
      // Sample (co)variances of the per-token NLLs; ΔPPL = exp(mean q) − exp(mean p) by the delta method.
      const double mq = r.nll_sum / n, mp = base_nll_sum / n;
      const double vq = std::max(0.0, (r.nll_sq_sum - n * mq * mq) / (n - 1));
      const double vp = std::max(0.0, (base_nll_sq_sum - n * mp * mp) / (n - 1));
      const double cov = (nll_cross_sum - n * mq * mp) / (n - 1);
      const double pq = r.ppl(), pp = r.kl.base_ppl;
      r.kl.delta_ppl_stderr = std::sqrt(std::max(0.0, (pq * pq * vq + pp * pp * vp - 2 * pq * pp * cov) / n));
      r.kl.kl_stderr = std::sqrt(std::max(0.0, (kl_sq_sum - n * r.kl.mean_kl * r.kl.mean_kl) / (n - 1) / n));
    }
  }
  return r;
}

}  // namespace qjoule::eval
