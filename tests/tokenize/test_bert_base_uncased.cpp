// The real bert-base-uncased vocabulary from ../shared (skipped when it is absent).
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qjoule/tokenize/wordpiece_tokenizer.h"
#include "test_paths.h"

namespace qjoule::tokenize {
namespace {

constexpr const char* kDir = "tokenizers/bert-base-uncased";

TEST(BertBaseUncased, EncodesKnownSentences) {
  QJOULE_REQUIRE_SHARED(kDir);
  const auto dir = test::shared_data(kDir);
  for (const auto& tok : {WordPieceTokenizer::from_vocab_txt(dir / "vocab.txt"),
                          WordPieceTokenizer::from_tokenizer_json(dir / "tokenizer.json")}) {
    SCOPED_TRACE(tok.source().string());
    EXPECT_EQ(tok.vocab_size(), 30522u);
    EXPECT_EQ(tok.encode("Hello, World!", 128).ids, (std::vector<int32_t>{101, 7592, 1010, 2088, 999, 102}));
    EXPECT_EQ(tok.tokenize("Café naïve"), (std::vector<std::string>{"cafe", "naive"}));
    EXPECT_EQ(tok.encode("中国", 128).ids, (std::vector<int32_t>{101, 1746, 1799, 102}));
    EXPECT_EQ(tok.encode("[MASK]", 128).ids, (std::vector<int32_t>{101, 103, 102}));
  }
}

TEST(BertBaseUncased, VocabTxtAndTokenizerJsonAgree) {
  QJOULE_REQUIRE_SHARED(kDir);
  const auto dir = test::shared_data(kDir);
  const auto txt = WordPieceTokenizer::from_vocab_txt(dir / "vocab.txt");
  const auto from_json = WordPieceTokenizer::from_tokenizer_json(dir / "tokenizer.json");
  for (const std::string text : {"The quick brown fox, naïvely—«jumped» over 3.14 lazy dogs!",
                                 "Ünïcödé ÅNGSTRÖM İstanbul ΟΔΟΣ Москва 東京 서울 مرحبا",
                                 "tab\there\r\nnew\u2028line \u00ADsoft\u200bzero [SEP] x[CLS]y",
                                 "antidisestablishmentarianism supercalifragilisticexpialidocious",
                                 "emoji 😀👍🏽 and symbols ©®™ €£¥ ½ ¼"}) {
    EXPECT_EQ(txt.encode(text, 512).ids, from_json.encode(text, 512).ids) << text;
  }
}

// Ids from Hugging Face's tokenizers library itself (see tests/tokenize/data/README.md).
TEST(BertBaseUncased, MatchesHuggingFaceTokenizersOnEdgeCases) {
  QJOULE_REQUIRE_SHARED(kDir);
  const auto dir = test::shared_data(kDir);
  std::ifstream in(std::filesystem::path(QJOULE_TOKENIZE_TEST_DATA) / "bert_base_uncased_hf_ids.jsonl");
  ASSERT_TRUE(in) << "missing tests/tokenize/data/bert_base_uncased_hf_ids.jsonl";
  std::vector<std::pair<std::string, std::vector<int32_t>>> cases;
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::json::parse(line);
    cases.emplace_back(row.at("text").get<std::string>(), row.at("ids").get<std::vector<int32_t>>());
  }
  ASSERT_EQ(cases.size(), 197u);
  for (const auto& tok : {WordPieceTokenizer::from_vocab_txt(dir / "vocab.txt"),
                          WordPieceTokenizer::from_tokenizer_json(dir / "tokenizer.json")}) {
    size_t mismatches = 0;
    for (const auto& [text, ids] : cases) {
      if (tok.encode(text, 1024).ids != ids && ++mismatches <= 5) {
        ADD_FAILURE() << tok.source().filename() << " differs on: " << nlohmann::json(text).dump();
      }
    }
    EXPECT_EQ(mismatches, 0u) << tok.source() << ", of " << cases.size() << " texts";
  }
}

}  // namespace
}  // namespace qjoule::tokenize
