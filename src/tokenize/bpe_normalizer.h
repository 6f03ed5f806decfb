// The normalizers of BPE tokenizer.json files, applied to each stretch of text between added tokens.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenize/bpe_spec.h"

namespace qjoule::tokenize {

// `text` (valid UTF-8) through every step in order. Prepend adds to non-empty text only.
std::string normalize_for_bpe(std::string_view text, const std::vector<NormalizerStep>& steps);

// Every occurrence of `pattern` (non-empty) in `text` replaced by `content`.
std::string replace_all(std::string_view text, std::string_view pattern, std::string_view content);

}  // namespace qjoule::tokenize
