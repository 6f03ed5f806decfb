// AVX-512 decoders of the weight-only formats (layouts: qjoule/quant/formats.h) and their entry points;
// the loops are weight_only_avx512.h's. A 128-weight chunk of a 4-bit row is 64 bytes of nibbles held
// as 16 dword lanes, gathered from 1 (int4 G = 128), 2 (G = 64, nf4) or 4 (G = 32) blocks, with each
// lane's scale (and zero point) beside it.
#include <type_traits>

#include "kernels/cpu/weight_only/avx512/nibble_blocks_avx512.h"
#include "kernels/cpu/weight_only/avx512/weight_only_avx512.h"
#include "kernels/cpu/weight_only/avx512/weight_only_gemv_x16_avx512.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"

namespace qjoule::kernels::detail {
namespace {

template <class Block>
constexpr bool kIsAsym = !std::is_same_v<Block, quant::BlockInt4Sym<Block::kSize>>;

template <class Block>
int zero_point(const Block& b) {
  if constexpr (kIsAsym<Block>) {
    return b.zero;
  } else {
    return quant::kInt4SymZero;
  }
}

template <class Block>
struct Int4Decoder {
  static constexpr bool kNibbles = true;
  static constexpr bool kHasZero = kIsAsym<Block>;
  static constexpr int G = Block::kSize;
  static constexpr int kCount = static_cast<int>(avx512::kChunk) / G;  // blocks per chunk
  const quant::BlockMatrix<Block>& w;
  int64_t rows() const { return w.rows; }
  int64_t cols() const { return w.padded_cols(); }
  // sym: T[u] = u − 8 (the implicit zero folded in); asym: T[u] = u, the zero point applied per lane.
  QJOULE_TARGET_AVX512 __m512 table() const {
    const __m512 u = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return kHasZero ? u : _mm512_sub_ps(u, _mm512_set1_ps(float(quant::kInt4SymZero)));
  }
  struct Row {
    const Block* blocks;
    QJOULE_TARGET_AVX512 void chunk(int64_t c, __m512i& codes, __m512& d, __m512& z) const {
      const Block* b = blocks + c * kCount;
      codes = gather_codes(b);
      float ds[kCount], zs[kCount];
      for (int j = 0; j < kCount; ++j) {
        ds[j] = _cvtsh_ss(b[j].d);
        zs[j] = static_cast<float>(zero_point(b[j]));
      }
      d = per_block_lanes<kCount>(ds);
      z = per_block_lanes<kCount>(zs);
    }
    QJOULE_TARGET_AVX512 float at(int64_t k) const {
      const Block& b = blocks[k / G];
      const int i = static_cast<int>(k % G);
      const int u = (i % 2 == 0) ? (b.qs[i / 2] >> 4) : (b.qs[i / 2] & 0x0F);
      return static_cast<float>(u - zero_point(b)) * _cvtsh_ss(b.d);
    }
  };
  Row row(int64_t o) const { return Row{w.row(o)}; }
};

QJOULE_TARGET_AVX512 inline __m512 nf4_table() { return _mm512_loadu_ps(quant::kNf4Table.data()); }

inline float nf4_code_at(const uint8_t* qs, int64_t i) {
  const uint8_t byte = qs[i / 2];
  return quant::kNf4Table[(i % 2 == 0) ? (byte >> 4) : (byte & 0x0F)];
}

struct Nf4Decoder {
  static constexpr bool kNibbles = true;
  static constexpr bool kHasZero = false;
  static constexpr float kX16TableScale = avx512::kNf4X16TableScale;
  const quant::Nf4Matrix& w;
  int64_t rows() const { return w.rows; }
  int64_t cols() const { return w.padded_cols(); }
  QJOULE_TARGET_AVX512 __m512 table() const { return nf4_table(); }
  struct Row {
    const quant::BlockNf4* blocks;
    QJOULE_TARGET_AVX512 void chunk(int64_t c, __m512i& codes, __m512& d, __m512& z) const {
      const quant::BlockNf4* b = blocks + 2 * c;
      codes = gather_codes(b);
      const float a[2] = {b[0].absmax, b[1].absmax};
      d = per_block_lanes<2>(a);
      z = _mm512_setzero_ps();
    }
    QJOULE_TARGET_AVX512 float at(int64_t k) const {
      const quant::BlockNf4& b = blocks[k / quant::kNf4BlockSize];
      return nf4_code_at(b.qs, k % quant::kNf4BlockSize) * b.absmax;
    }
  };
  Row row(int64_t o) const { return Row{w.row(o)}; }
};

struct Nf4DqDecoder {
  static constexpr bool kNibbles = true;
  static constexpr bool kHasZero = false;
  static constexpr float kX16TableScale = avx512::kNf4X16TableScale;
  const quant::Nf4DqMatrix& w;
  int64_t rows() const { return w.rows; }
  int64_t cols() const { return w.padded_cols(); }
  QJOULE_TARGET_AVX512 __m512 table() const { return nf4_table(); }
  struct Row {
    const quant::Nf4DqMatrix& w;
    const quant::BlockNf4Dq* blocks;
    int64_t first_block;  // flattened index of the row's first block
    QJOULE_TARGET_AVX512 void chunk(int64_t c, __m512i& codes, __m512& d, __m512& z) const {
      codes = gather_codes(blocks + 2 * c);
      const float a[2] = {w.absmax(first_block + 2 * c), w.absmax(first_block + 2 * c + 1)};
      d = per_block_lanes<2>(a);
      z = _mm512_setzero_ps();
    }
    float at(int64_t k) const {
      const int64_t kb = k / quant::kNf4BlockSize;
      return nf4_code_at(blocks[kb].qs, k % quant::kNf4BlockSize) * w.absmax(first_block + kb);
    }
  };
  Row row(int64_t o) const { return Row{w, w.row(o), o * w.blocks_per_row()}; }
};

struct W8Decoder {
  static constexpr bool kNibbles = false;
  const quant::Int8Matrix& w;
  int64_t rows() const { return w.rows; }
  int64_t cols() const { return w.cols; }
  struct Row {
    const int8_t* q;
    float s;
    QJOULE_TARGET_AVX512 __m512i load64(int64_t k) const { return _mm512_loadu_si512(q + k); }
    QJOULE_TARGET_AVX512 __m512 load16(int64_t k) const {
      return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + k))));
    }
    QJOULE_TARGET_AVX512 __m512 load_masked(int64_t k, __mmask16 mask) const {
      return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask, q + k)));
    }
    float scale() const { return s; }
    float at(int64_t k) const { return static_cast<float>(q[k]) * s; }
  };
  Row row(int64_t o) const { return Row{w.q.data() + o * w.cols, w.scales[static_cast<size_t>(o)]}; }
};

}  // namespace

