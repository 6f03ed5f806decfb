// BPE tokenizers from tokenizer.json: exact ids and decoded text against the reference written by
// tools/make_bpe_tokenizer_fixtures.py, round trips, the split-pattern matchers on tricky text,
// the byte-level alphabet, merge order, and the one-line errors for bad files and text.
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "error_of.h"
#include "qjoule/tokenize/bpe_tokenizer.h"
#include "qjoule/tokenize/utf8.h"
#include "test_paths.h"
#include "tokenize/bpe_model.h"
#include "tokenize/bpe_split_patterns.h"
#include "tokenize/byte_level_alphabet.h"

namespace qjoule::tokenize {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Pieces = std::vector<std::string_view>;

std::filesystem::path fixture(const std::string& name) { return test::fixtures_dir() / "bpe" / name; }

struct ExpectedLine {
  std::string text;
  bool add_special_tokens = false;
  std::vector<int32_t> ids;
  std::string decoded;
};

std::vector<ExpectedLine> expected_lines(const std::string& name) {
  std::ifstream in(fixture(name) / "expected_ids.jsonl");
  std::vector<ExpectedLine> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const json row = json::parse(line);
    lines.push_back({row.at("text").get<std::string>(), row.at("add_special_tokens").get<bool>(),
                     row.at("ids").get<std::vector<int32_t>>(), row.at("decoded").get<std::string>()});
  }
  return lines;
}

// --- fixtures: exact ids and decoded text ----------------------------------------------------

class BpeTokenizerFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(BpeTokenizerFixture, EncodesEveryTextToTheReferenceIds) {
  const auto tokenizer = BpeTokenizer::from_tokenizer_json(fixture(GetParam()) / "tokenizer.json");
  const auto lines = expected_lines(GetParam());
  ASSERT_GE(lines.size(), 30u);
  for (const auto& line : lines) {
    EXPECT_EQ(tokenizer.encode(line.text, line.add_special_tokens), line.ids)
        << "text: \"" << line.text << "\" add_special_tokens=" << line.add_special_tokens;
  }
}

TEST_P(BpeTokenizerFixture, DecodesReferenceIdsToReferenceText) {
  const auto tokenizer = BpeTokenizer::from_tokenizer_json(fixture(GetParam()));  // a model directory
  for (const auto& line : expected_lines(GetParam())) {
    EXPECT_EQ(tokenizer.decode(line.ids), line.decoded) << "text: \"" << line.text << "\"";
  }
}

TEST_P(BpeTokenizerFixture, DecodeOfEncodeGivesTheTextBack) {
  const auto tokenizer = BpeTokenizer::from_tokenizer_json(fixture(GetParam()));
  const bool drops_leading_space = GetParam() == "sentencepiece_metaspace";  // Metaspace prepend "first"
  for (const auto& line : expected_lines(GetParam())) {
    if (line.add_special_tokens) continue;
    // Prepend("▁") adds a ▁ to the text after each special token, which decodes as a space.
    if (GetParam() == "sentencepiece" &&
        (line.text.find("<s>") != std::string::npos || line.text.find("</s>") != std::string::npos)) {
      continue;
    }
    std::string expected = line.text;
    if (drops_leading_space && !expected.empty() && expected[0] == ' ') expected.erase(0, 1);
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(line.text)), expected);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BpeTokenizerFixture,
                         ::testing::Values("byte_level", "llama3", "sentencepiece", "sentencepiece_metaspace"));

TEST(BpeTokenizerFiles, StyleSizeAndSpecialIds) {
  const auto gpt2 = BpeTokenizer::from_tokenizer_json(fixture("byte_level"));
  EXPECT_EQ(gpt2.style(), "byte-level");
  EXPECT_EQ(gpt2.vocab_size(), 558);
  EXPECT_EQ(gpt2.bos_id(), std::nullopt);
  EXPECT_EQ(gpt2.eos_id(), gpt2.token_to_id("<|endoftext|>"));
  EXPECT_EQ(gpt2.encode("Hi", true), gpt2.encode("Hi"));  // GPT-2 adds no special tokens

  const auto llama3 = BpeTokenizer::from_tokenizer_json(fixture("llama3"));
  EXPECT_EQ(llama3.style(), "byte-level");
  EXPECT_EQ(llama3.bos_id(), llama3.token_to_id("<|begin_of_text|>"));
  EXPECT_EQ(llama3.eos_id(), llama3.token_to_id("<|end_of_text|>"));

  const auto llama2 = BpeTokenizer::from_tokenizer_json(fixture("sentencepiece"));
  EXPECT_EQ(llama2.style(), "sentencepiece");
  EXPECT_EQ(llama2.bos_id(), 1);
  EXPECT_EQ(llama2.eos_id(), 2);
  EXPECT_EQ(llama2.encode("Hi", true).front(), 1);
  EXPECT_EQ(llama2.decode(llama2.encode("Hi", true), /*skip_special_tokens=*/true), "Hi");
  EXPECT_EQ(llama2.decode({1, 2}), "<s></s>");
}

