#include "qjoule/tokenize/utf8.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/error.h"

namespace qjoule::tokenize {
namespace {

using ::testing::HasSubstr;

std::string utf8_error(std::string_view text, std::string_view context = "dev.tsv:17") {
  try {
    check_utf8(text, context);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Utf8, DecodesAllSequenceLengths) {
  EXPECT_EQ(decode_utf8("a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80", "x"), std::u32string(U"a\u00E9\u4E2D\U0001F600"));
  EXPECT_EQ(decode_utf8("", "x"), std::u32string());
}

TEST(Utf8, EncodesWhatItDecodes) {
  std::string out;
  for (const char32_t c : std::u32string(U"a\u00E9\u4E2D\U0001F600\U0010FFFF")) append_utf8(c, out);
  EXPECT_EQ(decode_utf8(out, "x"), std::u32string(U"a\u00E9\u4E2D\U0001F600\U0010FFFF"));
}

TEST(Utf8, ErrorNamesContextOffsetAndProblem) {
  const std::string message = utf8_error("ab\xC3(");
  EXPECT_THAT(message, HasSubstr("dev.tsv:17: invalid UTF-8 at byte offset 2"));
  EXPECT_THAT(message, HasSubstr("0x28 after lead byte 0xC3"));
  EXPECT_THAT(message, HasSubstr("expected valid UTF-8"));
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

TEST(Utf8, RejectsEveryIllFormedKind) {
  EXPECT_THAT(utf8_error("\x80"), HasSubstr("continuation byte 0x80 without a lead byte"));
  EXPECT_THAT(utf8_error("\xC0\xAF"), HasSubstr("never occurs"));  // overlong '/'
  EXPECT_THAT(utf8_error("\xE0\x80\xAF"), HasSubstr("overlong"));
  EXPECT_THAT(utf8_error("\xED\xA0\x80"), HasSubstr("surrogate"));
  EXPECT_THAT(utf8_error("\xF4\x90\x80\x80"), HasSubstr("beyond U+10FFFF"));
  EXPECT_THAT(utf8_error("\xFF"), HasSubstr("0xFF, which never occurs"));
  EXPECT_THAT(utf8_error("ok\xE4\xB8"), HasSubstr("cut short by the end of the text"));
  EXPECT_THAT(utf8_error("\xC3\xA9", ""), HasSubstr("no error"));
  EXPECT_THAT(utf8_error("\xFF", ""), HasSubstr("text: invalid UTF-8 at byte offset 0"));
}

}  // namespace
}  // namespace qjoule::tokenize
