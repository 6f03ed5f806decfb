// A small vocabulary written to disk by the tokenizer tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_paths.h"

namespace qjoule::test {

inline const std::vector<std::string>& tiny_vocab_tokens() {
  static const std::vector<std::string> tokens = {
      "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",  // 0-4
      "cafe",  "naive", "un",    "##aff", "##able",  // 5-9
      "hello", "world", ",",     "!",     "中",      // 10-14
      "国",    "a",     "##b",   "the",   "##s",     // 15-19
      "i",     "[",     "]",     "mask",  "—",       // 20-24
      "«",     "»",     "café",  "Hello", "?",       // 25-29
      "ab",    "##bb",  ".",     "'",     "ο",       // 30-34
  };
  return tokens;
}

// Writes `tokens` one per line to <temp>/<name>/vocab.txt and returns the file.
inline std::filesystem::path write_vocab_txt(const std::string& name, const std::vector<std::string>& tokens,
                                             const std::string& line_end = "\n") {
  const auto path = temp_dir(name) / "vocab.txt";
  std::ofstream out(path, std::ios::binary);
  for (const auto& token : tokens) out << token << line_end;
  return path;
}

}  // namespace qjoule::test
