// FP32 encoder operations. Rows are independent, so each loop is parallel over rows (or over
// batch × head for attention). LayerNorm, exp and attention have AVX-512 and AVX2 paths (one source,
// encoder_ops_simd.inc, compiled twice with function target attributes) chosen at run time, and a
// portable scalar path.
#include "qjoule/kernels/encoder_ops.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "bf16.h"
#include "kernels/cpu/onednn_engine.h"
#include "qjoule/error.h"

namespace qjoule::kernels {
namespace {

// Cephes expf: exp(x) = 2^n · p(r), n = round(x·log2 e), r = x − n·ln 2 (ln 2 in two parts).
constexpr float kExpLo = -87.3365447505531f;  // below: the result would be under FLT_MIN, flushed to 0
constexpr float kExpHi = 88.7228391116729f;   // above: +Inf
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kExpP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                            4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

namespace avx512 {
#define QJOULE_SIMD_TARGET __attribute__((target("avx512f,avx2,fma")))
#define QJOULE_SIMD_INLINE __attribute__((always_inline, target("avx512f,avx2,fma"))) static inline
struct V {
  using T = __m512;
  static constexpr int W = 16;
  static constexpr int kRows = 4, kCols = 4;  // attention block: 4 queries × 64 keys (or channels)
  QJOULE_SIMD_INLINE T load(const float* p) { return _mm512_loadu_ps(p); }
  QJOULE_SIMD_INLINE void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  QJOULE_SIMD_INLINE T set1(float x) { return _mm512_set1_ps(x); }
  QJOULE_SIMD_INLINE T zero() { return _mm512_setzero_ps(); }
  QJOULE_SIMD_INLINE T add(T a, T b) { return _mm512_add_ps(a, b); }
  QJOULE_SIMD_INLINE T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  QJOULE_SIMD_INLINE T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  // GCC 12's unmasked forms of max, min, roundscale, scalef and extract (and castps512_ps256, built on
  // it) start from an "undefined" register that -Wmaybe-uninitialized flags; the all-lanes masked
  // forms are the same instructions.
  static constexpr __mmask16 kAll = 0xffff;
  QJOULE_SIMD_INLINE T max(T a, T b) { return _mm512_maskz_max_ps(kAll, a, b); }
  QJOULE_SIMD_INLINE T min(T a, T b) { return _mm512_maskz_min_ps(kAll, a, b); }
  QJOULE_SIMD_INLINE T fmadd(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  QJOULE_SIMD_INLINE __m256 low_half(T v) {
    return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(v), 0));
  }
  QJOULE_SIMD_INLINE __m256 high_half(T v) {
    return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xff, _mm512_castps_pd(v), 1));
  }
  QJOULE_SIMD_INLINE float reduce_add(T v) {
    const __m256 h = _mm256_add_ps(low_half(v), high_half(v));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  QJOULE_SIMD_INLINE float reduce_max(T v) {
    const __m256 h = _mm256_max_ps(low_half(v), high_half(v));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
  }
  QJOULE_SIMD_INLINE T exp(T x) {
    const __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpLo), _CMP_LT_OQ);
    const __mmask16 over = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpHi), _CMP_GT_OQ);
    // min/max return their second operand when either is NaN: NaN passes through.
    x = max(_mm512_set1_ps(kExpLo), min(_mm512_set1_ps(kExpHi), x));
    const T n = _mm512_maskz_roundscale_ps(kAll, _mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    T r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
    T p = _mm512_set1_ps(kExpP[0]);
    for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP[i]));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    T y = _mm512_maskz_scalef_ps(kAll, p, n);
    y = _mm512_mask_mov_ps(y, over, _mm512_set1_ps(std::numeric_limits<float>::infinity()));
    return _mm512_mask_mov_ps(y, under, _mm512_setzero_ps());
  }
};
#include "kernels/cpu/encoder_ops_simd.inc"
#undef QJOULE_SIMD_INLINE
#undef QJOULE_SIMD_TARGET
}  // namespace avx512

