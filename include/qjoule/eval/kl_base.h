// The KL base: what an FP32 perplexity run saves (`qjoule ppl --save-kl-base FILE`) so that a
// quantized run over the same tokens can report mean KL divergence, top-1 agreement and ΔPPL against
// it (`--kl-base FILE`), as llama.cpp's perplexity tool does.
//
// File layout (little-endian), version 1:
//   char[8]  magic "QJKLBAS1"
//   int32    vocab_size            int32  reserved (0)
//   int64    ctx, stride, n_tokens, scored
//   float64  nll_sum               (of the base run: its perplexity is exp(nll_sum / scored))
//   int32    token_ids[n_tokens]
//   uint16   log_probs[scored][vocab_size]   FP16 log-softmax of the base model for each scored token,
//                                            in scoring order (FP16 keeps ~3 significant digits of a
//                                            log-probability: enough for KL, and half of FP32's size)
// Size: scored × vocab × 2 bytes (e.g. 32,000 vocab × 4,096 scored tokens = 250 MiB).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace qjoule::eval {

struct KlBase {
  int32_t vocab_size = 0;
  int64_t ctx = 0, stride = 0;
  std::vector<int32_t> token_ids;
  int64_t scored = 0;
  double nll_sum = 0.0;
  std::vector<uint16_t> log_probs;  // [scored, vocab_size] FP16 bits

  double ppl() const;
};

void write_kl_base(const std::filesystem::path& path, const KlBase& base);

// Reads and validates a KL base: magic, version, sizes against the file length, and every token id
// inside [0, vocab_size); any failure is one line naming the file and what was found.
KlBase read_kl_base(const std::filesystem::path& path);

}  // namespace qjoule::eval