TEST(BpeTokenizerFiles, ByteFallbackSpellsUnknownCharactersAsBytes) {
  const auto tokenizer = BpeTokenizer::from_tokenizer_json(fixture("sentencepiece"));
  const auto ids = tokenizer.encode("🙂");  // ▁ then F0 9F 99 82
  ASSERT_EQ(ids.size(), 5u);
  EXPECT_EQ(ids[1], tokenizer.token_to_id("<0xF0>"));
  EXPECT_EQ(ids[4], tokenizer.token_to_id("<0x82>"));
  // A lone byte that is not UTF-8 decodes as U+FFFD, as tokenizers' ByteFallback does.
  EXPECT_EQ(tokenizer.decode({*tokenizer.token_to_id("<0xF0>")}), "\xEF\xBF\xBD");
}

TEST(BpeTokenizerFiles, NfcNormalizerAndStrippingAddedTokens) {
  std::ifstream in(fixture("byte_level") / "tokenizer.json");
  json doc = json::parse(in);
  doc["normalizer"] = {{"type", "NFC"}};
  for (auto& token : doc["added_tokens"]) {
    if (token["content"] == "<|pad|>") token["lstrip"] = token["rstrip"] = true;
  }
  const auto dir = test::temp_dir("bpe-nfc-strip");
  std::ofstream(dir / "tokenizer.json", std::ios::binary) << doc.dump();
  const auto tokenizer = BpeTokenizer::from_tokenizer_json(dir);
  EXPECT_EQ(tokenizer.encode("cafe\xCC\x81"), tokenizer.encode("caf\xC3\xA9"));  // e + U+0301 -> é
  const int32_t pad = *tokenizer.token_to_id("<|pad|>");
  std::vector<int32_t> expected = tokenizer.encode("a");
  expected.push_back(pad);
  const auto b = tokenizer.encode("b");
  expected.insert(expected.end(), b.begin(), b.end());
  EXPECT_EQ(tokenizer.encode("a  <|pad|>\n b"), expected);  // the whitespace goes with the token
}

// --- split patterns --------------------------------------------------------------------------

Pieces split(std::string_view text, SplitPattern pattern) { return split_by_pattern(text, pattern); }

TEST(BpeTokenizerSplit, Gpt2Pattern) {
  constexpr auto p = SplitPattern::kGpt2;
  EXPECT_THAT(split("Hello world", p), ElementsAre("Hello", " world"));
  EXPECT_THAT(split("don't I'll", p), ElementsAre("don", "'t", " I", "'ll"));
  EXPECT_THAT(split("DON'T", p), ElementsAre("DON", "'", "T"));  // case-sensitive contractions
  EXPECT_THAT(split("a   b", p), ElementsAre("a", "  ", " b"));  // \s+(?!\S) leaves one space
  EXPECT_THAT(split("a \n b", p), ElementsAre("a", " \n", " b"));
  EXPECT_THAT(split("end   ", p), ElementsAre("end", "   "));
  EXPECT_THAT(split("12345 678", p), ElementsAre("12345", " 678"));
  EXPECT_THAT(split("hi!! ?x", p), ElementsAre("hi", "!!", " ?", "x"));
  EXPECT_THAT(split("café 日本語", p), ElementsAre("café", " 日本語"));
  EXPECT_THAT(split("\ta", p), ElementsAre("\t", "a"));                    // only ' ' joins the next word
  EXPECT_THAT(split("x\xC2\xA0y", p), ElementsAre("x", "\xC2\xA0", "y"));  // NBSP is \s
  EXPECT_THAT(split("", p), ElementsAre());
}

TEST(BpeTokenizerSplit, Llama3Pattern) {
  constexpr auto p = SplitPattern::kLlama3;
  EXPECT_THAT(split("DON'T we'LL", p), ElementsAre("DON", "'T", " we", "'LL"));  // (?i:...)
  EXPECT_THAT(split("1234567", p), ElementsAre("123", "456", "7"));
  EXPECT_THAT(split("a\n\nb", p), ElementsAre("a", "\n\n", "b"));
  EXPECT_THAT(split("x  \n  y", p), ElementsAre("x", "  \n", " ", " y"));
  EXPECT_THAT(split("hi!!\n\nyo", p), ElementsAre("hi", "!!\n\n", "yo"));
  EXPECT_THAT(split("(hello) .world", p), ElementsAre("(hello", ")", " .", "world"));
  EXPECT_THAT(split("\tword", p), ElementsAre("\tword"));  // any non-letter, non-newline prefix
  EXPECT_THAT(split("\nword", p), ElementsAre("\n", "word"));
  EXPECT_THAT(split("x 12", p), ElementsAre("x", " ", "12"));
  EXPECT_THAT(split("a   ", p), ElementsAre("a", "   "));
}

