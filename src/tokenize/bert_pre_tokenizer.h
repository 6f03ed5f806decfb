// BERT pre-tokenisation (Hugging Face BertPreTokenizer): split normalised text on whitespace and
// make every punctuation character a word of its own.
#pragma once

#include <string_view>
#include <vector>

namespace qjoule::tokenize {

// Replaces `words` with views into `text`, in order.
void bert_pre_tokenize(std::u32string_view text, std::vector<std::u32string_view>& words);

}  // namespace qjoule::tokenize
