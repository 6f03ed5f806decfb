// The regex pre-tokenizers of byte-level BPE models, written as hand matchers over Unicode
// categories (utf8proc) because std::regex has no \p{L}. Each follows its regex's alternation
// order and backtracking exactly; a Split pre-tokenizer names its pattern by the exact string.
//   GPT-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   Llama-3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   Qwen2:   as Llama-3 with \p{N} (one digit per piece)
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace qjoule::tokenize {

enum class SplitPattern { kGpt2, kLlama3, kQwen2 };

// The pattern whose regex source is exactly `regex` (as written in tokenizer.json), or nullopt.
std::optional<SplitPattern> split_pattern_of_regex(std::string_view regex);
std::string_view regex_of_split_pattern(SplitPattern pattern);
std::string_view name_of_split_pattern(SplitPattern pattern);

// The pieces of valid UTF-8 `text` (views into it) the pattern's matches give, in order; text
// between matches (none for these patterns, which match every character) is kept as pieces too.
std::vector<std::string_view> split_by_pattern(std::string_view text, SplitPattern pattern);

}  // namespace qjoule::tokenize
