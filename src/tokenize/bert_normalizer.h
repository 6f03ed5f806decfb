// BERT text normalisation, in the order of Hugging Face tokenizers' BertNormalizer:
// clean text, space out CJK ideographs, strip accents (NFD, drop Mn), lower-case.
// Lower-casing maps each code point on its own (as BertTokenizerFast; no final-sigma rule).
#pragma once

#include <string>
#include <string_view>

#include "qjoule/tokenize/wordpiece_tokenizer.h"

namespace qjoule::tokenize {

// Appends the normalised form of `text` to `out` (`out` is not cleared).
void bert_normalize(std::u32string_view text, const WordPieceOptions& options, std::u32string& out);

}  // namespace qjoule::tokenize
