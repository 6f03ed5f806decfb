// WordPieceTokenizer on fixed strings, with a tiny vocab.txt written by the test.
#include "qjoule/tokenize/wordpiece_tokenizer.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/error.h"
#include "tiny_vocab.h"

namespace qjoule::tokenize {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Pieces = std::vector<std::string>;

std::string current_test_name() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string("tokenize-") + info->test_suite_name() + "-" + info->name();
}

WordPieceTokenizer tiny(WordPieceOptions options = {}) {
  return WordPieceTokenizer::from_vocab_txt(test::write_vocab_txt(current_test_name(), test::tiny_vocab_tokens()),
                                            options);
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(WordPieceTokenizer, StripsAccentsAndLowercases) {
  const auto tok = tiny();
  EXPECT_EQ(tok.tokenize("Café naïve"), (Pieces{"cafe", "naive"}));
  EXPECT_EQ(tok.tokenize("CAFÉ NAÏVE"), (Pieces{"cafe", "naive"}));
  EXPECT_EQ(tok.tokenize("cafe\xCC\x81"), (Pieces{"cafe"}));  // already decomposed: e + U+0301
}

TEST(WordPieceTokenizer, SplitsIntoLongestMatchingPieces) {
  const auto tok = tiny();
  EXPECT_EQ(tok.tokenize("unaffable"), (Pieces{"un", "##aff", "##able"}));
  EXPECT_EQ(tok.tokenize("ab"), (Pieces{"ab"}));
  EXPECT_EQ(tok.tokenize("abbbb"), (Pieces{"ab", "##bb", "##b"}));
  EXPECT_EQ(tok.tokenize("the thes"), (Pieces{"the", "the", "##s"}));
}

TEST(WordPieceTokenizer, UnknownWordBecomesOneUnk) {
  const auto tok = tiny();
  EXPECT_EQ(tok.tokenize("xyz"), (Pieces{"[UNK]"}));
  EXPECT_EQ(tok.tokenize("helloxyz"), (Pieces{"[UNK]"}));  // whole word, not hello + [UNK]
  EXPECT_EQ(tok.tokenize("hello xyz world"), (Pieces{"hello", "[UNK]", "world"}));
  EXPECT_EQ(tok.encode("xyz", 8).ids, (std::vector<int32_t>{2, 1, 3}));
}

TEST(WordPieceTokenizer, WordsLongerThan100CharactersAreUnknown) {
  const auto tok = tiny();
  const std::string hundred = "a" + std::string(99, 'b');
  const std::vector<std::string> pieces = tok.tokenize(hundred);
  ASSERT_EQ(pieces.size(), 50u);
  EXPECT_EQ(pieces.front(), "ab");
  EXPECT_EQ(pieces.back(), "##bb");
  EXPECT_EQ(tok.tokenize(hundred + "b"), (Pieces{"[UNK]"}));
  EXPECT_EQ(tok.tokenize("hello " + hundred + "b world"), (Pieces{"hello", "[UNK]", "world"}));
}

TEST(WordPieceTokenizer, SplitsOffAsciiAndUnicodePunctuation) {
  const auto tok = tiny();
  EXPECT_EQ(tok.tokenize("hello,world!"), (Pieces{"hello", ",", "world", "!"}));
  EXPECT_EQ(tok.tokenize("hello—world"), (Pieces{"hello", "—", "world"}));      // Pd
  EXPECT_EQ(tok.tokenize("«hello»"), (Pieces{"«", "hello", "»"}));              // Pi, Pf
  EXPECT_EQ(tok.tokenize("hello$world"), (Pieces{"hello", "[UNK]", "world"}));  // ASCII 36
  EXPECT_EQ(tok.tokenize("the world's."), (Pieces{"the", "world", "'", "[UNK]", "."}));
  EXPECT_EQ(tok.tokenize("??"), (Pieces{"?", "?"}));
}

TEST(WordPieceTokenizer, PutsSpacesAroundCjkIdeographs) {
  const auto tok = tiny();
  EXPECT_EQ(tok.tokenize("中国"), (Pieces{"中", "国"}));
  EXPECT_EQ(tok.tokenize("the中国the"), (Pieces{"the", "中", "国", "the"}));
  WordPieceOptions no_cjk;
  no_cjk.tokenize_chinese_chars = false;
  EXPECT_EQ(tiny(no_cjk).tokenize("中国"), (Pieces{"[UNK]"}));
}

TEST(WordPieceTokenizer, CleansControlCharactersAndWhitespace) {
  const auto tok = tiny();
  EXPECT_EQ(tok.tokenize("hel\x01lo"), (Pieces{"hello"}));                // Cc removed
  EXPECT_EQ(tok.tokenize("hel\xC2\xADlo"), (Pieces{"hello"}));            // soft hyphen (Cf)
  EXPECT_EQ(tok.tokenize("hel\xEF\xBF\xBDlo"), (Pieces{"hello"}));        // U+FFFD
  EXPECT_EQ(tok.tokenize(std::string("hel\0lo", 6)), (Pieces{"hello"}));  // U+0000
  EXPECT_EQ(tok.tokenize("hello\tworld\r\nthe"), (Pieces{"hello", "world", "the"}));
  EXPECT_EQ(tok.tokenize("hello\xC2\xA0world\xE3\x80\x80the"), (Pieces{"hello", "world", "the"}));
  EXPECT_EQ(tok.tokenize("hello\xE2\x80\xA8world"), (Pieces{"hello", "world"}));  // U+2028
  EXPECT_EQ(tok.tokenize("hel\xEE\x80\x80lo"), (Pieces{"hello"}));                // private use (Co) removed
  EXPECT_EQ(tok.tokenize("hel\xCD\xB8lo"), (Pieces{"[UNK]"}));                    // unassigned U+0378 kept
}

TEST(WordPieceTokenizer, EmptyTextGivesClsSep) {
  const auto tok = tiny();
  EXPECT_TRUE(tok.tokenize("").empty());
  const Encoding empty = tok.encode("", 128);
  EXPECT_EQ(empty.ids, (std::vector<int32_t>{2, 3}));
  EXPECT_FALSE(empty.truncated);
  EXPECT_EQ(empty.untruncated_length, 2u);
  EXPECT_EQ(tok.encode(" \t\n\x01 ", 128).ids, (std::vector<int32_t>{2, 3}));
}

TEST(WordPieceTokenizer, EncodesWithClsSepAndTruncates) {
  const auto tok = tiny();
  const Encoding full = tok.encode("hello world the hello", 6);
  EXPECT_EQ(full.ids, (std::vector<int32_t>{2, 10, 11, 18, 10, 3}));
  EXPECT_FALSE(full.truncated);
  EXPECT_EQ(full.untruncated_length, 6u);

  const Encoding cut = tok.encode("hello world the hello", 4);
  EXPECT_EQ(cut.ids, (std::vector<int32_t>{2, 10, 11, 3}));
  EXPECT_TRUE(cut.truncated);
  EXPECT_EQ(cut.untruncated_length, 6u);

  const Encoding minimal = tok.encode("hello", 2);
  EXPECT_EQ(minimal.ids, (std::vector<int32_t>{2, 3}));
  EXPECT_TRUE(minimal.truncated);
}

TEST(WordPieceTokenizer, MaxLengthBelowTwoIsAnError) {
  const auto tok = tiny();
  EXPECT_THAT(error_of([&] { tok.encode("hello", 1, "dev.tsv:3"); }),
              HasSubstr("dev.tsv:3: max_length 1 is too small, expected at least 2"));
}

TEST(WordPieceTokenizer, SpecialTokensInTheTextKeepTheirIds) {
  const auto tok = tiny();
  EXPECT_EQ(tok.tokenize("hello [MASK] world"), (Pieces{"hello", "[MASK]", "world"}));
  EXPECT_EQ(tok.tokenize("hello[SEP]world"), (Pieces{"hello", "[SEP]", "world"}));
  EXPECT_EQ(tok.tokenize("[mask]"), (Pieces{"[", "mask", "]"}));  // not the literal token
  EXPECT_EQ(tok.tokenize("[MASK"), (Pieces{"[", "mask"}));
}

TEST(WordPieceTokenizer, OptionsTurnOffLowercasingAndAccentStripping) {
  WordPieceOptions cased;
  cased.lowercase = false;
  cased.strip_accents = false;
  EXPECT_EQ(tiny(cased).tokenize("Hello café hello"), (Pieces{"Hello", "café", "hello"}));
  WordPieceOptions keep_accents;
  keep_accents.strip_accents = false;
  EXPECT_EQ(tiny(keep_accents).tokenize("Hello CAFÉ"), (Pieces{"hello", "café"}));
}

TEST(WordPieceTokenizer, LowercasesCapitalIWithDotAboveLikeHuggingFace) {
  EXPECT_EQ(tiny().tokenize("\xC4\xB0"), (Pieces{"i"}));  // U+0130 -> i + U+0307 -> i
  WordPieceOptions keep_accents;
  keep_accents.strip_accents = false;
  EXPECT_EQ(tiny(keep_accents).tokenize("\xC4\xB0"), (Pieces{"[UNK]"}));  // "i\u0307"
}

TEST(WordPieceTokenizer, LooksUpTokensAndIds) {
  const auto tok = tiny();
  EXPECT_EQ(tok.cls_id(), 2);
  EXPECT_EQ(tok.sep_id(), 3);
  EXPECT_EQ(tok.pad_id(), 0);
  EXPECT_EQ(tok.unk_id(), 1);
  EXPECT_EQ(tok.vocab_size(), test::tiny_vocab_tokens().size());
  EXPECT_EQ(tok.token_to_id("hello"), 10);
  EXPECT_EQ(tok.token_to_id("##aff"), 8);
  EXPECT_EQ(tok.token_to_id("nope"), std::nullopt);
  EXPECT_EQ(tok.id_to_token(10), "hello");
  EXPECT_THAT(error_of([&] { tok.id_to_token(1000); }),
              HasSubstr("vocab.txt: token id 1000 out of range, expected 0..34"));
  EXPECT_THAT(error_of([&] { tok.id_to_token(-1); }), HasSubstr("token id -1 out of range"));
}

TEST(WordPieceTokenizer, InvalidUtf8NamesTheContext) {
  const auto tok = tiny();
  const std::string message = error_of([&] { tok.tokenize("ok \xFF", "dev.tsv:17"); });
  EXPECT_THAT(message, HasSubstr("dev.tsv:17: invalid UTF-8 at byte offset 3"));
  EXPECT_THAT(error_of([&] { tok.encode("caf\xC3", 128, "train.tsv:9"); }),
              HasSubstr("train.tsv:9: invalid UTF-8 at byte offset 3"));
}

}  // namespace
}  // namespace qjoule::tokenize
