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

ContextEncoding encode_context(const tokenize::BpeTokenizer& tokenizer, std::string_view context) {
  ContextEncoding c;
  c.text = std::string(rstrip_ascii_space(context));
  c.moved = std::string(context.substr(c.text.size()));
  c.ids = tokenizer.encode(c.text, /*add_special_tokens=*/false);
  return c;
}

// The continuation's tokens: those of encode(context + continuation) past the context's own count.
std::vector<int32_t> continuation_ids(const tokenize::BpeTokenizer& tokenizer, const ContextEncoding& c,
                                      std::string_view continuation) {
  const auto whole = tokenizer.encode(c.text + c.moved + std::string(continuation), /*add_special_tokens=*/false);
  if (whole.size() <= c.ids.size()) return {};
  return {whole.begin() + static_cast<std::ptrdiff_t>(c.ids.size()), whole.end()};
}

template <class T>
int32_t first_max(const std::vector<T>& values) {
  return static_cast<int32_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

}  // namespace

EncodedPair encode_pair(const tokenize::BpeTokenizer& tokenizer, std::string_view context,
                        std::string_view continuation) {
  ContextEncoding c = encode_context(tokenizer, context);
  auto cont = continuation_ids(tokenizer, c, continuation);
  return {std::move(c.ids), std::move(cont)};
}

double proportion_stderr(double p, int64_t n) { return n < 2 ? 0.0 : std::sqrt(p * (1.0 - p) / double(n - 1)); }

double TaskScore::acc() const { return items.empty() ? 0.0 : double(correct) / double(items.size()); }
double TaskScore::acc_norm() const { return items.empty() ? 0.0 : double(correct_norm) / double(items.size()); }
double TaskScore::acc_stderr() const { return proportion_stderr(acc(), static_cast<int64_t>(items.size())); }
double TaskScore::acc_norm_stderr() const { return proportion_stderr(acc_norm(), static_cast<int64_t>(items.size())); }

