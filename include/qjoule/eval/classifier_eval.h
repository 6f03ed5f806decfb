// Runs an encoder classifier over a labelled dataset in batches and scores it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qjoule/dataset.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/tokenize/wordpiece_tokenizer.h"

namespace qjoule::eval {

struct ClassifierEvalOptions {
  std::size_t batch_size = 32;
  std::size_t max_length = 0;  // 0 = the model's max_position_embeddings; never more than that
};

struct ClassifierEvalResult {
  std::size_t total = 0;
  std::size_t correct = 0;  // only counted over examples with a label
  std::size_t labelled = 0;
  std::vector<int> labels;  // -1 where the example has none
  std::vector<int> predictions;
  std::vector<std::vector<float>> logits;  // [example][label]
  std::size_t truncated = 0;               // examples cut to max_length
  std::size_t max_length = 0;              // the length actually used
  double seconds = 0.0;                    // wall time of tokenization + forward passes
  double accuracy() const { return labelled == 0 ? 0.0 : double(correct) / double(labelled); }
};

// `progress(done, total)` is called after each batch (may be empty). Text examples need a tokenizer;
// pre-tokenized ones are used as they are (truncated to max_length, keeping the final [SEP]).
ClassifierEvalResult evaluate_classifier(const model::EncoderClassifier& model,
                                         const tokenize::WordPieceTokenizer* tokenizer, const Dataset& dataset,
                                         const ClassifierEvalOptions& options,
                                         const std::function<void(std::size_t, std::size_t)>& progress = {});

// The same for any model with EncoderClassifier::forward's contract (a GPU model, say): its config and
// forward(ids, mask, batch, seq, logits).
using ClassifierForward =
    std::function<void(const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq, float* logits)>;
ClassifierEvalResult evaluate_classifier(const model::EncoderConfig& config, const ClassifierForward& forward,
                                         const tokenize::WordPieceTokenizer* tokenizer, const Dataset& dataset,
                                         const ClassifierEvalOptions& options,
                                         const std::function<void(std::size_t, std::size_t)>& progress = {});

// Writes the `index label pred logit0 logit1 ...` TSV (one row per example, dataset order).
void write_logits_tsv(const std::filesystem::path& path, const ClassifierEvalResult& result);

}  // namespace qjoule::eval
