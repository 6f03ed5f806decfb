// FP32 decoder operations (RoPE is in rope.cpp). Rows, tokens and heads are independent, so each loop
// is parallel over them; the inner loops are contiguous and vectorized (`omp simd` for reductions).
// The element-wise activations are oneDNN's JIT eltwise (vectorized exp/tanh).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/causal_attention_avx512.h"
#include "kernels/cpu/onednn_engine.h"
#include "qjoule/error.h"
#include "qjoule/kernels/decoder_ops.h"

namespace qjoule::kernels {
namespace {

// In place y = f(x) with oneDNN's eltwise primitive (cached by oneDNN's primitive cache).
void onednn_eltwise(dnnl::algorithm algorithm, float* x, int64_t n, float alpha) {
  if (n <= 0) return;
  using dnnl::memory;
  const memory::desc md({n}, memory::data_type::f32, memory::format_tag::a);
  const dnnl::eltwise_forward::primitive_desc pd(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, algorithm, md, alpha, 0.0f), onednn_cpu_engine());
  memory data(md, onednn_cpu_engine(), x);
  dnnl::eltwise_forward(pd).execute(onednn_cpu_stream(), {{DNNL_ARG_SRC, data}, {DNNL_ARG_DST, data}});
  onednn_cpu_stream().wait();
}

constexpr int64_t kParallelElements = 1 << 15;  // below this, threads cost more than they save

}  // namespace

// ---------------------------------------------------------------------------------------------------
// RMSNorm

namespace {

// One RMSNorm row (or head): y = x / sqrt(mean(x²) + eps) · gamma; y may be x.
inline void rms_norm_row(const float* x, int64_t cols, const float* gamma, float eps, float* y) {
  // Double accumulation: an FP32 sum over 4096 columns (4 SSE lanes of 1024 terms) loses ~1e-6 relative.
  double sum_sq = 0.0;
#pragma omp simd reduction(+ : sum_sq)
  for (int64_t c = 0; c < cols; ++c) sum_sq += double(x[c]) * double(x[c]);
  const float inv = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(cols) + double(eps)));
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c) y[c] = x[c] * inv * gamma[c];
}

}  // namespace

void rms_norm_f32(const float* x, int64_t rows, int64_t cols, const float* gamma, float eps, float* out) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelElements)
  for (int64_t r = 0; r < rows; ++r) rms_norm_row(x + r * cols, cols, gamma, eps, out + r * cols);
}

void rms_norm_f32_ref(const float* x, int64_t rows, int64_t cols, const float* gamma, float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    double sum_sq = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum_sq += double(x[r * cols + c]) * x[r * cols + c];
    const double inv = 1.0 / std::sqrt(sum_sq / double(cols) + double(eps));
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = static_cast<float>(double(x[r * cols + c]) * inv * gamma[c]);
  }
}

void head_rms_norm_f32(float* x, int64_t n, int64_t row_stride, int64_t heads, int64_t head_dim, const float* gamma,
                       float eps) {
#pragma omp parallel for schedule(static) if (n * heads * head_dim > kParallelElements)
  for (int64_t i = 0; i < n * heads; ++i) {
    float* xh = x + (i / heads) * row_stride + (i % heads) * head_dim;
    rms_norm_row(xh, head_dim, gamma, eps, xh);
  }
}

void head_rms_norm_f32_ref(float* x, int64_t n, int64_t row_stride, int64_t heads, int64_t head_dim, const float* gamma,
                           float eps) {
  for (int64_t t = 0; t < n; ++t) rms_norm_f32_ref(x + t * row_stride, heads, head_dim, gamma, eps, x + t * row_stride);
}

// ---------------------------------------------------------------------------------------------------
// Activations

void silu_mul_f32(float* gate, const float* up, int64_t n) {
  onednn_eltwise(dnnl::algorithm::eltwise_swish, gate, n, 1.0f);  // x·sigmoid(1·x)
#pragma omp parallel for simd schedule(static) if (n > kParallelElements)
  for (int64_t i = 0; i < n; ++i) gate[i] *= up[i];
}

void silu_mul_f32_ref(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    gate[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void gelu_tanh_mul_f32(float* gate, const float* up, int64_t n) {
  gelu_tanh_f32(gate, n);
#pragma omp parallel for simd schedule(static) if (n > kParallelElements)
  for (int64_t i = 0; i < n; ++i) gate[i] *= up[i];
}

void gelu_tanh_mul_f32_ref(float* gate, const float* up, int64_t n) {
  gelu_tanh_f32_ref(gate, n);
  for (int64_t i = 0; i < n; ++i) gate[i] = static_cast<float>(double(gate[i]) * up[i]);
}

void gelu_tanh_f32(float* x, int64_t n) { onednn_eltwise(dnnl::algorithm::eltwise_gelu_tanh, x, n, 0.0f); }

void gelu_tanh_f32_ref(float* x, int64_t n) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    x[i] = static_cast<float>(0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v))));
  }
}

// ---------------------------------------------------------------------------------------------------
// Causal attention over a KV cache

