// Words for a POSIX shell (bash, sh), one rule for every command line qjoule shows or writes: the
// job scripts of a Slurm sweep and the command `qjoule energy` prints.
#pragma once

#include <string>
#include <string_view>

namespace qjoule::io {

// 'text' in single quotes, each ' inside written as '\'': the shell reads back exactly `text`.
inline std::string shell_quoted(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

// `text` as it is when the shell would read it back unchanged (no blank, quote or special character),
// else shell_quoted(text).
inline std::string shell_word(std::string_view text) {
  const bool plain = !text.empty() && text.find_first_of(" \t\n'\"\\$`|&;<>()*?[]{}~#!") == std::string_view::npos;
  return plain ? std::string(text) : shell_quoted(text);
}

}  // namespace qjoule::io
