// Reads a BERT vocab.txt: one token per line, id = 0-based line number.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "qjoule/error.h"
#include "qjoule/tokenize/utf8.h"
#include "tokenize/file_bytes.h"
#include "tokenize/tokenizer_spec.h"

namespace qjoule::tokenize {
namespace {

constexpr std::string_view kBertSpecialTokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

// Splits on LF, CRLF or a lone CR (Python's universal newlines, as transformers reads the file).
std::vector<std::string> split_lines(const std::string& bytes) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] == '\n' || bytes[i] == '\r') {
      lines.emplace_back(bytes, start, i - start);
      if (bytes[i] == '\r' && i + 1 < bytes.size() && bytes[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  if (start < bytes.size()) lines.emplace_back(bytes, start, bytes.size() - start);
  return lines;
}

}  // namespace

TokenizerSpec read_vocab_txt(const std::filesystem::path& path, const WordPieceOptions& options) {
  std::string bytes = read_file_bytes(path, "vocabulary");
  if (bytes.starts_with("\xEF\xBB\xBF")) bytes.erase(0, 3);  // UTF-8 byte order mark
  std::vector<std::string> tokens = split_lines(bytes);
  if (tokens.empty()) fail("{}: empty vocabulary, expected one token per line", path.string());
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail("{}: {} tokens, expected at most {}", path.string(), tokens.size(), std::numeric_limits<int32_t>::max());
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    check_utf8(tokens[i], fmt::format("{}:{}", path.string(), i + 1));
  }
  TokenizerSpec spec;
  spec.source = path;
  spec.options = options;
  spec.vocabulary = Vocabulary(std::move(tokens));
  for (const std::string_view special : kBertSpecialTokens) {
    if (spec.vocabulary.find(special)) spec.literal_tokens.emplace_back(special);
  }
  return spec;
}

}  // namespace qjoule::tokenize
