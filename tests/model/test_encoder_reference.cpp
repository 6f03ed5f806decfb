// FP32 forward pass vs PyTorch's logits, from PyTorch's own token ids (so this checks the model
// alone; the tokenizer has its own test). Budget: 1e-4 absolute per logit, as the issue states.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "qjoule/model/encoder_classifier.h"
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;

std::vector<std::vector<int32_t>> read_token_ids(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::vector<int32_t>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    int index;
    ls >> index;
    std::vector<int32_t> ids;
    int32_t id;
    while (ls >> id) ids.push_back(id);
    rows.push_back(ids);
  }
  return rows;
}

struct RefLogits {
  int label = 0, pred = 0;
  std::vector<float> logits;
};

std::vector<RefLogits> read_logits(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  std::vector<RefLogits> rows;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    int index;
    RefLogits r;
    ls >> index >> r.label >> r.pred;
    float v;
    while (ls >> v) r.logits.push_back(v);
    rows.push_back(r);
  }
  return rows;
}

// Runs the model over id sequences in batches padded to the longest, returns logits per example.
std::vector<std::vector<float>> run(const qjoule::model::EncoderClassifier& model,
                                    const std::vector<std::vector<int32_t>>& seqs, size_t batch_size) {
  const auto labels = static_cast<size_t>(model.config().num_labels);
  std::vector<std::vector<float>> out;
  for (size_t start = 0; start < seqs.size(); start += batch_size) {
    const size_t n = std::min(batch_size, seqs.size() - start);
    size_t len = 0;
    for (size_t i = 0; i < n; ++i) len = std::max(len, seqs[start + i].size());
    std::vector<int32_t> ids(n * len, 0), mask(n * len, 0);
    for (size_t i = 0; i < n; ++i) {
      std::copy(seqs[start + i].begin(), seqs[start + i].end(), ids.begin() + long(i * len));
      std::fill_n(mask.begin() + long(i * len), seqs[start + i].size(), 1);
    }
    std::vector<float> logits(n * labels);
    model.forward(ids.data(), mask.data(), int64_t(n), int64_t(len), logits.data());
    for (size_t i = 0; i < n; ++i)
      out.emplace_back(logits.begin() + long(i * labels), logits.begin() + long((i + 1) * labels));
  }
  return out;
}

void expect_matches(const fs::path& model_dir, const fs::path& ids_path, const fs::path& logits_path, size_t batch_size,
                    int expected_correct) {
  const auto model = qjoule::model::load_encoder_classifier(model_dir);
  const auto seqs = read_token_ids(ids_path);
  const auto ref = read_logits(logits_path);
  ASSERT_EQ(seqs.size(), ref.size());
  const auto got = run(model, seqs, batch_size);
  float max_diff = 0.0f;
  int correct = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_EQ(got[i].size(), ref[i].logits.size());
    for (size_t j = 0; j < got[i].size(); ++j) max_diff = std::max(max_diff, std::fabs(got[i][j] - ref[i].logits[j]));
    const int pred = int(std::max_element(got[i].begin(), got[i].end()) - got[i].begin());
    EXPECT_EQ(pred, ref[i].pred) << "example " << i;
    correct += pred == ref[i].label;
  }
  EXPECT_LT(max_diff, 1e-4f);
  if (expected_correct >= 0) {
    EXPECT_EQ(correct, expected_correct);
  }
  std::printf("max |logit - reference| = %.3g over %zu examples, %d correct\n", double(max_diff), ref.size(), correct);
}

TEST(EncoderReference, Sst2DistilBertMiniMatchesPyTorch) {
  QJOULE_REQUIRE_SHARED("models/sst2-distilbert-mini/reference/dev_logits.tsv");
  const auto dir = qjoule::test::shared_data("models/sst2-distilbert-mini");
  expect_matches(dir, dir / "reference/dev_token_ids.tsv", dir / "reference/dev_logits.tsv", 16, 717);
}

TEST(EncoderReference, TinyBertFixtureMatchesPyTorch) {
  const auto dir = qjoule::test::fixtures_dir() / "tiny-bert";
  expect_matches(dir, dir / "reference_token_ids.tsv", dir / "reference_logits.tsv", 4, -1);
}

}  // namespace
