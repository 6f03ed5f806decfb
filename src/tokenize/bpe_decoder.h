// The decoders of BPE tokenizer.json files: token strings -> text, as tokenizers' decode_chain.
#pragma once

#include <string>
#include <vector>

#include "tokenize/bpe_spec.h"

namespace qjoule::tokenize {

// `tokens` through every step in order, then concatenated. Bytes that do not form UTF-8 come out
// as U+FFFD, as in tokenizers (ByteLevel: lossy UTF-8; ByteFallback: one U+FFFD per byte).
std::string decode_bpe_tokens(std::vector<std::string> tokens, const std::vector<DecoderStep>& steps);

}  // namespace qjoule::tokenize