template <class Block>
void gemm_int4_avx512(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y) {
  avx512::run_gemm<false>(Int4Decoder<Block>{w}, bias, x, m, y, [&] { gemm_int4_f32_avx2<Block>(w, bias, x, m, y); });
}
template <class Block>
void gemm_int4_avx512_bf16(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y) {
  avx512::run_gemm<true>(Int4Decoder<Block>{w}, bias, x, m, y, [] {});
}

template <class Block>
void gemm_int4_avx512_vnni(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx512::kGemvMaxRows || !gemv_int4_x16_avx512_vnni(w, bias, x, m, y)) gemm_int4_avx512(w, bias, x, m, y);
}
template <class Block>
void gemm_int4_avx512_bf16_vnni(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m,
                                float* y) {
  if (m > avx512::kGemvMaxRows || !gemv_int4_x16_avx512_vnni(w, bias, x, m, y)) {
    gemm_int4_avx512_bf16(w, bias, x, m, y);
  }
}

void gemm_nf4_avx512(const quant::Nf4Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  avx512::run_gemm<false>(Nf4Decoder{w}, bias, x, m, y, [&] { gemm_nf4_f32_avx2(w, bias, x, m, y); });
}
void gemm_nf4_avx512_bf16(const quant::Nf4Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  avx512::run_gemm<true>(Nf4Decoder{w}, bias, x, m, y, [] {});
}

void gemm_nf4_avx512_vnni(const quant::Nf4Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx512::kGemvMaxRows || !avx512::run_gemv_x16(Nf4Decoder{w}, bias, x, m, y))
    gemm_nf4_avx512(w, bias, x, m, y);
}
void gemm_nf4_avx512_bf16_vnni(const quant::Nf4Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx512::kGemvMaxRows || !avx512::run_gemv_x16(Nf4Decoder{w}, bias, x, m, y)) {
    gemm_nf4_avx512_bf16(w, bias, x, m, y);
  }
}

void gemm_nf4dq_avx512(const quant::Nf4DqMatrix& w, const float* bias, const float* x, int64_t m, float* y) {
  avx512::run_gemm<false>(Nf4DqDecoder{w}, bias, x, m, y, [&] { gemm_nf4dq_f32_avx2(w, bias, x, m, y); });
}
void gemm_nf4dq_avx512_bf16(const quant::Nf4DqMatrix& w, const float* bias, const float* x, int64_t m, float* y) {
  avx512::run_gemm<true>(Nf4DqDecoder{w}, bias, x, m, y, [] {});
}

void gemm_nf4dq_avx512_vnni(const quant::Nf4DqMatrix& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx512::kGemvMaxRows || !avx512::run_gemv_x16(Nf4DqDecoder{w}, bias, x, m, y)) {
    gemm_nf4dq_avx512(w, bias, x, m, y);
  }
}
void gemm_nf4dq_avx512_bf16_vnni(const quant::Nf4DqMatrix& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx512::kGemvMaxRows || !avx512::run_gemv_x16(Nf4DqDecoder{w}, bias, x, m, y)) {
    gemm_nf4dq_avx512_bf16(w, bias, x, m, y);
  }
}

void gemm_w8_avx512(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  avx512::run_gemm<false>(W8Decoder{w}, bias, x, m, y, [&] { gemm_w8_f32_avx2(w, bias, x, m, y); });
}
void gemm_w8_avx512_bf16(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  avx512::run_gemm<true>(W8Decoder{w}, bias, x, m, y, [] {});
}

#define QJOULE_INT4_AVX512(BLOCK)                                                                                   \
  template void gemm_int4_avx512<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*, int64_t,      \
                                        float*);                                                                    \
  template void gemm_int4_avx512_bf16<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*, int64_t, \
                                             float*);                                                               \
  template void gemm_int4_avx512_vnni<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*, int64_t, \
                                             float*);                                                               \
  template void gemm_int4_avx512_bf16_vnni<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*,     \
                                                  int64_t, float*);
QJOULE_INT4_AVX512(quant::BlockInt4Sym<32>)
QJOULE_INT4_AVX512(quant::BlockInt4Sym<64>)
QJOULE_INT4_AVX512(quant::BlockInt4Sym<128>)
QJOULE_INT4_AVX512(quant::BlockInt4Asym<32>)
QJOULE_INT4_AVX512(quant::BlockInt4Asym<64>)
QJOULE_INT4_AVX512(quant::BlockInt4Asym<128>)
#undef QJOULE_INT4_AVX512

}  // namespace qjoule::kernels::detail
