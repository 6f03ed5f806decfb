#include "qjoule/eval/task_scoring.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "qjoule/error.h"
#include "eval/dataset_readers.h"
#include "qjoule/eval/finite_logits.h"
#include "qjoule/tokenize/utf8.h"

namespace qjoule::eval {
namespace {

// log-softmax(logits)[token] in FP64.
double log_prob(const float* logits, int64_t vocab, int32_t token) {
  const double max = *std::max_element(logits, logits + vocab);
  double z = 0.0;
  for (int64_t v = 0; v < vocab; ++v) z += std::exp(double(logits[v]) - max);
  return double(logits[token]) - max - std::log(z);
}

// lm-eval's _encode_pair, the context's side, done once for all of an item's choices: the context without
// its trailing whitespace (which moves to the front of every continuation), encoded alone.
struct ContextEncoding {
  std::string text, moved;
  std::vector<int32_t> ids;
};

ContextEncoding encode_context(const tokenize::BpeTokenizer& tokenizer, std::string_view context, bool special_tokens) {
  ContextEncoding c;
  c.text = std::string(rstrip_ascii_space(context));
  c.moved = std::string(context.substr(c.text.size()));
  c.ids = tokenizer.encode(c.text, special_tokens);
  return c;
}

// The continuation's tokens: those of encode(context + continuation) past the context's own count.
std::vector<int32_t> continuation_ids(const tokenize::BpeTokenizer& tokenizer, const ContextEncoding& c,
                                      std::string_view continuation, bool special_tokens) {
  const auto whole = tokenizer.encode(c.text + c.moved + std::string(continuation), special_tokens);
  if (whole.size() <= c.ids.size()) return {};
  return {whole.begin() + static_cast<std::ptrdiff_t>(c.ids.size()), whole.end()};
}

template <class T>
int32_t first_max(const std::vector<T>& values) {
  return static_cast<int32_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

}  // namespace

EncodedPair encode_pair(const tokenize::BpeTokenizer& tokenizer, std::string_view context,
                        std::string_view continuation, bool special_tokens) {
  ContextEncoding c = encode_context(tokenizer, context, special_tokens);
  auto cont = continuation_ids(tokenizer, c, continuation, special_tokens);
  return {std::move(c.ids), std::move(cont)};
}

double proportion_stderr(double p, int64_t n) { return n < 2 ? 0.0 : std::sqrt(p * (1.0 - p) / double(n - 1)); }

double TaskScore::acc() const { return items.empty() ? 0.0 : double(correct) / double(items.size()); }
double TaskScore::acc_norm() const { return items.empty() ? 0.0 : double(correct_norm) / double(items.size()); }
double TaskScore::acc_stderr() const { return proportion_stderr(acc(), static_cast<int64_t>(items.size())); }
double TaskScore::acc_norm_stderr() const { return proportion_stderr(acc_norm(), static_cast<int64_t>(items.size())); }

namespace {

// One item, encoded: its context once, each choice's continuation tokens; then its choices' scores.
struct PreparedItem {
  const TaskItem* item = nullptr;
  std::string where;
  ContextEncoding context;
  std::vector<std::vector<int32_t>> conts;
  int64_t longest = 0;
  bool truncated = false;
  model::KvCache cache;     // the context's keys and values (fits)
  std::vector<float> last;  // the logits after the context: each choice's first token's row (fits)
  ItemScore score;          // its choices' log-likelihoods as they are computed
};

PreparedItem prepare(const tokenize::BpeTokenizer& tokenizer, const TaskItem& item, const std::string& path,
                     int64_t positions, bool special_tokens) {
  PreparedItem p;
  p.item = &item;
  p.where = fmt::format("{}:{}", path, item.line);
  p.context = encode_context(tokenizer, item.context, special_tokens);
  for (std::size_t c = 0; c < item.choices.size(); ++c) {
    p.conts.push_back(continuation_ids(tokenizer, p.context, " " + item.choices[c], special_tokens));
    if (p.conts.back().empty())
      fail("{}: choice {} adds no token to its context, expected a continuation of at least one token", p.where, c);
    p.longest = std::max(p.longest, static_cast<int64_t>(p.conts.back().size()));
  }
  if (p.longest > positions)
    fail("{}: a choice of {} tokens is longer than the model's {} positions; expected shorter choices", p.where,
         p.longest, positions);
  // Fits: the context once, each choice continuing it from the cache. Else lm-eval's own cut, per choice.
  p.truncated = static_cast<int64_t>(p.context.ids.size()) + p.longest - 1 > positions;
  p.score.context_tokens = static_cast<int64_t>(p.context.ids.size());
  p.score.truncated = p.truncated;
  p.score.choices.resize(p.conts.size());
  return p;
}

// Choice c's log-likelihood: Σ log p(cont[i] | everything before it) over the rows row(i) predicting cont[i].
template <class Row>
void score_choice(PreparedItem& p, std::size_t c, int64_t vocab, Row row) {
  const auto& cont = p.conts[c];
  ChoiceScore& choice = p.score.choices[c];
  choice.tokens = static_cast<int64_t>(cont.size());
  choice.loglik = 0.0;
  for (std::size_t i = 0; i < cont.size(); ++i) choice.loglik += log_prob(row(i), vocab, cont[i]);
}

// An item cut to the positions: each choice as lm-eval cuts it, the last `positions` tokens of context +
// continuation but its last, from an empty cache.
void score_truncated(const model::DecoderLM& model, PreparedItem& p, int64_t& tokens) {
  const int64_t positions = model.config().max_positions, vocab = model.config().vocab_size;
  std::vector<float> logits;
  for (std::size_t c = 0; c < p.conts.size(); ++c) {
    const auto& cont = p.conts[c];
    const auto m = static_cast<int64_t>(cont.size());
    std::vector<int32_t> all = p.context.ids;
    all.insert(all.end(), cont.begin(), cont.end() - 1);
    const int64_t run = std::min<int64_t>(positions, static_cast<int64_t>(all.size()));
    auto cache = model.make_cache(run);
    logits.resize(static_cast<std::size_t>(m * vocab));
    model.forward(all.data() + (static_cast<int64_t>(all.size()) - run), run, cache, logits.data(), run - m);
    require_finite_logits(logits.data(), logits.size(), p.where, "log-likelihood");
    tokens += run;
    p.score.context_tokens = std::min(p.score.context_tokens, run - (m - 1));
    score_choice(p, c, vocab, [&](std::size_t i) { return logits.data() + i * static_cast<std::size_t>(vocab); });
  }
}

// Scores the items of one batch: the contexts that fit in one forward, then each choice round (choice c of
// every item) in one forward continuing the items' caches, each round's logits scored before the next
// overwrites them. Adds the tokens forwarded to `tokens`.
void score_batch(const model::DecoderLM& model, std::vector<PreparedItem>& batch, int64_t& tokens) {
  const auto vocab = static_cast<std::size_t>(model.config().vocab_size);
  std::vector<model::DecoderSequence> seqs;
  std::size_t choices = 0;
  for (PreparedItem& p : batch) {
    choices = std::max(choices, p.conts.size());
    if (p.truncated) {
      score_truncated(model, p, tokens);
      continue;
    }
    const auto n = static_cast<int64_t>(p.context.ids.size());
    p.cache = model.make_cache(n + p.longest - 1);
    p.last.resize(vocab);
    seqs.push_back({p.context.ids.data(), n, &p.cache, p.last.data(), n - 1});
    tokens += n;
  }
  if (!seqs.empty()) model.forward_batch(seqs);
  for (PreparedItem& p : batch)
    if (!p.truncated) require_finite_logits(p.last.data(), p.last.size(), p.where, "log-likelihood");
  // Round c: choice c of every item that fits, continuing its context's cache (a one-token choice needs
  // only the context's last row); its logits rows at offsets[b] of `logits`.
  std::vector<float> logits;
  std::vector<std::size_t> offsets(batch.size());
  for (std::size_t c = 0; c < choices; ++c) {
    const auto in_round = [&](const PreparedItem& p) { return !p.truncated && c < p.conts.size(); };
    std::size_t rows = 0;
    for (std::size_t b = 0; b < batch.size(); ++b) {
      offsets[b] = rows;
      if (in_round(batch[b])) rows += batch[b].conts[c].size() - 1;
    }
    logits.resize(rows * vocab);
    seqs.clear();
    for (std::size_t b = 0; b < batch.size(); ++b) {
      PreparedItem& p = batch[b];
      if (!in_round(p) || p.conts[c].size() < 2) continue;
      const auto m = static_cast<int64_t>(p.conts[c].size());
      p.cache.truncate(static_cast<int64_t>(p.context.ids.size()));
      seqs.push_back({p.conts[c].data(), m - 1, &p.cache, logits.data() + offsets[b] * vocab, 0});
      tokens += m - 1;
    }
    if (!seqs.empty()) model.forward_batch(seqs);
    for (std::size_t b = 0; b < batch.size(); ++b) {
      PreparedItem& p = batch[b];
      if (!in_round(p)) continue;
      const float* own = logits.data() + offsets[b] * vocab;
      require_finite_logits(own, (p.conts[c].size() - 1) * vocab, p.where, "log-likelihood");
      // The rows predicting cont[0 .. n): the context's last, then the continuation's own.
      score_choice(p, c, static_cast<int64_t>(vocab),
                   [&](std::size_t i) { return i == 0 ? p.last.data() : own + (i - 1) * vocab; });
    }
  }
}

// acc's and acc_norm's picks of a scored item.
void choose(PreparedItem& p) {
  std::vector<double> ll, norm;
  for (std::size_t c = 0; c < p.conts.size(); ++c) {
    ll.push_back(p.score.choices[c].loglik);
    // Characters as lm-eval counts them: code points (the file was checked as UTF-8 when read).
    norm.push_back(ll.back() / double(tokenize::decode_utf8(p.item->choices[c], p.where).size()));
  }
  p.score.chosen = first_max(ll);
  p.score.chosen_norm = first_max(norm);
}

}  // namespace

TaskScore score_task(const model::DecoderLM& model, const tokenize::BpeTokenizer& tokenizer, const Task& task,
                     const TaskScoringOptions& options) {
  const int64_t positions = model.config().max_positions;
  TaskScore score;
  const auto started = std::chrono::steady_clock::now();
  for (std::size_t next = 0; next < task.items.size();) {
    // A batch: items until their contexts, or their longest choices, hold kTaskBatchTokens (at least one item).
    std::vector<PreparedItem> batch;
    int64_t context_tokens = 0, choice_tokens = 0;
    while (next < task.items.size() &&
           (batch.empty() || (context_tokens < kTaskBatchTokens && choice_tokens < kTaskBatchTokens))) {
      batch.push_back(prepare(tokenizer, task.items[next++], task.path.string(), positions, options.special_tokens));
      context_tokens += static_cast<int64_t>(batch.back().context.ids.size());
      choice_tokens += batch.back().longest;
    }
    score_batch(model, batch, score.tokens);
    for (PreparedItem& p : batch) {
      choose(p);
      score.truncated += p.score.truncated ? 1 : 0;
      score.correct += p.score.chosen == p.item->gold ? 1 : 0;
      score.correct_norm += p.score.chosen_norm == p.item->gold ? 1 : 0;
      score.items.push_back(std::move(p.score));
    }
    if (options.progress)
      options.progress(static_cast<int64_t>(score.items.size()), static_cast<int64_t>(task.items.size()));
  }
  score.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return score;
}

}  // namespace qjoule::eval
