// nf4 weights, FP32 compute. The 16-entry table, pre-multiplied by the block's absmax (FP32, or decoded
// from its 8-bit double-quantized code), sits in two registers. decode64 (one NF4 block): 64 codes =
// 32 bytes seen as 8 dword lanes; for s = 0..7 the lanes shifted right by 4s index both table halves
// with vpermps (which reads the low 3 bits) and the code's bit 3, shifted to the sign bit, picks the
// half with vblendvps — 8 weights per 2 vpermps, permuted order (weight_only_avx2.h).
#include "kernels/cpu/weight_only/avx2/weight_only_avx2.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"

namespace qjoule::kernels::detail {
namespace {

QJOULE_TARGET_AVX2 inline void nf4_decode64(const uint8_t* qs, float absmax, __m256 out[8]) {
  const __m256 scale = _mm256_set1_ps(absmax);
  const __m256 table_lo = _mm256_mul_ps(_mm256_loadu_ps(quant::kNf4Table.data()), scale);  // = kNf4Table[c] · absmax
  const __m256 table_hi = _mm256_mul_ps(_mm256_loadu_ps(quant::kNf4Table.data() + 8), scale);
  const __m256i lanes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
  for (int s = 0; s < 8; ++s) {
    const __m256i idx = _mm256_srli_epi32(lanes, 4 * s);        // code of nibble s in bits 0..3
    const __m256i pick = _mm256_slli_epi32(lanes, 28 - 4 * s);  // its bit 3 in bit 31
    out[s] = _mm256_blendv_ps(_mm256_permutevar8x32_ps(table_lo, idx), _mm256_permutevar8x32_ps(table_hi, idx),
                              _mm256_castsi256_ps(pick));
  }
}

QJOULE_TARGET_AVX2 inline float nf4_at(const uint8_t* qs, int64_t i, float absmax) {
  const uint8_t byte = qs[i / 2];
  return quant::kNf4Table[(i % 2 == 0) ? (byte >> 4) : (byte & 0x0F)] * absmax;
}

// padded_cols() is a multiple of 64: decode32 and at() exist for the driver's tails and are never reached.
QJOULE_TARGET_AVX2 inline void nf4_decode32_unused(const uint8_t* qs, int64_t k, float absmax, __m256 out[4]) {
  alignas(32) float v[32];
  for (int i = 0; i < 32; ++i) v[i] = nf4_at(qs, k + i, absmax);
  for (int j = 0; j < 4; ++j) out[j] = _mm256_load_ps(v + 8 * j);
}

struct Nf4Decoder {
  static constexpr bool kPermuted = true;
  const quant::Nf4Matrix& w;
  int64_t rows() const { return w.rows; }
  int64_t cols() const { return w.padded_cols(); }
  struct Row {
    const quant::BlockNf4* blocks;
    QJOULE_TARGET_AVX2 void decode64(int64_t k, __m256 out[8]) const {
      const quant::BlockNf4& b = blocks[k / quant::kNf4BlockSize];
      nf4_decode64(b.qs, b.absmax, out);
    }
    QJOULE_TARGET_AVX2 void decode32(int64_t k, __m256 out[4]) const {
      const quant::BlockNf4& b = blocks[k / quant::kNf4BlockSize];
      nf4_decode32_unused(b.qs, k % quant::kNf4BlockSize, b.absmax, out);
    }
    QJOULE_TARGET_AVX2 float at(int64_t k) const {
      const quant::BlockNf4& b = blocks[k / quant::kNf4BlockSize];
      return nf4_at(b.qs, k % quant::kNf4BlockSize, b.absmax);
    }
  };
  Row row(int64_t o) const { return Row{w.row(o)}; }
};

struct Nf4DqDecoder {
  static constexpr bool kPermuted = true;
  const quant::Nf4DqMatrix& w;
  int64_t rows() const { return w.rows; }
  int64_t cols() const { return w.padded_cols(); }
  struct Row {
    const quant::Nf4DqMatrix& w;
    const quant::BlockNf4Dq* blocks;
    int64_t first_block;  // flattened index of the row's first block
    float absmax(int64_t kb) const { return w.absmax(first_block + kb); }
    QJOULE_TARGET_AVX2 void decode64(int64_t k, __m256 out[8]) const {
      const int64_t kb = k / quant::kNf4BlockSize;
      nf4_decode64(blocks[kb].qs, absmax(kb), out);
    }
    QJOULE_TARGET_AVX2 void decode32(int64_t k, __m256 out[4]) const {
      const int64_t kb = k / quant::kNf4BlockSize;
      nf4_decode32_unused(blocks[kb].qs, k % quant::kNf4BlockSize, absmax(kb), out);
    }
    QJOULE_TARGET_AVX2 float at(int64_t k) const {
      const int64_t kb = k / quant::kNf4BlockSize;
      return nf4_at(blocks[kb].qs, k % quant::kNf4BlockSize, absmax(kb));
    }
  };
  Row row(int64_t o) const { return Row{w, w.row(o), o * w.blocks_per_row()}; }
};

}  // namespace

void gemm_nf4_f32_avx2(const quant::Nf4Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  avx2::run_weight_only_gemm(Nf4Decoder{w}, bias, x, m, y);
}

void gemm_nf4dq_f32_avx2(const quant::Nf4DqMatrix& w, const float* bias, const float* x, int64_t m, float* y) {
  avx2::run_weight_only_gemm(Nf4DqDecoder{w}, bias, x, m, y);
}

}  // namespace qjoule::kernels::detail
