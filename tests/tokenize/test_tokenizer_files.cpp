// Loading tokenizers from vocab.txt, tokenizer.json, tokenizer_config.json and model folders, and
// the one-line errors for bad files.
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qjoule/error.h"
#include "qjoule/tokenize/wordpiece_tokenizer.h"
#include "tiny_vocab.h"
#include "error_of.h"

namespace qjoule::tokenize {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using Pieces = std::vector<std::string>;

std::string test_dir_name() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string("tokenize-files-") + info->name();
}

json tiny_tokenizer_json() {
  json vocab = json::object();
  const auto& tokens = test::tiny_vocab_tokens();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  json added = json::array();
  for (const auto& [content, id] : {std::pair{"[PAD]", 0}, {"[UNK]", 1}, {"[CLS]", 2}, {"[SEP]", 3}, {"[MASK]", 4}}) {
    added.push_back({{"id", id}, {"content", content}, {"normalized", false}, {"special", true}});
  }
  return {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer",
       {{"type", "BertNormalizer"},
        {"clean_text", true},
        {"handle_chinese_chars", true},
        {"strip_accents", nullptr},
        {"lowercase", true}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}})}}},
      {"model",
       {{"type", "WordPiece"},
        {"unk_token", "[UNK]"},
        {"continuing_subword_prefix", "##"},
        {"max_input_chars_per_word", 100},
        {"vocab", vocab}}},
  };
}

std::filesystem::path write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::filesystem::path write_tokenizer_json(const json& doc) {
  return write_file(test::temp_dir(test_dir_name()) / "tokenizer.json", doc.dump());
}

const std::string kSample = "Café naïve, unaffable 中国! Hello [MASK] the world's xyz";

// --- vocab.txt -------------------------------------------------------------------------------

TEST(VocabTxt, CrlfAndLfGiveTheSameTokenizer) {
  const auto lf =
      WordPieceTokenizer::from_vocab_txt(test::write_vocab_txt(test_dir_name() + "-lf", test::tiny_vocab_tokens()));
  const auto crlf = WordPieceTokenizer::from_vocab_txt(
      test::write_vocab_txt(test_dir_name() + "-crlf", test::tiny_vocab_tokens(), "\r\n"));
  EXPECT_EQ(crlf.vocab_size(), lf.vocab_size());
  EXPECT_EQ(crlf.encode(kSample, 64).ids, lf.encode(kSample, 64).ids);
}

TEST(VocabTxt, MissingSpecialTokenNamesFileAndToken) {
  std::vector<std::string> tokens = test::tiny_vocab_tokens();
  tokens.erase(tokens.begin() + 3);  // [SEP]
  const auto path = test::write_vocab_txt(test_dir_name(), tokens);
  const std::string message = test::error_of([&] { WordPieceTokenizer::from_vocab_txt(path); });
  EXPECT_THAT(message, HasSubstr(path.string() + ": vocabulary has no \"[SEP]\" token"));
  EXPECT_THAT(message, HasSubstr("expected the BERT special tokens [CLS], [SEP], [PAD] and [UNK]"));
}

TEST(VocabTxt, MissingFileIsNamed) {
  const auto path = test::temp_dir(test_dir_name()) / "nope" / "vocab.txt";
  EXPECT_THAT(test::error_of([&] { WordPieceTokenizer::from_vocab_txt(path); }),
              HasSubstr(path.string() + ": vocabulary file not found"));
}

TEST(VocabTxt, EmptyFileIsAnError) {
  const auto path = write_file(test::temp_dir(test_dir_name()) / "vocab.txt", "");
  EXPECT_THAT(test::error_of([&] { WordPieceTokenizer::from_vocab_txt(path); }),
              HasSubstr(path.string() + ": empty vocabulary, expected one token per line"));
}

TEST(VocabTxt, InvalidUtf8NamesFileAndLine) {
  const auto path = write_file(test::temp_dir(test_dir_name()) / "vocab.txt", "[PAD]\n[UNK]\nab\xC3\n");
  EXPECT_THAT(test::error_of([&] { WordPieceTokenizer::from_vocab_txt(path); }),
              HasSubstr(path.string() + ":3: invalid UTF-8 at byte offset 2"));
}

// --- tokenizer.json --------------------------------------------------------------------------

