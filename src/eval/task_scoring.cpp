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

TaskScore score_task(const model::DecoderLM& model, const tokenize::BpeTokenizer& tokenizer, const Task& task,
                     const TaskScoringOptions& options) {
  const int64_t positions = model.config().max_positions, vocab = model.config().vocab_size;
  auto cache = model.make_cache(positions);
  std::vector<float> last(static_cast<std::size_t>(vocab)), logits;
  TaskScore score;
  const auto started = std::chrono::steady_clock::now();
  for (const TaskItem& item : task.items) {
    const std::string where = fmt::format("{}:{}", task.path.string(), item.line);
    const ContextEncoding encoded = encode_context(tokenizer, item.context);
    const auto& context = encoded.ids;
    std::vector<std::vector<int32_t>> conts;
    std::size_t longest = 0;
    for (std::size_t c = 0; c < item.choices.size(); ++c) {
      conts.push_back(continuation_ids(tokenizer, encoded, " " + item.choices[c]));
      if (conts.back().empty())
        fail("{}: choice {} adds no token to its context, expected a continuation of at least one token", where, c);
      longest = std::max(longest, conts.back().size());
    }
    if (static_cast<int64_t>(longest) > positions)
      fail("{}: a choice of {} tokens is longer than the model's {} positions; expected shorter choices", where,
           longest, positions);
    ItemScore item_score;
    item_score.context_tokens = static_cast<int64_t>(context.size());
    // Fits: the context once, each choice continuing it from the cache. Else lm-eval's own cut, per choice:
    // the last `positions` tokens of context + continuation − its last token, from an empty cache.
    item_score.truncated = item_score.context_tokens + static_cast<int64_t>(longest) - 1 > positions;
    score.truncated += item_score.truncated ? 1 : 0;
    if (!item_score.truncated) {
      cache.clear();
      model.forward(context.data(), item_score.context_tokens, cache, last.data(), item_score.context_tokens - 1);
      require_finite_logits(last.data(), last.size(), where, "log-likelihood");
      score.tokens += item_score.context_tokens;
    }
    std::vector<double> norm;
    for (std::size_t c = 0; c < conts.size(); ++c) {
      const auto& cont = conts[c];
      const auto n = static_cast<int64_t>(cont.size());
      if (item_score.truncated) {
        std::vector<int32_t> all = context;
        all.insert(all.end(), cont.begin(), cont.end() - 1);
        const int64_t run = std::min<int64_t>(positions, static_cast<int64_t>(all.size()));
        logits.resize(static_cast<std::size_t>(n * vocab));
        cache.clear();
        model.forward(all.data() + (static_cast<int64_t>(all.size()) - run), run, cache, logits.data(), run - n);
        require_finite_logits(logits.data(), logits.size(), where, "log-likelihood");
        score.tokens += run;
        item_score.context_tokens = std::min(item_score.context_tokens, run - (n - 1));
      } else if (n > 1) {
        cache.truncate(item_score.context_tokens);
        logits.resize(static_cast<std::size_t>((n - 1) * vocab));
        model.forward(cont.data(), n - 1, cache, logits.data(), 0);
        require_finite_logits(logits.data(), logits.size(), where, "log-likelihood");
        score.tokens += n - 1;
      }
      // The rows predicting cont[0 .. n): `last` then logits (fits), or logits' n rows (cut).
      ChoiceScore choice;
      choice.tokens = n;
      for (int64_t i = 0; i < n; ++i) {
        const float* row = item_score.truncated ? logits.data() + i * vocab
                           : i == 0             ? last.data()
                                                : logits.data() + (i - 1) * vocab;
        choice.loglik += log_prob(row, vocab, cont[static_cast<std::size_t>(i)]);
      }
      // Characters as lm-eval counts them: code points (the file was checked as UTF-8 when read).
      norm.push_back(choice.loglik / double(tokenize::decode_utf8(item.choices[c], where).size()));
      item_score.choices.push_back(choice);
    }
    std::vector<double> ll;
    for (const auto& c : item_score.choices) ll.push_back(c.loglik);
    item_score.chosen = first_max(ll);
    item_score.chosen_norm = first_max(norm);
    score.correct += item_score.chosen == item.gold ? 1 : 0;
    score.correct_norm += item_score.chosen_norm == item.gold ? 1 : 0;
    score.items.push_back(std::move(item_score));
    if (options.progress)
      options.progress(static_cast<int64_t>(score.items.size()), static_cast<int64_t>(task.items.size()));
  }
  score.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return score;
}

}  // namespace qjoule::eval