namespace avx2 {
#define QJOULE_SIMD_TARGET __attribute__((target("avx2,fma")))
#define QJOULE_SIMD_INLINE __attribute__((always_inline, target("avx2,fma"))) static inline
struct V {
  using T = __m256;
  static constexpr int W = 8;
  static constexpr int kRows = 4, kCols = 2;  // attention block: 4 queries × 16 keys (or channels)
  QJOULE_SIMD_INLINE T load(const float* p) { return _mm256_loadu_ps(p); }
  QJOULE_SIMD_INLINE void store(float* p, T v) { _mm256_storeu_ps(p, v); }
  QJOULE_SIMD_INLINE T set1(float x) { return _mm256_set1_ps(x); }
  QJOULE_SIMD_INLINE T zero() { return _mm256_setzero_ps(); }
  QJOULE_SIMD_INLINE T add(T a, T b) { return _mm256_add_ps(a, b); }
  QJOULE_SIMD_INLINE T sub(T a, T b) { return _mm256_sub_ps(a, b); }
  QJOULE_SIMD_INLINE T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  QJOULE_SIMD_INLINE T max(T a, T b) { return _mm256_max_ps(a, b); }
  QJOULE_SIMD_INLINE T fmadd(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  QJOULE_SIMD_INLINE float reduce_add(T v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  QJOULE_SIMD_INLINE float reduce_max(T v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
  }
  QJOULE_SIMD_INLINE T exp(T x) {
    const T under = _mm256_cmp_ps(x, _mm256_set1_ps(kExpLo), _CMP_LT_OQ);
    const T over = _mm256_cmp_ps(x, _mm256_set1_ps(kExpHi), _CMP_GT_OQ);
    x = _mm256_max_ps(_mm256_set1_ps(kExpLo), _mm256_min_ps(_mm256_set1_ps(kExpHi), x));
    const T n =
        _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    T r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
    T p = _mm256_set1_ps(kExpP[0]);
    for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP[i]));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    // 2^n with n in [-126, 128] as 2^h · 2^(n-h), h = n/2, both factors normal FP32 powers of two.
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i h = _mm256_srai_epi32(ni, 1);
    const __m256i bias = _mm256_set1_epi32(127);
    const T s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, bias), 23));
    const T s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, h), bias), 23));
    T y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    y = _mm256_blendv_ps(y, _mm256_set1_ps(std::numeric_limits<float>::infinity()), over);
    return _mm256_andnot_ps(under, y);
  }
};
#include "kernels/cpu/encoder_ops_simd.inc"
#undef QJOULE_SIMD_INLINE
#undef QJOULE_SIMD_TARGET
}  // namespace avx2

bool cpu_has(EncoderOpsIsa isa) {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  static const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
  return isa == EncoderOpsIsa::scalar || (isa == EncoderOpsIsa::avx2 && avx2) ||
         (isa == EncoderOpsIsa::avx512 && avx512);
}

// -1: the best the CPU has; otherwise a forced EncoderOpsIsa.
std::atomic<int> g_forced_isa{-1};

void layer_norm_row(float* x, const float* residual, int64_t cols, const float* gamma, const float* beta, float eps) {
  if (residual != nullptr) {
    for (int64_t c = 0; c < cols; ++c) x[c] += residual[c];
  }
  float mean = 0.0f;
  for (int64_t c = 0; c < cols; ++c) mean += x[c];
  mean /= static_cast<float>(cols);
  float var = 0.0f;
  for (int64_t c = 0; c < cols; ++c) {
    const float d = x[c] - mean;
    var += d * d;
  }
  var /= static_cast<float>(cols);
  const float inv = 1.0f / std::sqrt(var + eps);
  for (int64_t c = 0; c < cols; ++c) x[c] = (x[c] - mean) * inv * gamma[c] + beta[c];
}

}  // namespace

EncoderOpsIsa encoder_ops_isa() {
  const int forced = g_forced_isa.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<EncoderOpsIsa>(forced);
  if (cpu_has(EncoderOpsIsa::avx512)) return EncoderOpsIsa::avx512;
  return cpu_has(EncoderOpsIsa::avx2) ? EncoderOpsIsa::avx2 : EncoderOpsIsa::scalar;
}

bool encoder_ops_isa_supported(EncoderOpsIsa isa) { return cpu_has(isa); }

void set_encoder_ops_isa(std::optional<EncoderOpsIsa> isa) {
  if (isa && !cpu_has(*isa)) fail("encoder ops: this CPU cannot run the {} path", encoder_ops_isa_name(*isa));
  g_forced_isa.store(isa ? static_cast<int>(*isa) : -1, std::memory_order_relaxed);
}

std::string_view encoder_ops_isa_name(EncoderOpsIsa isa) {
  switch (isa) {
    case EncoderOpsIsa::avx512: return "avx512";
    case EncoderOpsIsa::avx2: return "avx2";
    default: return "scalar";
  }
}

void exp_f32(float* x, int64_t n) {
  if (n <= 0) return;
  const EncoderOpsIsa isa = encoder_ops_isa();
  if (isa == EncoderOpsIsa::avx512) {
    avx512::exp_rows(x, n);
  } else if (isa == EncoderOpsIsa::avx2) {
    avx2::exp_rows(x, n);
  } else {
    exp_f32_ref(x, n);
  }
}

void exp_f32_ref(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i]);
}