TEST(TokenizerJson, MatchesVocabTxt) {
  const auto from_json = WordPieceTokenizer::from_tokenizer_json(write_tokenizer_json(tiny_tokenizer_json()));
  const auto from_txt =
      WordPieceTokenizer::from_vocab_txt(test::write_vocab_txt(test_dir_name() + "-txt", test::tiny_vocab_tokens()));
  EXPECT_EQ(from_json.vocab_size(), from_txt.vocab_size());
  EXPECT_EQ(from_json.encode(kSample, 64).ids, from_txt.encode(kSample, 64).ids);
  EXPECT_EQ(from_json.tokenize("Café naïve"), (Pieces{"cafe", "naive"}));
  EXPECT_EQ(from_json.tokenize("hello [MASK]"), (Pieces{"hello", "[MASK]"}));
}

TEST(TokenizerJson, HonoursNormalizerFlags) {
  json doc = tiny_tokenizer_json();
  doc["normalizer"]["lowercase"] = false;  // strip_accents null follows lowercase
  const auto tok = WordPieceTokenizer::from_tokenizer_json(write_tokenizer_json(doc));
  EXPECT_FALSE(tok.options().lowercase);
  EXPECT_FALSE(tok.options().strip_accents);
  EXPECT_EQ(tok.tokenize("Hello café"), (Pieces{"Hello", "café"}));
}

TEST(TokenizerJson, HonoursModelSettings) {
  json doc = tiny_tokenizer_json();
  doc["model"]["max_input_chars_per_word"] = 5;
  const auto tok = WordPieceTokenizer::from_tokenizer_json(write_tokenizer_json(doc));
  EXPECT_EQ(tok.tokenize("hello unaffable"), (Pieces{"hello", "[UNK]"}));

  json renamed = tiny_tokenizer_json();
  renamed["model"]["vocab"].erase("[UNK]");
  renamed["model"]["vocab"]["<unk>"] = 1;
  renamed["model"]["unk_token"] = "<unk>";
  renamed["added_tokens"][1]["content"] = "<unk>";
  const auto tok2 = WordPieceTokenizer::from_tokenizer_json(write_tokenizer_json(renamed));
  EXPECT_EQ(tok2.unk_id(), 1);
  EXPECT_EQ(tok2.tokenize("xyz"), (Pieces{"<unk>"}));
}

TEST(TokenizerJson, RejectsNonWordPieceModel) {
  json doc = tiny_tokenizer_json();
  doc["model"]["type"] = "BPE";
  const auto path = write_tokenizer_json(doc);
  EXPECT_THAT(test::error_of([&] { WordPieceTokenizer::from_tokenizer_json(path); }),
              HasSubstr(path.string() + ": model.type is 'BPE', expected 'WordPiece'"));
}

TEST(TokenizerJson, RejectsBadVocabEntries) {
  json doc = tiny_tokenizer_json();
  doc["model"]["vocab"]["hello"] = "ten";
  EXPECT_THAT(test::error_of([&] { WordPieceTokenizer::from_tokenizer_json(write_tokenizer_json(doc)); }),
              HasSubstr("model.vocab[\"hello\"] is \"ten\" (a JSON string), expected an integer in 0..34"));
  doc["model"]["vocab"]["hello"] = 11;  // same id as "world"
  EXPECT_THAT(test::error_of([&] { WordPieceTokenizer::from_tokenizer_json(write_tokenizer_json(doc)); }),
              HasSubstr("model.vocab gives id 11 to both"));
}

