#include "kernels/cpu/causal_attention_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <utility>
#include <vector>

#define QJOULE_TARGET_ATTENTION __attribute__((target("avx512f,avx512bw,avx512vl,fma")))

namespace qjoule::kernels {
namespace {

constexpr int64_t kParallelElements = 1 << 15;  // as the other decoder operations (decoder_ops.cpp)
constexpr int kKeysAtOnce = 16;                 // one register of scores

// e^x: n = round(x·log2 e), r = x − n·ln 2 (in two parts), e^r by Cephes' expf polynomial (within 1 ulp on
// [−ln2/2, ln2/2]), times 2^n by scalef. x is clamped to [−87.3, 88.7]: e^−87.3 = 1.2e-38 stands for the
// scores whose exp underflows (against a sum >= 1). NaN passes through both clamps.
QJOULE_TARGET_ATTENTION inline __m512 exp_ps(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(88.7f), x);  // min / max return the second operand when one is NaN
  x = _mm512_max_ps(_mm512_set1_ps(-87.33654f), x);
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(y, n);
}

// Lanes i ^ S of y.
template <int S>
QJOULE_TARGET_ATTENTION inline __m512 swap_lanes(__m512 y) {
  if constexpr (S == 1) return _mm512_permute_ps(y, 0xB1);
  if constexpr (S == 2) return _mm512_permute_ps(y, 0x4E);
  if constexpr (S == 4) return _mm512_shuffle_f32x4(y, y, 0xB1);
  return _mm512_shuffle_f32x4(y, y, 0x4E);
}

// Lane i: a[i] + a[i ^ S] where bit S of i is clear, b[i] + b[i ^ S] where it is set.
template <int S>
QJOULE_TARGET_ATTENTION inline __m512 combine(__m512 a, __m512 b) {
  constexpr __mmask16 kSet = S == 1 ? 0xAAAA : S == 2 ? 0xCCCC : S == 4 ? 0xF0F0 : 0xFF00;
  return _mm512_add_ps(_mm512_mask_blend_ps(kSet, a, b), swap_lanes<S>(_mm512_mask_blend_ps(kSet, b, a)));
}

// Lane k: the sum of acc[k]'s 16 lanes, as one transposition (15 combines). Every lane's sum is the same tree
// over its 16 lanes, whichever k it is, so a key's score does not depend on its place in the block.
QJOULE_TARGET_ATTENTION inline __m512 sum_each(const __m512 (&acc)[kKeysAtOnce]) {
  __m512 c[8], d[4];
  for (int m = 0; m < 8; ++m) c[m] = combine<1>(acc[2 * m], acc[2 * m + 1]);
  for (int m = 0; m < 4; ++m) d[m] = combine<2>(c[2 * m], c[2 * m + 1]);
  return combine<8>(combine<4>(d[0], d[1]), combine<4>(d[2], d[3]));
}

struct Dims {
  int64_t head_dim, chunks;  // chunks = ⌈head_dim / 16⌉
  __mmask16 last;            // the last chunk's lanes
  int64_t kv_stride;
};

// Scores q·k·scale of keys [0, nb) (nb <= 16) from k, lanes nb.. zero. Key by key, each row's chunks in turn:
// sixteen rows read side by side alias in the L1 sets at a KV row of 4 KiB (8 KV heads of 128), which made the
// scores 3x slower.
QJOULE_TARGET_ATTENTION inline __m512 scores_block(const float* q, const float* k, int64_t nb, const Dims& d,
                                                   __m512 scale) {
  __m512 acc[kKeysAtOnce];
  const int64_t full = d.last == 0xFFFF ? d.chunks : d.chunks - 1;
#pragma GCC unroll 16
  for (int jj = 0; jj < kKeysAtOnce; ++jj) {
    acc[jj] = _mm512_setzero_ps();
    if (jj >= nb) continue;
    const float* kr = k + jj * d.kv_stride;
    for (int64_t c = 0; c < full; ++c)
      acc[jj] = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16 * c), _mm512_loadu_ps(kr + 16 * c), acc[jj]);
    if (full < d.chunks)
      acc[jj] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(d.last, q + 16 * full),
                                _mm512_maskz_loadu_ps(d.last, kr + 16 * full), acc[jj]);
  }
  return _mm512_mul_ps(sum_each(acc), scale);
}

