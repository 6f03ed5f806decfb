// mxfp4 / nvfp4 weight-only decode on AVX2 with 16-bit integer activations ("qjoule:avx2:mxfp4_x16",
// "qjoule:avx2:nvfp4_x16", gemv_x16_avx2.h): E2M1 as 16-bit integers T16 = 2 · T (its values are multiples of 0.5:
// exact, |T16| <= 12), two 32-blocks' codes looked up together (kPairs); the block's scale (fp4_scales.h) over 2
// scales the exact int32 sums, eight blocks' sums in one vector. An MXFP4 block is one 32-block; two NVFP4 blocks of
// 16 make one, each half with its scale. An NVFP4 row whose width is 16 past a multiple of 32 ends in FP32.
#include <array>
#include <cstring>

#include "kernels/cpu/weight_only/avx2/gemv_x16_avx2.h"
#include "kernels/cpu/weight_only/fp4_scales.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"

namespace qjoule::kernels::detail {
namespace {

constexpr float kE2M1TableScale = 2.0f;

QJOULE_TARGET_AVX2 avx2::WordTable e2m1_word_table() {
  int16_t words[16];
  for (int c = 0; c < 16; ++c) words[c] = static_cast<int16_t>(quant::kE2M1Table[c] * kE2M1TableScale);
  return avx2::word_table(words);
}

// An NVFP4 pair of 32-blocks (four blocks of 16: 36 bytes at p, each a scale byte and 8 code bytes) as pair_words
// takes its codes, [c0 c1 | c2 c3], from two overlapping loads (no byte past p + 36); head keeps the first, whose
// bytes 0, 9 | 2, 11 are the four scales.
QJOULE_TARGET_AVX2 inline __m256i nvfp4_pair_codes(const uint8_t* p, __m256i& head) {
  head = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i tail = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 4));
  const __m256i from_head = _mm256_setr_epi8(1, 2, 3, 4, 5, 6, 7, 8, -1, -1, -1, -1, -1, -1, -1, -1,  // c0 | c2
                                             3, 4, 5, 6, 7, 8, 9, 10, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i from_tail = _mm256_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, 6, 7, 8, 9, 10, 11, 12, 13,  // c1 | c3
                                             -1, -1, -1, -1, -1, -1, -1, -1, 8, 9, 10, 11, 12, 13, 14, 15);
  return _mm256_or_si256(_mm256_shuffle_epi8(head, from_head), _mm256_shuffle_epi8(tail, from_tail));
}

// Two pairs' eight E4M3 scale bytes (the heads of nvfp4_pair_codes) in the quad's lane order, blocks 0, 1, 4, 5, 2,
// 3, 6, 7, times k: each byte c as the FP16 with its sign, exponent and mantissa bits (c's bits 0..6 at 7..13: E4M3's
// value / 2^8 exactly, subnormals included), converted by vcvtph2ps. E4M3's NaN (0x7F, 0xFF) would read as ±480:
// a matrix with one is refused at load (make_linear_nvfp4_packed); quantization makes none.
QJOULE_TARGET_AVX2 inline __m256 nvfp4_quad_scales(__m256i head_p, __m256i head_q, __m256 k) {
  const __m256i from_p = _mm256_setr_epi8(-1, 0, -1, 9, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,    // s0 s1
                                          -1, 2, -1, 11, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);  // s2 s3
  const __m256i from_q = _mm256_setr_epi8(-1, -1, -1, -1, -1, 0, -1, 9, -1, -1, -1, -1, -1, -1, -1, -1,    // s4 s5
                                          -1, -1, -1, -1, -1, 2, -1, 11, -1, -1, -1, -1, -1, -1, -1, -1);  // s6 s7
  const __m256i words = _mm256_or_si256(_mm256_shuffle_epi8(head_p, from_p), _mm256_shuffle_epi8(head_q, from_q));
  const __m128i c8 = _mm256_castsi256_si128(_mm256_permute4x64_epi64(words, 0x08));  // c << 8, lanes' low halves
  const __m128i half = _mm_or_si128(_mm_and_si128(c8, _mm_set1_epi16(static_cast<int16_t>(0x8000))),
                                    _mm_and_si128(_mm_srli_epi16(c8, 1), _mm_set1_epi16(0x3F80)));
  return _mm256_mul_ps(_mm256_cvtph_ps(half), k);
}

