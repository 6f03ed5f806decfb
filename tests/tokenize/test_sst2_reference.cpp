// Acceptance test: every SST-2 dev sentence tokenised with sst2-distilbert-mini's tokenizer gives
// exactly the ids Hugging Face produced (reference/dev_token_ids.tsv), from vocab.txt, from
// tokenizer.json and from the model folder.
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "qjoule/tokenize/wordpiece_tokenizer.h"
#include "test_paths.h"

namespace qjoule::tokenize {
namespace {

constexpr const char* kDev = "sst2/dev.tsv";
constexpr const char* kModel = "models/sst2-distilbert-mini";
constexpr const char* kReference = "models/sst2-distilbert-mini/reference/dev_token_ids.tsv";
constexpr size_t kMaxLength = 128;

std::vector<std::string> read_lines(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> dev_sentences() {
  std::vector<std::string> lines = read_lines(test::shared_data(kDev));
  EXPECT_EQ(lines.at(0), "sentence\tlabel");
  std::vector<std::string> sentences;
  for (size_t i = 1; i < lines.size(); ++i) sentences.push_back(lines[i].substr(0, lines[i].rfind('\t')));
  return sentences;
}

std::vector<std::vector<int32_t>> reference_ids() {
  std::vector<std::vector<int32_t>> rows;
  for (const std::string& line : read_lines(test::shared_data(kReference))) {
    const size_t tab = line.find('\t');
    EXPECT_EQ(std::stoul(line.substr(0, tab)), rows.size());
    std::istringstream ids(line.substr(tab + 1));
    rows.emplace_back();
    for (int32_t id = 0; ids >> id;) rows.back().push_back(id);
  }
  return rows;
}

void expect_reference_ids(const WordPieceTokenizer& tok) {
  const std::vector<std::string> sentences = dev_sentences();
  const std::vector<std::vector<int32_t>> expected = reference_ids();
  ASSERT_EQ(sentences.size(), 872u);
  ASSERT_EQ(expected.size(), 872u);

  const auto start = std::chrono::steady_clock::now();
  std::vector<Encoding> encodings;
  encodings.reserve(sentences.size());
  for (size_t i = 0; i < sentences.size(); ++i) {
    encodings.push_back(tok.encode(sentences[i], kMaxLength, "dev.tsv:" + std::to_string(i + 2)));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ timing   ] " << tok.source().filename().string() << ": 872 dev sentences in " << seconds * 1000.0
            << " ms\n";
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_LT(seconds, 1.0) << "tokenizing 872 sentences should take well under a second";
#endif

  size_t mismatches = 0;
  for (size_t i = 0; i < sentences.size(); ++i) {
    if (encodings[i].ids != expected[i] && ++mismatches <= 5) {
      ADD_FAILURE() << "dev sentence " << i << " differs: " << sentences[i];
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of 872 sentences";
}

TEST(Sst2Reference, VocabTxtMatchesHuggingFaceIds) {
  QJOULE_REQUIRE_SHARED(kReference);
  QJOULE_REQUIRE_SHARED(kDev);
  expect_reference_ids(WordPieceTokenizer::from_vocab_txt(test::shared_data(kModel) / "vocab.txt"));
}

TEST(Sst2Reference, TokenizerJsonMatchesHuggingFaceIds) {
  QJOULE_REQUIRE_SHARED(kReference);
  QJOULE_REQUIRE_SHARED(kDev);
  expect_reference_ids(WordPieceTokenizer::from_tokenizer_json(test::shared_data(kModel) / "tokenizer.json"));
}

TEST(Sst2Reference, ModelDirMatchesHuggingFaceIds) {
  QJOULE_REQUIRE_SHARED(kReference);
  QJOULE_REQUIRE_SHARED(kDev);
  const auto tok = WordPieceTokenizer::from_model_dir(test::shared_data(kModel));
  EXPECT_EQ(tok.source().filename(), "tokenizer.json");
  expect_reference_ids(tok);
}

}  // namespace
}  // namespace qjoule::tokenize