TEST(TokenizerJson, RejectsUnsupportedPipelineParts) {
  json doc = tiny_tokenizer_json();
  doc["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_THAT(test::error_of([&] { WordPieceTokenizer::from_tokenizer_json(write_tokenizer_json(doc)); }),
              HasSubstr("pre_tokenizer is 'Whitespace', expected 'BertPreTokenizer'"));
  doc = tiny_tokenizer_json();
  doc["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array()}};
  EXPECT_THAT(test::error_of([&] { WordPieceTokenizer::from_tokenizer_json(write_tokenizer_json(doc)); }),
              HasSubstr("normalizer.type is 'Sequence', expected 'BertNormalizer'"));
  doc = tiny_tokenizer_json();
  doc["post_processor"]["single"].erase(0);
  EXPECT_THAT(test::error_of([&] { WordPieceTokenizer::from_tokenizer_json(write_tokenizer_json(doc)); }),
              HasSubstr("post_processor makes '$A [SEP]' for a single text, expected '[CLS] $A [SEP]'"));
}

TEST(TokenizerJson, MalformedJsonIsOneLine) {
  const auto path = write_file(test::temp_dir(test_dir_name()) / "tokenizer.json", "{\"model\": {\n");
  const std::string message = test::error_of([&] { WordPieceTokenizer::from_tokenizer_json(path); });
  EXPECT_THAT(message, HasSubstr(path.string() + ": malformed JSON ("));
  EXPECT_THAT(message, HasSubstr("expected a Hugging Face tokenizer.json"));
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

// Found by fuzz_dataset in CI: json::parse throws out_of_range (not parse_error) for 1E400.
TEST(TokenizerJson, NumberTooLargeForADoubleIsOneLine) {
  const auto path = write_file(test::temp_dir(test_dir_name()) / "tokenizer.json",
                               R"({"model": {"type": "WordPiece", "vocab": {"a": 1E400}}})");
  EXPECT_THAT(test::error_of([&] { WordPieceTokenizer::from_tokenizer_json(path); }),
              HasSubstr(path.string() + ": malformed JSON (number overflow parsing '1E400')"));
}

// --- model folders ---------------------------------------------------------------------------

TEST(ModelDir, PrefersTokenizerJson) {
  const auto dir = test::temp_dir(test_dir_name());
  json doc = tiny_tokenizer_json();
  doc["normalizer"]["lowercase"] = false;
  write_file(dir / "tokenizer.json", doc.dump());
  std::ofstream(dir / "vocab.txt") << "[PAD]\n";  // would fail if it were read
  EXPECT_EQ(WordPieceTokenizer::from_model_dir(dir).source(), dir / "tokenizer.json");
  EXPECT_EQ(WordPieceTokenizer::from_model_dir(dir).tokenize("Hello"), (Pieces{"Hello"}));
}

TEST(ModelDir, FallsBackToVocabTxtWithTokenizerConfig) {
  const auto dir = test::temp_dir(test_dir_name());
  {
    std::ofstream out(dir / "vocab.txt");
    for (const auto& token : test::tiny_vocab_tokens()) out << token << "\n";
  }
  EXPECT_EQ(WordPieceTokenizer::from_model_dir(dir).tokenize("Hello"), (Pieces{"hello"}));
  write_file(dir / "tokenizer_config.json", R"({"do_lower_case": false, "tokenizer_class": "BertTokenizer"})");
  const auto cased = WordPieceTokenizer::from_model_dir(dir);
  EXPECT_EQ(cased.source(), dir / "vocab.txt");
  EXPECT_EQ(cased.tokenize("Hello café"), (Pieces{"Hello", "café"}));
  write_file(dir / "tokenizer_config.json", R"({"do_lower_case": "yes"})");
  EXPECT_THAT(test::error_of([&] { WordPieceTokenizer::from_model_dir(dir); }),
              HasSubstr("tokenizer_config.json: 'do_lower_case' is \"yes\" (a JSON string), expected true or false"));
  // A number too large for a double is nlohmann's out_of_range, not a parse_error: still one line.
  write_file(dir / "tokenizer_config.json", R"({"model_max_length": 1E400})");
  EXPECT_THAT(test::error_of([&] { WordPieceTokenizer::from_model_dir(dir); }),
              HasSubstr("tokenizer_config.json: malformed JSON (number overflow parsing '1E400')"));
}

TEST(ModelDir, SaysWhatItLookedFor) {
  const auto dir = test::temp_dir(test_dir_name());
  EXPECT_THAT(
      test::error_of([&] { WordPieceTokenizer::from_model_dir(dir); }),
      HasSubstr(dir.string() + ": no tokenizer found, expected tokenizer.json (a WordPiece model) or vocab.txt"));
  EXPECT_THAT(test::error_of([&] { WordPieceTokenizer::from_model_dir(dir / "missing"); }),
              HasSubstr("missing: model directory not found"));
}

}  // namespace
}  // namespace qjoule::tokenize