TEST(BpeTokenizerSplit, Qwen2PatternTakesOneDigitAtATime) {
  EXPECT_THAT(split("x 123", SplitPattern::kQwen2), ElementsAre("x", " ", "1", "2", "3"));
  EXPECT_THAT(split("I'M", SplitPattern::kQwen2), ElementsAre("I", "'M"));
}

// Random strings over the characters each branch cares about, split by Python's `regex` module.
TEST(BpeTokenizerSplit, MatchesTheRegexModuleOnRandomText) {
  std::ifstream in(fixture("split_patterns.jsonl"));
  size_t cases = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const json row = json::parse(line);
    const std::string name = row.at("pattern").get<std::string>();
    const auto pattern = name == "gpt2"     ? SplitPattern::kGpt2
                         : name == "llama3" ? SplitPattern::kLlama3
                                            : SplitPattern::kQwen2;
    const std::string text = row.at("text").get<std::string>();
    const auto pieces = split_by_pattern(text, pattern);
    EXPECT_EQ(std::vector<std::string>(pieces.begin(), pieces.end()), row.at("pieces").get<std::vector<std::string>>())
        << name << " on \"" << text << "\"";
    ++cases;
  }
  EXPECT_EQ(cases, 450u);
}

TEST(BpeTokenizerSplit, PatternsAreRecognisedByTheirExactRegex) {
  for (const auto pattern : {SplitPattern::kGpt2, SplitPattern::kLlama3, SplitPattern::kQwen2}) {
    EXPECT_EQ(split_pattern_of_regex(regex_of_split_pattern(pattern)), pattern);
  }
  EXPECT_EQ(split_pattern_of_regex(R"(\s+)"), std::nullopt);
}

// --- byte-level alphabet and merge order ------------------------------------------------------

TEST(BpeTokenizerByteLevel, AlphabetIsGpt2s) {
  EXPECT_EQ(byte_level::char_of_byte(' '), "\xC4\xA0");   // Ġ
  EXPECT_EQ(byte_level::char_of_byte('\n'), "\xC4\x8A");  // Ċ
  EXPECT_EQ(byte_level::char_of_byte('a'), "a");
  EXPECT_EQ(byte_level::char_of_byte(0xAD), "\xC5\x83");  // Ń: the soft hyphen is remapped
  for (int b = 0; b < 256; ++b) {
    const auto chars = decode_utf8(byte_level::char_of_byte(static_cast<uint8_t>(b)), "alphabet");
    ASSERT_EQ(chars.size(), 1u);
    EXPECT_EQ(byte_level::byte_of_char(chars[0]), b);
  }
}

TEST(BpeTokenizerModel, MergesLowestRankFirstThenLeftmost) {
  const std::unordered_map<std::string, int32_t> vocab{{"a", 0}, {"b", 1}, {"ab", 2}, {"aa", 3}, {"aab", 4}};
  const BpeModel model(vocab, {{"a", "b"}, {"a", "a"}, {"a", "ab"}}, {}, "test");
  std::vector<int32_t> ids;
  model.encode_word("aab", ids);  // "a b" ranks before "a a": a|ab, then "a ab"
  EXPECT_THAT(ids, ElementsAre(4));
  ids.clear();
  model.encode_word("aaa", ids);  // equal ranks: leftmost first
  EXPECT_THAT(ids, ElementsAre(3, 0));
}

TEST(BpeTokenizerModel, UnknownCharactersFuseIntoOneUnk) {
  const std::unordered_map<std::string, int32_t> vocab{{"<unk>", 0}, {"a", 1}};
  const BpeModel model(vocab, {}, {.unk_token = "<unk>", .fuse_unk = true}, "test");
  std::vector<int32_t> ids;
  model.encode_word(
      "a\xC3\xA9\xC3\xA9"
      "a",
      ids);
  EXPECT_THAT(ids, ElementsAre(1, 0, 1));
}

// --- bad input --------------------------------------------------------------------------------

json fixture_json(const std::string& name) {
  std::ifstream in(fixture(name) / "tokenizer.json");
  return json::parse(in);
}