void add_layer_norm_f32(float* x, const float* residual, int64_t rows, int64_t cols, const float* gamma,
                        const float* beta, float eps) {
  const EncoderOpsIsa isa = encoder_ops_isa();
  const auto row_fn = isa == EncoderOpsIsa::avx512 ? avx512::layer_norm_row
                      : isa == EncoderOpsIsa::avx2 ? avx2::layer_norm_row
                                                   : layer_norm_row;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    row_fn(x + r * cols, residual != nullptr ? residual + r * cols : nullptr, cols, gamma, beta, eps);
  }
}

void add_layer_norm_f32_ref(float* x, const float* residual, int64_t rows, int64_t cols, const float* gamma,
                            const float* beta, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * cols;
    double mean = 0.0, var = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      if (residual != nullptr) row[c] += residual[r * cols + c];
      mean += row[c];
    }
    mean /= double(cols);
    for (int64_t c = 0; c < cols; ++c) var += (row[c] - mean) * (row[c] - mean);
    var /= double(cols);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t c = 0; c < cols; ++c) row[c] = static_cast<float>((row[c] - mean) * inv * gamma[c] + beta[c]);
  }
}

void gelu_erf_f32(float* x, int64_t n) {
  // oneDNN's JIT eltwise (vectorized erf); libm's erff is scalar and was 12% of an int8 forward.
  if (n <= 0) return;
  using dnnl::memory;
  const memory::desc md({n}, memory::data_type::f32, memory::format_tag::a);
  const dnnl::eltwise_forward::primitive_desc pd(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_gelu_erf, md, 0.0f,
                                  0.0f),
      onednn_cpu_engine());
  memory data(md, onednn_cpu_engine(), x);
  dnnl::eltwise_forward(pd).execute(onednn_cpu_stream(), {{DNNL_ARG_SRC, data}, {DNNL_ARG_DST, data}});
  onednn_cpu_stream().wait();
}

void gelu_erf_f32_ref(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = element::gelu_erf(x[i]);
}

void relu_f32(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::max(x[i], 0.0f);
}

void round_to_bf16_f32(float* x, int64_t n) {
  // Integer form of f32_to_bf16_bits (NaN kept quiet), written so the compiler vectorizes it.
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &x[i], sizeof u);
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    u = nan ? (u | 0x00400000u) & 0xffff0000u : rounded;
    std::memcpy(&x[i], &u, sizeof u);
  }
}

void round_to_bf16_f32_ref(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = round_to_bf16(x[i]);
}

void tanh_f32(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
}

namespace {

// One (sequence, head) of attention, the scalar path (the vector paths are in encoder_ops_simd.inc).
// The keys are transposed first, [head_dim][seq]: the scores of one query are then a sum of
// contiguous rows (which the compiler vectorizes for the baseline ISA), not 64-long dot products whose
// strict FP32 reduction order it may not reorder.
struct HeadScratch {
  std::vector<float> scores, qs, kt;
};

void attention_head(const float* q, const float* k, const float* v, int64_t row_stride, const int32_t* m, int64_t seq,
                    int64_t head_dim, float scale, float* ctx, int64_t ctx_stride, HeadScratch& w) {
  float* scores = w.scores.data();
  float* qs = w.qs.data();
  float* kt = w.kt.data();
  for (int64_t t = 0; t < seq; ++t) {
    const float* krow = k + t * row_stride;
    for (int64_t d = 0; d < head_dim; ++d) kt[d * seq + t] = krow[d];
  }
  for (int64_t s = 0; s < seq; ++s) {
    const float* qrow = q + s * row_stride;
    for (int64_t d = 0; d < head_dim; ++d) qs[d] = qrow[d] * scale;
    for (int64_t t = 0; t < seq; ++t) scores[t] = 0.0f;
    for (int64_t d = 0; d < head_dim; ++d) {
      const float qd = qs[d];
      const float* krow_t = kt + d * seq;
      for (int64_t t = 0; t < seq; ++t) scores[t] += qd * krow_t[t];
    }
    float max_score = -std::numeric_limits<float>::infinity();
    for (int64_t t = 0; t < seq; ++t) {
      if (m[t] == 0) {
        scores[t] = -std::numeric_limits<float>::infinity();
      } else {
        max_score = std::max(max_score, scores[t]);
      }
    }
    float* out = ctx + s * ctx_stride;
    for (int64_t d = 0; d < head_dim; ++d) out[d] = 0.0f;
    if (max_score == -std::numeric_limits<float>::infinity()) continue;  // every key masked
    float sum = 0.0f;
    for (int64_t t = 0; t < seq; ++t) {
      scores[t] = m[t] == 0 ? 0.0f : std::exp(scores[t] - max_score);
      sum += scores[t];
    }
    const float inv = 1.0f / sum;
    for (int64_t t = 0; t < seq; ++t) {
      if (scores[t] == 0.0f) continue;
      const float p = scores[t] * inv;
      const float* vrow = v + t * row_stride;
      for (int64_t d = 0; d < head_dim; ++d) out[d] += p * vrow[d];
    }
  }
}

}  // namespace

