// Multiple-choice scoring of a decoder language model, as lm-evaluation-harness scores its
// log-likelihood tasks (HellaSwag, ARC, PIQA, ...):
//   - each choice's continuation is " " + choice (the target delimiter) and is tokenized with its context
//     as lm-eval's _encode_pair does: the context's trailing whitespace moves to the continuation, the
//     context is encoded alone (no special tokens: no BOS, as lm-eval's Hugging Face models with
//     add_bos_token=False, their default before lm-eval 0.4.10; TaskScoringOptions::special_tokens: with
//     the tokenizer's special tokens, as lm-eval's default from 0.4.10),
//     and the continuation's tokens are those of encode(context + continuation) past the context's count;
//   - the model reads context tokens + continuation tokens but the last, and the choice's log-likelihood
//     is Σ log p(continuation token i | everything before it), log-softmax of the FP32 logits in FP64;
//   - acc: the choice of highest log-likelihood is the gold one (ties: the first); acc_norm: the same
//     with each log-likelihood divided by its choice's length in characters (Unicode code points, the
//     choice without the delimiter), as lm-eval's acc_norm; each with its standard error
//     sqrt(p (1 − p) / (n − 1)) (lm-eval's sample standard deviation over √n).
// The context is encoded and run once per item and each choice continues it from the KV cache (the same tokens
// lm-eval's batches run). Items run in batches (model::DecoderLM::forward_batch): consecutive items
// until their contexts, or their longest choices, hold kTaskBatchTokens tokens (at least one item); their
// contexts in one forward, then choice c of every item of the batch in one forward, each over its item's
// cache, so the products see prefill-sized row counts (and a round's logits, scored before the next, are
// at most about kTaskBatchTokens rows); an item's log-likelihoods do not depend on its batch (activations are quantized per token),
// up to the rounding of the kernel the row count chooses. Where context + the longest continuation − 1 exceeds the model's positions,
// each choice runs as lm-eval cuts it: the last max_positions tokens of context + continuation but its
// last, from an empty cache (the context losing tokens from its left); such items are counted in
// `truncated`.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "qjoule/eval/task_file.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/tokenize/bpe_tokenizer.h"

namespace qjoule::eval {

struct EncodedPair {
  std::vector<int32_t> context, continuation;
};
// lm-eval's _encode_pair (above).
EncodedPair encode_pair(const tokenize::BpeTokenizer& tokenizer, std::string_view context,
                        std::string_view continuation, bool special_tokens = false);

struct ChoiceScore {
  double loglik = 0.0;  // natural log
  int64_t tokens = 0;   // continuation tokens scored
};

struct ItemScore {
  std::vector<ChoiceScore> choices;
  int32_t chosen = 0, chosen_norm = 0;  // by log-likelihood, and by it over the choice's characters
  int64_t context_tokens = 0;           // read (after truncation: the fewest any choice read)
  bool truncated = false;
};

struct TaskScore {
  std::vector<ItemScore> items;
  int64_t correct = 0, correct_norm = 0, truncated = 0;
  int64_t tokens = 0;  // forwarded through the model: each context once, each continuation but its last token
  double seconds = 0.0;
  double acc() const;
  double acc_norm() const;
  double acc_stderr() const;
  double acc_norm_stderr() const;
};

// The context tokens, or longest-choice tokens, that fill a batch of items (above).
inline constexpr int64_t kTaskBatchTokens = 512;

struct TaskScoringOptions {
  std::function<void(int64_t done, int64_t total)> progress;  // after each batch of items
  // Encode with the tokenizer's special tokens (the BOS its template adds), as lm-eval >= 0.4.10 does by
  // default; false (qjoule's records): as lm-eval's add_bos_token=False.
  bool special_tokens = false;
};

// Scores every item of `task`. A choice with no tokens of its own, one longer than the model's positions, or
// a non-finite logit is one line naming the file and line.
TaskScore score_task(const model::DecoderLM& model, const tokenize::BpeTokenizer& tokenizer, const Task& task,
                     const TaskScoringOptions& options = {});

// The standard error of a mean of n 0/1 outcomes with mean p (0 where n < 2).
double proportion_stderr(double p, int64_t n);

}  // namespace qjoule::eval