namespace {

void check_attention(int64_t past, int64_t n_new, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t window) {
  if (window < 0) fail("causal_attention: window = {}, expected 0 (none) or a positive number of keys", window);
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0)
    fail("causal_attention: heads = {}, kv_heads = {}, expected heads to be a positive multiple of kv_heads", heads,
         kv_heads);
  if (head_dim <= 0 || past < 0 || n_new < 0)
    fail("causal_attention: head_dim = {}, past = {}, n_new = {}, expected head_dim > 0 and past, n_new >= 0", head_dim,
         past, n_new);
}

// One query row of one head against cache rows [0, n_keys): scores = q·k·scale, softmax (max subtracted),
// out = Σ p·v. The baseline build's loops, for CPUs without AVX-512 and heads wider than
// kAttentionAvx512MaxHeadDim (causal_attention_avx512.h has the AVX-512 kernel).
void attend_row_baseline(const float* q, const float* k, const float* v, int64_t kv_stride, int64_t n_keys,
                         int64_t head_dim, float scale, float* scores, float* out) {
  float max_score = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n_keys; ++j) {
    const float* kr = k + j * kv_stride;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t d = 0; d < head_dim; ++d) dot += q[d] * kr[d];
    scores[j] = dot * scale;
    max_score = std::max(max_score, scores[j]);
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < n_keys; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  for (int64_t d = 0; d < head_dim; ++d) out[d] = 0.0f;
  for (int64_t j = 0; j < n_keys; ++j) {
    const float p = scores[j];
    const float* vr = v + j * kv_stride;
#pragma omp simd
    for (int64_t d = 0; d < head_dim; ++d) out[d] += p * vr[d];
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t d = 0; d < head_dim; ++d) out[d] *= inv;
}

}  // namespace

void causal_attention_f32(const float* q, int64_t q_stride, const float* k_cache, const float* v_cache,
                          int64_t kv_stride, int64_t past, int64_t n_new, int64_t heads, int64_t kv_heads,
                          int64_t head_dim, float scale, float* ctx, int64_t window) {
  check_attention(past, n_new, heads, kv_heads, head_dim, window);
  if (n_new == 0) return;
  if (head_dim <= kAttentionAvx512MaxHeadDim && cpu_supports_attention_avx512()) {
    causal_attention_f32_avx512(q, q_stride, k_cache, v_cache, kv_stride, past, n_new, heads, kv_heads, head_dim, scale,
                                ctx, window);
    return;
  }
  const int64_t group = heads / kv_heads;
  const int64_t ctx_stride = heads * head_dim;
#pragma omp parallel if (heads * n_new * (past + n_new) * head_dim > kParallelElements)
  {
    std::vector<float> scores(static_cast<size_t>(past + n_new));
#pragma omp for collapse(2) schedule(static)
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < n_new; ++t) {
        const int64_t first = first_attended_key(past + t, window);
        const int64_t kv_offset = first * kv_stride + (h / group) * head_dim;
        attend_row_baseline(q + t * q_stride + h * head_dim, k_cache + kv_offset, v_cache + kv_offset, kv_stride,
                            past + t + 1 - first, head_dim, scale, scores.data(), ctx + t * ctx_stride + h * head_dim);
      }
    }
  }
}

void causal_attention_f32_ref(const float* q, int64_t q_stride, const float* k_cache, const float* v_cache,
                              int64_t kv_stride, int64_t past, int64_t n_new, int64_t heads, int64_t kv_heads,
                              int64_t head_dim, float scale, float* ctx, int64_t window) {
  check_attention(past, n_new, heads, kv_heads, head_dim, window);
  const int64_t group = heads / kv_heads;
  std::vector<double> p(static_cast<size_t>(past + n_new));
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t g = h / group;
    for (int64_t t = 0; t < n_new; ++t) {
      const int64_t n_keys = past + t + 1;
      // The window: keys j with position − j < window (Hugging Face's sliding-window mask); the rest are masked.
      const int64_t first = window > 0 && n_keys > window ? n_keys - window : 0;
      double max_score = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < first; ++j) p[j] = 0.0;
      for (int64_t j = first; j < n_keys; ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < head_dim; ++d)
          dot += double(q[t * q_stride + h * head_dim + d]) * k_cache[j * kv_stride + g * head_dim + d];
        p[j] = dot * scale;
        max_score = std::max(max_score, p[j]);
      }
      double sum = 0.0;
      for (int64_t j = first; j < n_keys; ++j) {
        p[j] = std::exp(p[j] - max_score);
        sum += p[j];
      }
      for (int64_t d = 0; d < head_dim; ++d) {
        double acc = 0.0;
        for (int64_t j = 0; j < n_keys; ++j) acc += p[j] * v_cache[j * kv_stride + g * head_dim + d];
        ctx[t * heads * head_dim + h * head_dim + d] = static_cast<float>(acc / sum);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Log-softmax

void log_softmax_f32(const float* x, int64_t rows, int64_t cols, float* out) {
#pragma omp parallel for schedule(static) if (rows > 1 && rows * cols > kParallelElements)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = out + r * cols;
    float max_v = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max_v)
    for (int64_t c = 0; c < cols; ++c) max_v = std::max(max_v, xr[c]);
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(xr[c] - max_v);  // float terms in (0, 1], summed in double
    const double lse = double(max_v) + std::log(sum);
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) yr[c] = static_cast<float>(double(xr[c]) - lse);
  }
}

}  // namespace qjoule::kernels
