// Classification datasets: raw text to tokenise, or pre-tokenised ids, each with an integer label.
// Formats, chosen by extension:
//   .tsv            header line, then tab-separated rows (GLUE style: `sentence<TAB>label`); the
//                   text and label columns are found by name (sentence/text, label/labels) or
//                   given with DatasetOptions. No quoting: fields cannot contain tabs or newlines.
//   .jsonl / .json  JSON Lines: one object per line with a text field (text/sentence) and a label
//                   field (label/labels), or pre-tokenised `input_ids` (+ optional
//                   `attention_mask`, `label`). When a line has both, `input_ids` wins unless a
//                   text column is named.
// Labels are integer class ids; string labels (id2label names) are not supported. Blank lines are
// skipped. Every bad input throws qjoule::Error naming the file and line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace qjoule::eval {

struct Example {
  std::string text;                     // raw text (empty when the dataset is pre-tokenised)
  std::vector<int32_t> input_ids;       // pre-tokenised ids (empty for text datasets)
  std::vector<int32_t> attention_mask;  // pre-tokenised mask (all ones when the file has none)
  int label = -1;                       // integer class id; -1 when the row has no label
  size_t line = 0;                      // 1-based line in the source file, for messages
};

struct Dataset {
  std::filesystem::path path;
  std::vector<Example> examples;
  bool pretokenized = false;  // examples carry input_ids instead of text
  bool labeled = false;       // every example has a label
};

struct DatasetOptions {
  std::string text_column;   // empty: auto-detect (sentence, text)
  std::string label_column;  // empty: auto-detect (label, labels)
  bool require_labels = true;
};

// Reads a .tsv or .jsonl/.json dataset; at least one example, or qjoule::Error.
Dataset load_dataset(const std::filesystem::path& path, const DatasetOptions& options = {});

// Every label must lie in 0..num_labels-1: otherwise qjoule::Error naming file:line, the label
// found and the range expected.
void check_labels(const Dataset& dataset, int num_labels);

}  // namespace qjoule::eval
