#include "model/export/gguf_blocks.h"

#include <cstring>

#include "qjoule/error.h"
#include "qjoule/io/gguf.h"
#include "qjoule/quant/quantize_int4.h"

namespace qjoule::model {
namespace {

// qjoule keeps element 2i in the HIGH nibble of byte i (formats.h); GGML's blocks hold element j of a run of
// 2h in the low nibble of byte j and element j + h in its high nibble.
void ggml_nibbles(const uint8_t* qs, int64_t first, int64_t half, uint8_t* out) {
  for (int64_t j = 0; j < half; ++j)
    out[j] = static_cast<uint8_t>(quant::int4_nibble(qs, first + j) | (quant::int4_nibble(qs, first + j + half) << 4));
}

}  // namespace

std::vector<uint8_t> ggml_q4_0_of(const quant::BlockMatrix<quant::BlockInt4Sym<32>>& m) {
  std::vector<uint8_t> out(m.blocks.size() * io::kQ4_0BlockBytes);
  uint8_t* at = out.data();
  for (const auto& b : m.blocks) {
    std::memcpy(at, &b.d, 2);
    ggml_nibbles(b.qs, 0, 16, at + 2);
    at += io::kQ4_0BlockBytes;
  }
  return out;
}

std::vector<uint8_t> ggml_mxfp4_of(const quant::Mxfp4Matrix& m) {
  std::vector<uint8_t> out(m.blocks.size() * io::kGgmlMxfp4BlockBytes);
  uint8_t* at = out.data();
  for (const auto& b : m.blocks) {
    at[0] = b.scale_e8m0;
    ggml_nibbles(b.qs, 0, 16, at + 1);
    at += io::kGgmlMxfp4BlockBytes;
  }
  return out;
}

std::vector<uint8_t> ggml_nvfp4_of(const quant::Nvfp4Matrix& m, const std::string& tensor) {
  constexpr int64_t kSub = io::kGgmlNvfp4Block / quant::kNvfp4BlockSize;  // 4 of qjoule's blocks a GGML one
  if (m.cols % io::kGgmlNvfp4Block != 0)
    fail("tensor '{}': rows of {} weights; GGUF's NVFP4 holds rows of whole blocks of {}", tensor, m.cols,
         io::kGgmlNvfp4Block);
  std::vector<uint8_t> out(m.blocks.size() / kSub * io::kGgmlNvfp4BlockBytes);
  uint8_t* at = out.data();
  for (std::size_t b = 0; b < m.blocks.size(); b += kSub) {
    for (int64_t s = 0; s < kSub; ++s) {
      const auto& sub = m.blocks[b + static_cast<std::size_t>(s)];
      at[s] = sub.scale_e4m3;
      ggml_nibbles(sub.qs, 0, 8, at + kSub + 8 * s);
    }
    at += io::kGgmlNvfp4BlockBytes;
  }
  return out;
}

}  // namespace qjoule::model
