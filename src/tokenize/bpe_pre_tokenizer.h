// The pre-tokenizers of BPE tokenizer.json files: split a normalized stretch of text into the
// words the BPE model encodes one by one (byte-level words come out spelled in GPT-2's alphabet).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenize/bpe_spec.h"

namespace qjoule::tokenize {

// `at_text_start`: the stretch begins at the start of the whole text (Metaspace prepend "first").
std::vector<std::string> pre_tokenize_for_bpe(std::string_view text, const std::vector<PreTokenizerStep>& steps,
                                              bool at_text_start);

}  // namespace qjoule::tokenize