template <class Packed>
struct Fp4X16Decoder {
  using Block = std::remove_cv_t<std::remove_reference_t<decltype(*std::declval<Packed>().blocks.data())>>;
  static constexpr int G = Block::kSize;
  // Whole pairs of 32-blocks as accumulate_pairs has them; a last odd 32-block alone.
  static constexpr bool kHalfScales = G == 16, kWholeBlockSums = false, kZeroPoints = false, kPairs = true;
  const Packed& w;
  avx2::WordTable table;
  std::array<float, 256> word_scales;  // what a word of a block with scale byte c is worth: s(c) · s_t / 2
  int64_t rows() const { return w.rows; }
  int64_t blocks32() const { return w.padded_cols() / 32; }
  int64_t tail() const { return w.padded_cols() % 32; }
  static int element(int j) { return avx2::table_element(j); }
  struct Row {
    Fp4RowCursor<Block> cursor;
    const avx2::WordTable& table;
    const float* word_scales;
    int64_t tail_start;  // 32 · blocks32()
    QJOULE_TARGET_AVX2 void block(int64_t b, __m256i& lo, __m256i& hi) const {
      __m128i bytes;
      if constexpr (G == 32) {
        bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cursor.blocks[b].qs));
      } else {
        long long q[2];
        std::memcpy(&q[0], cursor.blocks[2 * b].qs, 8);
        std::memcpy(&q[1], cursor.blocks[2 * b + 1].qs, 8);
        bytes = _mm_set_epi64x(q[1], q[0]);
      }
      avx2::table_words(bytes, table, lo, hi);
    }
    // 32-blocks b and b + 1 (A, B; NVFP4: four blocks of 16), their 32 code bytes in one vector, against q (the
    // pair's 64 values): first = A's elements 0..15 | B's (NVFP4: [A0 | B0]), second = 16..31 (NVFP4: [A1 | B1]),
    // each lane the sum of four products.
    QJOULE_TARGET_AVX2 void pair_sums(int64_t b, const int16_t* q, __m256i& first, __m256i& second) const {
      __m256i codes;
      if constexpr (G == 32) {
        codes = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(cursor.blocks[b + 1].qs),
                                    reinterpret_cast<const __m128i*>(cursor.blocks[b].qs));
      } else {
        __m256i head;  // the scales: block_scale() reads them
        codes = nvfp4_pair_codes(reinterpret_cast<const uint8_t*>(cursor.blocks + 2 * b), head);
      }
      __m256i words[4];
      avx2::pair_words(codes, table, words);
      avx2::pair_sums(words, q, first, second);
    }
    // MXFP4: four pairs' eight blocks summed into one vector by three hadds (|2·E2M1 · q| · 32 < 2^24, exact), lanes
    // blocks b + {0, 2, 4, 6, 1, 3, 5, 7}; a last pair the same with all but lanes 0 and 4 zero.
    template <int MR>
    QJOULE_TARGET_AVX2 int64_t accumulate_mxfp4_pairs(const int16_t* q, const float* s, int64_t nb32,
                                                      __m256 (&acc)[MR]) const {
      const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
      int64_t b = 0;
      for (; b + 8 <= nb32; b += 8) {
        const __m256 d = _mm256_setr_ps(block_scale(b), block_scale(b + 2), block_scale(b + 4), block_scale(b + 6),
                                        block_scale(b + 1), block_scale(b + 3), block_scale(b + 5), block_scale(b + 7));
        for (int i = 0; i < MR; ++i) {
          const int16_t* qb = q + i * 32 * nb32 + 32 * b;
          __m256i u[4];
          for (int k = 0; k < 4; ++k) {
            __m256i low_half, high_half;
            pair_sums(b + 2 * k, qb + 64 * k, low_half, high_half);
            u[k] = _mm256_add_epi32(low_half, high_half);  // [A | B], four lanes each
          }
          const __m256i sums = _mm256_hadd_epi32(_mm256_hadd_epi32(u[0], u[1]), _mm256_hadd_epi32(u[2], u[3]));
          const __m256 sb = _mm256_permutevar8x32_ps(_mm256_loadu_ps(s + i * nb32 + b), order);
          acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(d, sb), acc[i]);
        }
      }
      for (; b + 2 <= nb32; b += 2) {
        const __m256 d = _mm256_setr_ps(block_scale(b), 0.0f, 0.0f, 0.0f, block_scale(b + 1), 0.0f, 0.0f, 0.0f);
        for (int i = 0; i < MR; ++i) {
          __m256i low_half, high_half;
          pair_sums(b, q + i * 32 * nb32 + 32 * b, low_half, high_half);
          const __m256i zero = _mm256_setzero_si256();
          const __m256i sums = _mm256_hadd_epi32(_mm256_hadd_epi32(_mm256_add_epi32(low_half, high_half), zero), zero);
          const float sa = s[i * nb32 + b], sb = s[i * nb32 + b + 1];
          const __m256 s8 = _mm256_setr_ps(sa, 0.0f, 0.0f, 0.0f, sb, 0.0f, 0.0f, 0.0f);
          acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(d, s8), acc[i]);
        }
      }
      return b;
    }
    // NVFP4: two pairs' eight blocks of 16 summed into one vector by three hadds (a lane's 16 products
    // |2·E2M1 · q| <= 16 · 12 · 32767 < 2^23, exact), their lanes blocks 2b + {0, 1, 4, 5, 2, 3, 6, 7}; a last
    // pair the same with lanes 2, 3, 6 and 7 zero.
    template <int MR>
    QJOULE_TARGET_AVX2 int64_t accumulate_nvfp4_pairs(const int16_t* q, const float* s, int64_t nb32,
                                                      __m256 (&acc)[MR]) const {
      const __m256i order = _mm256_setr_epi32(0, 0, 2, 2, 1, 1, 3, 3);  // the 32-blocks of the lanes
      // E4M3 / 2^8 (nvfp4_quad_scales) · 2^8 · s_t / 2: block_scale()'s values (one rounding, of the product by s_t)
      const __m256 k = _mm256_set1_ps(cursor.tensor_scale * (256.0f / kE2M1TableScale));
      int64_t b = 0;
      for (; b + 4 <= nb32; b += 4) {
        const uint8_t* p = reinterpret_cast<const uint8_t*>(cursor.blocks + 2 * b);
        __m256i head_p, head_q;
        const __m256i codes_p = nvfp4_pair_codes(p, head_p), codes_q = nvfp4_pair_codes(p + 36, head_q);
        const __m256 d = nvfp4_quad_scales(head_p, head_q, k);
        for (int i = 0; i < MR; ++i) {
          const int16_t* qb = q + i * 32 * nb32 + 32 * b;
          __m256i t0, t1, t2, t3, words[4];
          avx2::pair_words(codes_p, table, words);
          avx2::pair_sums(words, qb, t0, t1);
          avx2::pair_words(codes_q, table, words);
          avx2::pair_sums(words, qb + 64, t2, t3);
          const __m256i sums = _mm256_hadd_epi32(_mm256_hadd_epi32(t0, t1), _mm256_hadd_epi32(t2, t3));
          const __m256 sb = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(s + i * nb32 + b)), order);
          acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(d, sb), acc[i]);
        }
      }
      if (b + 2 <= nb32) {
        const int64_t i4 = 2 * b;
        const __m256 d = _mm256_setr_ps(block_scale(i4), block_scale(i4 + 1), 0.0f, 0.0f, block_scale(i4 + 2),
                                        block_scale(i4 + 3), 0.0f, 0.0f);
        for (int i = 0; i < MR; ++i) {
          __m256i t0, t1;
          pair_sums(b, q + i * 32 * nb32 + 32 * b, t0, t1);
          const __m256i sums = _mm256_hadd_epi32(_mm256_hadd_epi32(t0, t1), _mm256_setzero_si256());
          const float sa = s[i * nb32 + b], sb = s[i * nb32 + b + 1];
          const __m256 s8 = _mm256_setr_ps(sa, sa, 0.0f, 0.0f, sb, sb, 0.0f, 0.0f);
          acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(d, s8), acc[i]);
        }
        b += 2;
      }
      return b;
    }
    // Whole pairs from block 0 (gemv_x16_avx2.h, kPairs).
    template <int MR>
    QJOULE_TARGET_AVX2 int64_t accumulate_pairs(const int16_t* q, const float* s, int64_t nb32,
                                                __m256 (&acc)[MR]) const {
      if constexpr (G == 32) {
        return accumulate_mxfp4_pairs<MR>(q, s, nb32, acc);
      } else {
        return accumulate_nvfp4_pairs<MR>(q, s, nb32, acc);
      }
    }
    // What an integer word of the format's block i (of G weights) is worth.
    float block_scale(int64_t i) const { return word_scales[fp4_scale_code(cursor.blocks[i])]; }
    float scale(int64_t b) const {  // MXFP4: 32-block b is block b
      static_assert(G == 32, "NVFP4's 32-blocks have two scales: half_scales");
      return block_scale(b);
    }
    void half_scales(int64_t b, float& lo, float& hi) const {  // NVFP4: 32-block b is blocks 2b and 2b + 1
      static_assert(G == 16, "an MXFP4 32-block has one scale");
      lo = block_scale(2 * b);
      hi = block_scale(2 * b + 1);
    }
    static float row_scale() { return 1.0f; }
    float at(int64_t k) const { return cursor.at(tail_start + k); }
  };
  Row row(int64_t o) const { return Row{fp4_row_cursor(w, o), table, word_scales.data(), 32 * blocks32()}; }
};