namespace {

// One item, encoded: its context once, each choice's continuation tokens.
struct PreparedItem {
  const TaskItem* item = nullptr;
  std::string where;
  ContextEncoding context;
  std::vector<std::vector<int32_t>> conts;
  int64_t longest = 0;
  bool truncated = false;
  model::KvCache cache;                    // the context's keys and values (fits)
  std::vector<float> last;                 // the logits after the context: the first continuation token's row (fits)
  std::vector<std::vector<float>> logits;  // per choice: its rows after its first token
};

PreparedItem prepare(const tokenize::BpeTokenizer& tokenizer, const TaskItem& item, const std::string& path,
                     int64_t positions) {
  PreparedItem p;
  p.item = &item;
  p.where = fmt::format("{}:{}", path, item.line);
  p.context = encode_context(tokenizer, item.context);
  for (std::size_t c = 0; c < item.choices.size(); ++c) {
    p.conts.push_back(continuation_ids(tokenizer, p.context, " " + item.choices[c]));
    if (p.conts.back().empty())
      fail("{}: choice {} adds no token to its context, expected a continuation of at least one token", p.where, c);
    p.longest = std::max(p.longest, static_cast<int64_t>(p.conts.back().size()));
  }
  if (p.longest > positions)
    fail("{}: a choice of {} tokens is longer than the model's {} positions; expected shorter choices", p.where,
         p.longest, positions);
  // Fits: the context once, each choice continuing it from the cache. Else lm-eval's own cut, per choice.
  p.truncated = static_cast<int64_t>(p.context.ids.size()) + p.longest - 1 > positions;
  p.logits.resize(p.conts.size());
  return p;
}

// Runs the items of one batch: the contexts that fit in one forward, then each choice round (choice c of
// every item) in one forward continuing the items' caches; items cut to the positions run choice by
// choice as lm-eval cuts them. Fills every item's logits; adds the tokens forwarded to `tokens`.
void run_batch(const model::DecoderLM& model, std::vector<PreparedItem>& batch, int64_t& tokens) {
  const int64_t positions = model.config().max_positions, vocab = model.config().vocab_size;
  std::vector<model::DecoderSequence> seqs;
  std::size_t choices = 0;
  for (PreparedItem& p : batch) {
    choices = std::max(choices, p.conts.size());
    const auto n = static_cast<int64_t>(p.context.ids.size());
    if (p.truncated) {
      for (std::size_t c = 0; c < p.conts.size(); ++c) {
        const auto& cont = p.conts[c];
        const auto m = static_cast<int64_t>(cont.size());
        std::vector<int32_t> all = p.context.ids;
        all.insert(all.end(), cont.begin(), cont.end() - 1);
        const int64_t run = std::min<int64_t>(positions, static_cast<int64_t>(all.size()));
        auto cache = model.make_cache(run);
        p.logits[c].resize(static_cast<std::size_t>(m * vocab));
        model.forward(all.data() + (static_cast<int64_t>(all.size()) - run), run, cache, p.logits[c].data(), run - m);
        require_finite_logits(p.logits[c].data(), p.logits[c].size(), p.where, "log-likelihood");
        tokens += run;
      }
      continue;
    }
    p.cache = model.make_cache(n + p.longest - 1);
    p.last.resize(static_cast<std::size_t>(vocab));
    seqs.push_back({p.context.ids.data(), n, &p.cache, p.last.data(), n - 1});
    tokens += n;
  }
  if (!seqs.empty()) model.forward_batch(seqs);
  for (PreparedItem& p : batch)
    if (!p.truncated) require_finite_logits(p.last.data(), p.last.size(), p.where, "log-likelihood");
  for (std::size_t c = 0; c < choices; ++c) {
    seqs.clear();
    for (PreparedItem& p : batch) {
      if (p.truncated || c >= p.conts.size() || p.conts[c].size() < 2) continue;
      const auto m = static_cast<int64_t>(p.conts[c].size());
      p.cache.truncate(static_cast<int64_t>(p.context.ids.size()));
      p.logits[c].resize(static_cast<std::size_t>((m - 1) * vocab));
      seqs.push_back({p.conts[c].data(), m - 1, &p.cache, p.logits[c].data(), 0});
      tokens += m - 1;
    }
    if (seqs.empty()) continue;
    model.forward_batch(seqs);
    for (PreparedItem& p : batch)
      if (!p.truncated && c < p.conts.size() && p.conts[c].size() >= 2)
        require_finite_logits(p.logits[c].data(), p.logits[c].size(), p.where, "log-likelihood");
  }
}

ItemScore score_item(const PreparedItem& p, int64_t positions, int64_t vocab) {
  ItemScore item_score;
  item_score.context_tokens = static_cast<int64_t>(p.context.ids.size());
  item_score.truncated = p.truncated;
  std::vector<double> ll, norm;
  for (std::size_t c = 0; c < p.conts.size(); ++c) {
    const auto& cont = p.conts[c];
    const auto n = static_cast<int64_t>(cont.size());
    if (p.truncated) {
      const int64_t run = std::min<int64_t>(positions, item_score.context_tokens + n - 1);
      item_score.context_tokens = std::min(item_score.context_tokens, run - (n - 1));
    }
    // The rows predicting cont[0 .. n): `last` then logits (fits), or logits' n rows (cut).
    ChoiceScore choice;
    choice.tokens = n;
    for (int64_t i = 0; i < n; ++i) {
      const float* row = p.truncated ? p.logits[c].data() + i * vocab
                         : i == 0    ? p.last.data()
                                     : p.logits[c].data() + (i - 1) * vocab;
      choice.loglik += log_prob(row, vocab, cont[static_cast<std::size_t>(i)]);
    }
    // Characters as lm-eval counts them: code points (the file was checked as UTF-8 when read).
    norm.push_back(choice.loglik / double(tokenize::decode_utf8(p.item->choices[c], p.where).size()));
    ll.push_back(choice.loglik);
    item_score.choices.push_back(choice);
  }
  item_score.chosen = first_max(ll);
  item_score.chosen_norm = first_max(norm);
  return item_score;
}

}  // namespace

TaskScore score_task(const model::DecoderLM& model, const tokenize::BpeTokenizer& tokenizer, const Task& task,
                     const TaskScoringOptions& options) {
  const int64_t positions = model.config().max_positions, vocab = model.config().vocab_size;
  TaskScore score;
  const auto started = std::chrono::steady_clock::now();
  for (std::size_t next = 0; next < task.items.size();) {
    // A batch: items until their contexts hold kTaskBatchTokens (at least one item).
    std::vector<PreparedItem> batch;
    int64_t context_tokens = 0;
    while (next < task.items.size() && (batch.empty() || context_tokens < kTaskBatchTokens)) {
      batch.push_back(prepare(tokenizer, task.items[next++], task.path.string(), positions));
      context_tokens += static_cast<int64_t>(batch.back().context.ids.size());
    }
    run_batch(model, batch, score.tokens);
    for (PreparedItem& p : batch) {
      ItemScore item_score = score_item(p, positions, vocab);
      score.truncated += item_score.truncated ? 1 : 0;
      score.correct += item_score.chosen == p.item->gold ? 1 : 0;
      score.correct_norm += item_score.chosen_norm == p.item->gold ? 1 : 0;
      score.items.push_back(std::move(item_score));
      p = PreparedItem{};  // its caches and logits go now
    }
    if (options.progress)
      options.progress(static_cast<int64_t>(score.items.size()), static_cast<int64_t>(task.items.size()));
  }
  score.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return score;
}

}  // namespace qjoule::eval