// One head's softmax weights over n_keys keys into p (room for n_keys rounded up to 16); returns 1 / Σ.
QJOULE_TARGET_ATTENTION float softmax_weights(const float* q, const float* k, int64_t n_keys, const Dims& d,
                                              float scale, float* p) {
  const __m512 vscale = _mm512_set1_ps(scale);
  __m512 vmax = _mm512_set1_ps(-__builtin_inff());
  for (int64_t j0 = 0; j0 < n_keys; j0 += kKeysAtOnce) {
    const int64_t nb = std::min<int64_t>(kKeysAtOnce, n_keys - j0);
    const __m512 s = scores_block(q, k + j0 * d.kv_stride, nb, d, vscale);
    _mm512_storeu_ps(p + j0, s);
    vmax = _mm512_mask_max_ps(vmax, static_cast<__mmask16>((1u << nb) - 1), vmax, s);
  }
  const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t j0 = 0; j0 < n_keys; j0 += kKeysAtOnce) {
    const int64_t nb = std::min<int64_t>(kKeysAtOnce, n_keys - j0);
    const __m512 e = _mm512_maskz_mov_ps(static_cast<__mmask16>((1u << nb) - 1),
                                         exp_ps(_mm512_sub_ps(_mm512_loadu_ps(p + j0), max)));
    _mm512_storeu_ps(p + j0, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  return 1.0f / _mm512_reduce_add_ps(vsum);
}

// Heads at once in the PV products for C chunks of 16: up to 16 accumulators, at most 4 heads.
template <int C>
constexpr int kHeadsAtOnce = std::clamp(16 / C, 1, 4);

// out[h] = Σ_j p[h][j] · v[j] · inv[h] for nh <= kHeadsAtOnce<C> heads; each V row loaded once for them.
template <int C>
QJOULE_TARGET_ATTENTION void weighted_values(const float* const* p, const float* inv, int nh, const float* v,
                                             int64_t n_keys, const Dims& d, float* const* out) {
  constexpr int H = kHeadsAtOnce<C>;
  __m512 acc[H][C];
  for (auto& row : acc)
    for (auto& a : row) a = _mm512_setzero_ps();
  for (int64_t j = 0; j < n_keys; ++j) {
    const float* vr = v + j * d.kv_stride;
    __m512 pj[H];
    for (int h = 0; h < H; ++h) pj[h] = h < nh ? _mm512_set1_ps(p[h][j]) : _mm512_setzero_ps();
    for (int c = 0; c < C; ++c) {
      const __m512 vc = c + 1 < C ? _mm512_loadu_ps(vr + 16 * c) : _mm512_maskz_loadu_ps(d.last, vr + 16 * c);
      for (int h = 0; h < H; ++h)
        if (h < nh) acc[h][c] = _mm512_fmadd_ps(pj[h], vc, acc[h][c]);
    }
  }
  for (int h = 0; h < nh; ++h) {
    const __m512 scale = _mm512_set1_ps(inv[h]);
    for (int c = 0; c + 1 < C; ++c) _mm512_storeu_ps(out[h] + 16 * c, _mm512_mul_ps(acc[h][c], scale));
    _mm512_mask_storeu_ps(out[h] + 16 * (C - 1), d.last, _mm512_mul_ps(acc[h][C - 1], scale));
  }
}

template <int C>
QJOULE_TARGET_ATTENTION void attend(const float* q, int64_t q_stride, const float* k_cache, const float* v_cache,
                                    int64_t past, int64_t n_new, int64_t heads, int64_t kv_heads, float scale,
                                    float* ctx, int64_t window, const Dims& d) {
  constexpr int H = kHeadsAtOnce<C>;
  const int64_t group = heads / kv_heads, subgroups = (group + H - 1) / H;
  const int64_t tasks = kv_heads * subgroups * n_new, keys_max = past + n_new;
  const int64_t ctx_stride = heads * d.head_dim;
  // Tasks run (KV head, heads of its group) by (token): a thread's share is whole heads over every token,
  // balanced under the causal mask.
#pragma omp parallel for schedule(static) if (heads * n_new * (past + n_new) * d.head_dim > kParallelElements)
  for (int64_t task = 0; task < tasks; ++task) {
    thread_local std::vector<float> weights;
    const int64_t row = (keys_max + kKeysAtOnce - 1) / kKeysAtOnce * kKeysAtOnce;
    if (weights.size() < static_cast<size_t>(H * row)) weights.resize(static_cast<size_t>(H * row));
    const int64_t t = task % n_new, gs = task / n_new, g = gs / subgroups, h0 = g * group + (gs % subgroups) * H;
    const int nh = static_cast<int>(std::min<int64_t>(H, (g + 1) * group - h0));
    const int64_t first = first_attended_key(past + t, window), n_keys = past + t + 1 - first;
    const float* k = k_cache + first * d.kv_stride + g * d.head_dim;
    const float* v = v_cache + first * d.kv_stride + g * d.head_dim;
    const float* p[H] = {};
    float* out[H] = {};
    float inv[H] = {};
    for (int h = 0; h < nh; ++h) {
      float* ph = weights.data() + h * row;
      inv[h] = softmax_weights(q + t * q_stride + (h0 + h) * d.head_dim, k, n_keys, d, scale, ph);
      p[h] = ph;
      out[h] = ctx + t * ctx_stride + (h0 + h) * d.head_dim;
    }
    weighted_values<C>(p, inv, nh, v, n_keys, d, out);
  }
}

template <int... Cs>
void attend_chunks(std::integer_sequence<int, Cs...>, int64_t chunks, const auto&... args) {
  (void)((chunks == Cs + 1 ? (attend<Cs + 1>(args...), true) : false) || ...);
}

}  // namespace

bool cpu_supports_attention_avx512() {
  static const bool has =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return has;
}

void causal_attention_f32_avx512(const float* q, int64_t q_stride, const float* k_cache, const float* v_cache,
                                 int64_t kv_stride, int64_t past, int64_t n_new, int64_t heads, int64_t kv_heads,
                                 int64_t head_dim, float scale, float* ctx, int64_t window) {
  if (n_new == 0) return;
  const int64_t chunks = (head_dim + 15) / 16;
  const int rem = static_cast<int>(head_dim % 16);
  const Dims d{head_dim, chunks, static_cast<__mmask16>(rem == 0 ? 0xFFFF : (1u << rem) - 1), kv_stride};
  attend_chunks(std::make_integer_sequence<int, kAttentionAvx512MaxHeadDim / 16>{}, chunks, q, q_stride, k_cache,
                v_cache, past, n_new, heads, kv_heads, scale, ctx, window, d);
}

QJOULE_TARGET_ATTENTION void exp_ps_avx512_for_test(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const auto mask = static_cast<__mmask16>(n - i >= 16 ? 0xFFFF : (1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, mask, exp_ps(_mm512_maskz_loadu_ps(mask, x + i)));
  }
}

}  // namespace qjoule::kernels
