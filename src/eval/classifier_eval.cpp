#include "qjoule/eval/classifier_eval.h"

#include <algorithm>
#include <chrono>
#include <fstream>

#include <fmt/format.h>

#include "qjoule/eval/finite_logits.h"
#include "qjoule/error.h"

namespace qjoule::eval {
namespace {

struct Sequence {
  std::vector<int32_t> ids;
  std::vector<int32_t> mask;  // empty = all ones
  bool truncated = false;
};

Sequence prepare(const Example& ex, std::size_t index, const tokenize::WordPieceTokenizer* tokenizer,
                 const Dataset& dataset, std::size_t max_length) {
  Sequence s;
  if (!dataset.pretokenized) {
    if (tokenizer == nullptr) fail("{}: example {} is text, but no tokenizer was loaded", dataset.path.string(), index);
    const auto context = fmt::format("{} example {}", dataset.path.filename().string(), index);
    auto enc = tokenizer->encode(ex.text, max_length, context);
    s.ids = std::move(enc.ids);
    s.truncated = enc.truncated;
    return s;
  }
  s.ids = ex.input_ids;
  s.mask = ex.attention_mask;
  if (s.ids.size() > max_length) {  // keep the first max_length - 1 ids and the final one ([SEP])
    s.ids[max_length - 1] = s.ids.back();
    s.ids.resize(max_length);
    if (!s.mask.empty()) {
      s.mask[max_length - 1] = s.mask.back();
      s.mask.resize(max_length);
    }
    s.truncated = true;
  }
  return s;
}

}  // namespace

ClassifierEvalResult evaluate_classifier(const model::EncoderClassifier& model,
                                         const tokenize::WordPieceTokenizer* tokenizer, const Dataset& dataset,
                                         const ClassifierEvalOptions& options,
                                         const std::function<void(std::size_t, std::size_t)>& progress) {
  return evaluate_classifier(
      model.config(),
      [&model](const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq, float* logits) {
        model.forward(ids, mask, batch, seq, logits);
      },
      tokenizer, dataset, options, progress);
}

ClassifierEvalResult evaluate_classifier(const model::EncoderConfig& cfg, const ClassifierForward& forward,
                                         const tokenize::WordPieceTokenizer* tokenizer, const Dataset& dataset,
                                         const ClassifierEvalOptions& options,
                                         const std::function<void(std::size_t, std::size_t)>& progress) {
  if (dataset.examples.empty()) fail("{}: dataset is empty, expected at least one example", dataset.path.string());
  if (options.batch_size == 0) fail("--batch is 0, expected at least 1");
  ClassifierEvalResult result;
  result.max_length = options.max_length == 0 ? static_cast<std::size_t>(cfg.max_positions)
                                              : std::min<std::size_t>(options.max_length, cfg.max_positions);
  if (result.max_length < 2)
    fail("--max-length {} is too short, expected at least 2 ([CLS] and [SEP])", result.max_length);
  const auto labels = static_cast<std::size_t>(cfg.num_labels);
  const int32_t pad = static_cast<int32_t>(cfg.pad_token_id);
  const auto start = std::chrono::steady_clock::now();
  const std::size_t n = dataset.examples.size();
  result.total = n;
  result.labels.reserve(n);
  result.predictions.reserve(n);
  result.logits.reserve(n);

  for (std::size_t first = 0; first < n; first += options.batch_size) {
    const std::size_t count = std::min(options.batch_size, n - first);
    std::vector<Sequence> seqs;
    std::size_t len = 0;
    for (std::size_t i = 0; i < count; ++i) {
      seqs.push_back(prepare(dataset.examples[first + i], first + i, tokenizer, dataset, result.max_length));
      result.truncated += seqs.back().truncated;
      len = std::max(len, seqs.back().ids.size());
    }
    std::vector<int32_t> ids(count * len, pad), mask(count * len, 0);
    for (std::size_t i = 0; i < count; ++i) {
      std::copy(seqs[i].ids.begin(), seqs[i].ids.end(), ids.begin() + static_cast<long>(i * len));
      if (seqs[i].mask.empty()) {
        std::fill_n(mask.begin() + static_cast<long>(i * len), seqs[i].ids.size(), 1);
      } else {
        std::copy(seqs[i].mask.begin(), seqs[i].mask.end(), mask.begin() + static_cast<long>(i * len));
      }
    }
    std::vector<float> logits(count * labels);
    forward(ids.data(), mask.data(), static_cast<int64_t>(count), static_cast<int64_t>(len), logits.data());
    require_finite_logits(logits.data(), logits.size(), fmt::format("examples {} to {}", first, first + count - 1),
                          "accuracy");
    for (std::size_t i = 0; i < count; ++i) {
      const auto row = logits.begin() + static_cast<long>(i * labels);
      const int pred = static_cast<int>(std::max_element(row, row + static_cast<long>(labels)) - row);
      const int label = dataset.examples[first + i].label;
      result.logits.emplace_back(row, row + static_cast<long>(labels));
      result.predictions.push_back(pred);
      result.labels.push_back(label);
      if (label >= 0) {
        ++result.labelled;
        result.correct += pred == label;
      }
    }
    if (progress) progress(first + count, n);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

void write_logits_tsv(const std::filesystem::path& path, const ClassifierEvalResult& result) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) fail("{}: cannot open for writing", path.string());
  const std::size_t labels = result.logits.empty() ? 0 : result.logits.front().size();
  out << "index\tlabel\tpred";
  for (std::size_t j = 0; j < labels; ++j) out << "\tlogit" << j;
  out << '\n';
  for (std::size_t i = 0; i < result.logits.size(); ++i) {
    out << i << '\t' << result.labels[i] << '\t' << result.predictions[i];
    for (float v : result.logits[i]) out << '\t' << fmt::format("{:.9g}", v);
    out << '\n';
  }
  if (!out.flush()) fail("{}: write failed", path.string());
}

}  // namespace qjoule::eval
