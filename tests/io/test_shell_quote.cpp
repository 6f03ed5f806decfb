// The one shell-quoting rule (qjoule/io/shell_quote.h), checked by handing the words back to bash.
#include "qjoule/io/shell_quote.h"

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

namespace qjoule::io {
namespace {

// What bash prints for `printf '%s' WORD`.
std::string bash_reads(const std::string& word) {
  const std::string command = "bash -c " + shell_quoted("printf '%s' " + word);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return "<popen failed>";
  std::string out;
  char buffer[256];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

TEST(ShellQuote, BashReadsBackExactlyWhatWasQuoted) {
  for (const std::string text : {"plain", "two words", "it's", "'", "a\"b", "$HOME", "x;y", "", "*", "a\\b"}) {
    EXPECT_EQ(bash_reads(shell_quoted(text)), text) << text;
    EXPECT_EQ(bash_reads(shell_word(text)), text) << text;
  }
}

TEST(ShellQuote, PlainWordsStayAsTheyAre) {
  EXPECT_EQ(shell_word("--seq"), "--seq");
  EXPECT_EQ(shell_word("/tmp/a.b"), "/tmp/a.b");
  EXPECT_EQ(shell_word("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_word(""), "''");
  EXPECT_EQ(shell_quoted("a b"), "'a b'");
}

}  // namespace
}  // namespace qjoule::io