// The decoder of w, its word scales as Fp4RowCursor::scale_of has them (s(c) · s_t, one rounding) over 2 (exact).
template <class Packed>
Fp4X16Decoder<Packed> fp4_x16_decoder(const Packed& w) {
  Fp4X16Decoder<Packed> dec{w, e2m1_word_table(), {}};
  const float* values = fp4_scale_table(w);
  const float tensor_scale = fp4_tensor_scale(w);
  for (std::size_t c = 0; c < 256; ++c) dec.word_scales[c] = values[c] * tensor_scale * (1.0f / kE2M1TableScale);
  return dec;
}

}  // namespace

template <class Packed>
bool gemv_fp4_x16_avx2(const Packed& w, const float* bias, const float* x, int64_t m, float* y) {
  return avx2::run_gemv_x16(fp4_x16_decoder(w), bias, x, m, y);
}

template <class Packed>
void gemm_fp4_avx2_x16(const Packed& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx2::kX16MaxRows || !gemv_fp4_x16_avx2(w, bias, x, m, y)) gemm_fp4_f32_avx2(w, bias, x, m, y);
}

template bool gemv_fp4_x16_avx2<quant::Mxfp4Matrix>(const quant::Mxfp4Matrix&, const float*, const float*, int64_t,
                                                    float*);
template bool gemv_fp4_x16_avx2<quant::Nvfp4Matrix>(const quant::Nvfp4Matrix&, const float*, const float*, int64_t,
                                                    float*);
template void gemm_fp4_avx2_x16<quant::Mxfp4Matrix>(const quant::Mxfp4Matrix&, const float*, const float*, int64_t,
                                                    float*);
template void gemm_fp4_avx2_x16<quant::Nvfp4Matrix>(const quant::Nvfp4Matrix&, const float*, const float*, int64_t,
                                                    float*);

}  // namespace qjoule::kernels::detail
