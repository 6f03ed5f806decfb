// FP32 encoder operations. Rows are independent, so each loop is parallel over rows (or over
// batch × head for attention); the inner loops are contiguous so the compiler vectorises them.
#include "qjoule/kernels/encoder_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "bf16.h"
#include "kernels/cpu/onednn_engine.h"

namespace qjoule::kernels {
namespace {

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

void add_layer_norm_f32(float* x, const float* residual, int64_t rows, int64_t cols, const float* gamma,
                        const float* beta, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    layer_norm_row(x + r * cols, residual != nullptr ? residual + r * cols : nullptr, cols, gamma, beta, eps);
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
  constexpr float kInvSqrt2 = 0.70710678118654752440f;
  for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
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

// One (sequence, head) of attention. The keys are transposed first, [head_dim][seq]: the scores of
// one query are then a sum of contiguous rows (vectorized over keys), not 64-long dot products whose
// strict FP32 reduction order the compiler may not reorder. Always inlined into an AVX-512 wrapper
// and a baseline one, so the same loops are compiled for both and chosen at run time.
struct HeadScratch {
  std::vector<float> scores, qs, kt;
};

__attribute__((always_inline)) inline void attention_head(const float* q, const float* k, const float* v,
                                                          int64_t row_stride, const int32_t* m, int64_t seq,
                                                          int64_t head_dim, float scale, float* ctx,
                                                          int64_t ctx_stride, HeadScratch& w) {
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

__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma"))) void attention_head_avx512(
    const float* q, const float* k, const float* v, int64_t row_stride, const int32_t* m, int64_t seq,
    int64_t head_dim, float scale, float* ctx, int64_t ctx_stride, HeadScratch& w) {
  attention_head(q, k, v, row_stride, m, seq, head_dim, scale, ctx, ctx_stride, w);
}

void attention_head_baseline(const float* q, const float* k, const float* v, int64_t row_stride, const int32_t* m,
                             int64_t seq, int64_t head_dim, float scale, float* ctx, int64_t ctx_stride,
                             HeadScratch& w) {
  attention_head(q, k, v, row_stride, m, seq, head_dim, scale, ctx, ctx_stride, w);
}

bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl");
  return has;
}

}  // namespace

void attention_f32(const float* q, const float* k, const float* v, int64_t row_stride, const int32_t* mask,
                   int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, float* ctx) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int64_t ctx_stride = heads * head_dim;
  const auto head = cpu_has_avx512() ? attention_head_avx512 : attention_head_baseline;
#pragma omp parallel
  {
    HeadScratch w{std::vector<float>(static_cast<size_t>(seq)), std::vector<float>(static_cast<size_t>(head_dim)),
                  std::vector<float>(static_cast<size_t>(head_dim * seq))};
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t offset = b * seq * row_stride + h * head_dim;
        head(q + offset, k + offset, v + offset, row_stride, mask + b * seq, seq, head_dim, scale,
             ctx + b * seq * ctx_stride + h * head_dim, ctx_stride, w);
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
            dot += double(q[(b * seq + s) * row_stride + h * head_dim + d]) * k[(b * seq + t) * row_stride + h * head_dim + d];
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
          for (int64_t t = 0; t < seq; ++t) acc += any ? p[t] / sum * v[(b * seq + t) * row_stride + h * head_dim + d] : 0.0;
          ctx[(b * seq + s) * ctx_stride + h * head_dim + d] = static_cast<float>(acc);
        }
      }
    }
  }
}

}  // namespace qjoule::kernels