void attention_f32(const float* q, const float* k, const float* v, int64_t row_stride, const int32_t* mask,
                   int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, float* ctx) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int64_t ctx_stride = heads * head_dim;
  const EncoderOpsIsa isa = encoder_ops_isa();
  if (isa == EncoderOpsIsa::scalar) {
#pragma omp parallel
    {
      HeadScratch w{std::vector<float>(static_cast<size_t>(seq)), std::vector<float>(static_cast<size_t>(head_dim)),
                    std::vector<float>(static_cast<size_t>(head_dim * seq))};
#pragma omp for collapse(2) schedule(static)
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t offset = b * seq * row_stride + h * head_dim;
          attention_head(q + offset, k + offset, v + offset, row_stride, mask + b * seq, seq, head_dim, scale,
                         ctx + b * seq * ctx_stride + h * head_dim, ctx_stride, w);
        }
      }
    }
    return;
  }
  // Vector paths. Per sequence, keys after the last real one are masked: skip them; a sequence with no
  // real key at all gets zero context, as in the scalar path.
  std::vector<int64_t> keys(static_cast<size_t>(batch), 0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t)
      if (mask[b * seq + t] != 0) keys[static_cast<size_t>(b)] = t + 1;
  constexpr int64_t lanes = avx512::V::W, rows = avx512::V::kRows;  // buffers sized for either path
  static_assert(lanes % avx2::V::W == 0 && avx2::V::kRows == rows);
  const int64_t seq_pad = (seq + lanes - 1) / lanes * lanes, rows_pad = (seq + rows - 1) / rows * rows;
  const int64_t hd_pad = (head_dim + lanes - 1) / lanes * lanes;
#pragma omp parallel
  {
    std::vector<float> buffer(static_cast<size_t>(rows_pad * head_dim + head_dim * seq_pad + seq * hd_pad + seq_pad +
                                                  rows * seq_pad + rows * hd_pad));
    float* p = buffer.data();
    const auto take = [&p](int64_t n) {
      float* out = p;
      p += n;
      return out;
    };
    avx512::HeadBuffers w512{};
    w512.qs = take(rows_pad * head_dim);
    w512.kt = take(head_dim * seq_pad);
    w512.vp = take(seq * hd_pad);
    w512.bias = take(seq_pad);
    w512.scores = take(rows * seq_pad);
    w512.out = take(rows * hd_pad);
    const avx2::HeadBuffers w256{w512.qs, w512.kt, w512.vp, w512.bias, w512.scores, w512.out};
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t offset = b * seq * row_stride + h * head_dim;
        float* out = ctx + b * seq * ctx_stride + h * head_dim;
        const int64_t n_keys = keys[static_cast<size_t>(b)];
        if (n_keys == 0) {
          for (int64_t s = 0; s < seq; ++s) std::fill_n(out + s * ctx_stride, head_dim, 0.0f);
        } else if (isa == EncoderOpsIsa::avx512) {
          avx512::attention_head(q + offset, k + offset, v + offset, row_stride, mask + b * seq, seq, n_keys, head_dim,
                                 scale, out, ctx_stride, w512);
        } else {
          avx2::attention_head(q + offset, k + offset, v + offset, row_stride, mask + b * seq, seq, n_keys, head_dim,
                               scale, out, ctx_stride, w256);
        }
      }
    }
  }
}

void attention_f32_ref(const float* q, const float* k, const float* v, int64_t row_stride, const int32_t* mask,
                       int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, float* ctx) {
  const int64_t ctx_stride = heads * head_dim;
  std::vector<double> p(static_cast<size_t>(seq));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t s = 0; s < seq; ++s) {
        double max_score = -1e300;
        bool any = false;
        for (int64_t t = 0; t < seq; ++t) {
          if (mask[b * seq + t] == 0) continue;
          double dot = 0.0;
          for (int64_t d = 0; d < head_dim; ++d)
            dot += double(q[(b * seq + s) * row_stride + h * head_dim + d]) *
                   k[(b * seq + t) * row_stride + h * head_dim + d];
          p[t] = dot / std::sqrt(double(head_dim));
          max_score = std::max(max_score, p[t]);
          any = true;
        }
        double sum = 0.0;
        for (int64_t t = 0; t < seq; ++t) {
          p[t] = mask[b * seq + t] == 0 ? 0.0 : std::exp(p[t] - max_score);
          sum += p[t];
        }
        for (int64_t d = 0; d < head_dim; ++d) {
          double acc = 0.0;
          for (int64_t t = 0; t < seq; ++t)
            acc += any ? p[t] / sum * v[(b * seq + t) * row_stride + h * head_dim + d] : 0.0;
          ctx[(b * seq + s) * ctx_stride + h * head_dim + d] = static_cast<float>(acc);
        }
      }
    }
  }
}

}  // namespace qjoule::kernels
