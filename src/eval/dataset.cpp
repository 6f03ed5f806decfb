#include "qjoule/dataset.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "eval/dataset_readers.h"
#include "qjoule/error.h"
#include "tokenize/file_bytes.h"

namespace qjoule::eval {

Dataset load_dataset(const std::filesystem::path& path, const DatasetOptions& options) {
  const std::string bytes = tokenize::read_file_bytes(path, "dataset");
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  Dataset dataset;
  if (extension == ".tsv") {
    dataset = read_tsv_dataset(path, bytes, options);
  } else if (extension == ".jsonl" || extension == ".json") {
    dataset = read_jsonl_dataset(path, bytes, options);
  } else {
    fail("{}: unsupported dataset format '{}', expected .tsv, .jsonl or .json (JSON Lines)", path.string(),
         extension.empty() ? std::string("(no extension)") : extension);
  }
  dataset.labeled =
      std::all_of(dataset.examples.begin(), dataset.examples.end(), [](const Example& e) { return e.label >= 0; });
  return dataset;
}

void check_labels(const Dataset& dataset, int num_labels) {
  if (num_labels < 1) {
    fail("{}: cannot check labels against num_labels {}, expected at least 1", dataset.path.string(), num_labels);
  }
  for (const Example& example : dataset.examples) {
    if (example.label >= 0 && example.label < num_labels) continue;
    fail("{}:{}: label {} is out of range, expected 0..{} (the model has {} labels){}", dataset.path.string(),
         example.line, example.label, num_labels - 1, num_labels,
         example.label == -1 ? "; -1 means the row has no label" : "");
  }
}

}  // namespace qjoule::eval