std::filesystem::path write_json_text(const std::string& text) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto path = test::temp_dir(std::string("bpe-") + info->name()) / "tokenizer.json";
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string load_error(const json& doc) {
  const auto path = write_json_text(doc.dump());
  return test::error_of([&] { BpeTokenizer::from_tokenizer_json(path); });
}

TEST(BpeTokenizerErrors, MissingFile) {
  EXPECT_THAT(test::error_of([] { BpeTokenizer::from_tokenizer_json("/no/such/dir/tokenizer.json"); }),
              HasSubstr("/no/such/dir/tokenizer.json: tokenizer.json file not found"));
}

TEST(BpeTokenizerErrors, NotJson) {
  const auto path = write_json_text("{\"model\": ");
  EXPECT_THAT(test::error_of([&] { BpeTokenizer::from_tokenizer_json(path); }),
              HasSubstr("tokenizer.json: malformed JSON"));
  const auto overflow = write_json_text(R"({"model": {"type": "BPE", "dropout": 1E400}})");
  EXPECT_THAT(test::error_of([&] { BpeTokenizer::from_tokenizer_json(overflow); }),
              HasSubstr("tokenizer.json: malformed JSON (number overflow parsing '1E400')"));
}

TEST(BpeTokenizerErrors, MissingModelVocabOrMerges) {
  json doc = fixture_json("byte_level");
  doc.erase("model");
  EXPECT_THAT(load_error(doc), HasSubstr("tokenizer.json: no 'model' field, expected a JSON object"));
  doc = fixture_json("byte_level");
  doc["model"].erase("vocab");
  EXPECT_THAT(load_error(doc), HasSubstr("tokenizer.json: no 'model.vocab' field"));
  doc = fixture_json("byte_level");
  doc["model"].erase("merges");
  EXPECT_THAT(load_error(doc), HasSubstr("tokenizer.json: no 'model.merges' field, expected an array of merges"));
}

TEST(BpeTokenizerErrors, MergeOfUnknownToken) {
  json doc = fixture_json("byte_level");
  doc["model"]["merges"][3] = "zzq Ġ";
  EXPECT_THAT(load_error(doc), HasSubstr("model.merges[3] names \"zzq\" is not in model.vocab"));
  doc["model"]["merges"][3] = "nospace";
  EXPECT_THAT(load_error(doc), HasSubstr("model.merges[3] is \"nospace\", expected two tokens separated by one space"));
}

TEST(BpeTokenizerErrors, UnsupportedTypes) {
  json doc = fixture_json("byte_level");
  doc["model"]["type"] = "Unigram";
  EXPECT_THAT(load_error(doc), HasSubstr("model.type is 'Unigram', expected 'BPE'"));
  doc = fixture_json("byte_level");
  doc["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_THAT(load_error(doc), HasSubstr("pre_tokenizer.type is 'Whitespace', expected 'ByteLevel', 'Split'"));
  doc = fixture_json("sentencepiece");
  doc["normalizer"]["normalizers"][1] = {{"type", "Lowercase"}};
  EXPECT_THAT(load_error(doc), HasSubstr("normalizer.normalizers[1].type is 'Lowercase', expected 'Prepend'"));
  doc = fixture_json("byte_level");
  doc["decoder"] = {{"type", "WordPiece"}};
  EXPECT_THAT(load_error(doc), HasSubstr("decoder.type is 'WordPiece', expected 'ByteLevel'"));
  doc = fixture_json("byte_level");
  doc["post_processor"] = {{"type", "RobertaProcessing"}};
  EXPECT_THAT(load_error(doc), HasSubstr("post_processor.type is 'RobertaProcessing', expected 'TemplateProcessing'"));
}

TEST(BpeTokenizerErrors, UnknownSplitPattern) {
  json doc = fixture_json("llama3");
  doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+";
  EXPECT_THAT(load_error(doc), HasSubstr("pre_tokenizer.pretokenizers[0].pattern is {\"Regex\":\"\\\\w+\"}, expected "
                                         "the exact GPT-2, Llama-3 or Qwen2 pre-tokenizer regex"));
}

TEST(BpeTokenizerErrors, InvalidUtf8TextAndBadIds) {
  const auto tokenizer = BpeTokenizer::from_tokenizer_json(fixture("byte_level"));
  EXPECT_THAT(test::error_of([&] { tokenizer.encode("ok \xC3("); }),
              HasSubstr("text to encode: invalid UTF-8 at byte offset 3"));
  EXPECT_THAT(test::error_of([&] {
                tokenizer.decode({5, 9999});
              }),
              HasSubstr("cannot decode id 9999 at position 1: not a token id (vocabulary size 558)"));
}

}  // namespace
}  // namespace qjoule::tokenize
