// Rotary position embeddings: the inverse-frequency table of one model (Hugging Face transformers'
// rope_init_fn for default, linear, llama3 and yarn, computed in double) and its application to q or k.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "qjoule/error.h"
#include "qjoule/kernels/decoder_ops.h"
#include "qjoule/quant/element_math.h"

namespace qjoule::kernels {
namespace {

constexpr const char* kSupportedRopeTypes = "default, linear, llama3, yarn, longrope";

// transformers' _compute_yarn_parameters helpers, for a rotary dimension `dim` (= head_dim).
double yarn_correction_dim(double num_rotations, double dim, double base, double max_positions) {
  return dim * std::log(max_positions / (num_rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(base));
}

double yarn_mscale(double factor) { return factor <= 1.0 ? 1.0 : 0.1 * std::log(factor) + 1.0; }

void check_factor(const RopeScaling& s) {
  if (!(s.factor > 0.0) || !std::isfinite(s.factor))
    fail("rope_scaling type '{}': factor = {}, expected a positive number", s.type, s.factor);
}

void check_original_positions(const RopeScaling& s) {
  if (s.original_max_position_embeddings <= 0)
    fail("rope_scaling type '{}': original_max_position_embeddings = {}, expected a positive number", s.type,
         s.original_max_position_embeddings);
}

void check_table(int64_t n_tokens, int64_t row_stride, int64_t heads, const RopeTable& table) {
  if (table.head_dim <= 0 || table.head_dim % 2 != 0 ||
      static_cast<int64_t>(table.inv_freq.size()) != table.head_dim / 2)
    fail("apply_rope: table has head_dim {} and {} frequencies, expected a positive even head_dim and head_dim/2",
         table.head_dim, table.inv_freq.size());
  if (n_tokens < 0 || heads < 0 || heads * table.head_dim > row_stride)
    fail("apply_rope: {} tokens, {} heads of {} in rows of {}, expected heads·head_dim <= row_stride", n_tokens, heads,
         table.head_dim, row_stride);
}

}  // namespace

RopeTable make_rope_table(int64_t head_dim, double rope_theta, const RopeScaling& scaling, bool long_factors) {
  if (head_dim <= 0 || head_dim % 2 != 0)
    fail("make_rope_table: head_dim = {}, expected a positive even number", head_dim);
  if (!(rope_theta > 1.0) || !std::isfinite(rope_theta))
    fail("make_rope_table: rope_theta = {}, expected a number > 1", rope_theta);
  const int64_t half = head_dim / 2;
  const double dim = static_cast<double>(head_dim);

  // Default: inv_freq[i] = 1 / theta^(2i / head_dim).
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv[i] = 1.0 / std::pow(rope_theta, static_cast<double>(2 * i) / dim);
  double attention_factor = 1.0;

  const RopeScaling& s = scaling;
  if (s.type == "default") {
    // unscaled
  } else if (s.type == "longrope") {
    // Phi-3's LongRoPE: each frequency divided by its own factor, the short ones up to
    // original_max_position_embeddings positions, the long ones beyond; cos and sin times
    // sqrt(1 + ln(factor) / ln(original positions)) whenever factor > 1.
    check_original_positions(s);
    const auto& factors = long_factors ? s.long_factor : s.short_factor;
    if (static_cast<int64_t>(factors.size()) != half)
      fail("rope_scaling type 'longrope': {} has {} values, expected {} (rotary dimension {} / 2)",
           long_factors ? "long_factor" : "short_factor", factors.size(), half, head_dim);
    for (int64_t i = 0; i < half; ++i) {
      if (!(factors[static_cast<size_t>(i)] > 0.0))
        fail("rope_scaling type 'longrope': a factor is {}, expected positive numbers",
             factors[static_cast<size_t>(i)]);
      inv[i] /= factors[static_cast<size_t>(i)];
    }
    attention_factor =
        s.attention_factor != 0.0 ? s.attention_factor
        : s.factor <= 1.0
            ? 1.0
            : std::sqrt(1.0 + std::log(s.factor) / std::log(static_cast<double>(s.original_max_position_embeddings)));
  } else if (s.type == "linear") {
    check_factor(s);
    for (double& f : inv) f /= s.factor;
  } else if (s.type == "llama3") {
    check_factor(s);
    check_original_positions(s);
    if (!(s.low_freq_factor > 0.0) || !(s.high_freq_factor > s.low_freq_factor))
      fail("rope_scaling type 'llama3': low_freq_factor = {}, high_freq_factor = {}, expected 0 < low < high",
           s.low_freq_factor, s.high_freq_factor);
    const double orig = static_cast<double>(s.original_max_position_embeddings);
    const double low_freq_wavelen = orig / s.low_freq_factor;
    const double high_freq_wavelen = orig / s.high_freq_factor;
    for (double& f : inv) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen > low_freq_wavelen) {
        f /= s.factor;
      } else if (wavelen >= high_freq_wavelen) {
        const double smooth = (orig / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }  // else: high frequency, unchanged
    }
  } else if (s.type == "yarn") {
    check_factor(s);
    check_original_positions(s);
    if (!(s.beta_fast > 0.0) || !(s.beta_slow > 0.0))
      fail("rope_scaling type 'yarn': beta_fast = {}, beta_slow = {}, expected positive numbers", s.beta_fast,
           s.beta_slow);
    const double orig = static_cast<double>(s.original_max_position_embeddings);
    // find_correction_range with truncate = True: low from beta_fast, high from beta_slow.
    double low = std::floor(yarn_correction_dim(s.beta_fast, dim, rope_theta, orig));
    double high = std::ceil(yarn_correction_dim(s.beta_slow, dim, rope_theta, orig));
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1.0);
    if (low == high) high += 0.001;  // linear_ramp_factor's guard against a zero-width ramp
    for (int64_t i = 0; i < half; ++i) {
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      const double extrapolation_factor = 1.0 - ramp;
      const double extrapolation = inv[i];
      const double interpolation = inv[i] / s.factor;
      inv[i] = interpolation * (1.0 - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
    attention_factor = s.attention_factor != 0.0 ? s.attention_factor : yarn_mscale(s.factor);
  } else if (s.type == "dynamic") {
    fail(
        "rope_scaling type 'dynamic' is not supported (its frequencies change with the sequence length, which a "
        "KV cache cannot follow); supported: {}",
        kSupportedRopeTypes);
  } else {
    fail("rope_scaling type '{}' is not supported; supported: {}", s.type, kSupportedRopeTypes);
  }

  RopeTable table;
  table.head_dim = head_dim;
  table.inv_freq.resize(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) table.inv_freq[i] = static_cast<float>(inv[i]);
  table.attention_factor = static_cast<float>(attention_factor);
  return table;
}

void apply_rope_f32(float* x, int64_t n_tokens, int64_t row_stride, int64_t heads, int64_t first_position,
                    const RopeTable& table) {
  check_table(n_tokens, row_stride, heads, table);
  apply_rope_f32(x, n_tokens, row_stride, heads, first_position, table.inv_freq.data(), table.head_dim,
                 table.attention_factor);
}

void apply_rope_f32(float* x, int64_t n_tokens, int64_t row_stride, int64_t heads, int64_t first_position,
                    const float* inv_freq, int64_t head_dim, float attention_factor, int64_t rotary_dim) {
  if (rotary_dim == 0) rotary_dim = head_dim;
  if (head_dim <= 0 || rotary_dim <= 0 || rotary_dim % 2 != 0 || rotary_dim > head_dim || n_tokens < 0 || heads < 0 ||
      heads * head_dim > row_stride)
    fail(
        "apply_rope: {} tokens, {} heads of {} (rotating {}) in rows of {}, expected an even rotary_dim <= head_dim "
        "and heads·head_dim <= row_stride",
        n_tokens, heads, head_dim, rotary_dim, row_stride);
  const int64_t half = rotary_dim / 2;
  const double af = attention_factor;
  // Per token: cos and sin of the angles (double argument and libm, rounded to float once), then every
  // head rotated with contiguous, vectorizable float loops.
#pragma omp parallel if (n_tokens * heads * head_dim > (1 << 14))
  {
    std::vector<float> cos_v(static_cast<size_t>(half)), sin_v(static_cast<size_t>(half));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < n_tokens; ++t) {
      const double pos = static_cast<double>(first_position + t);
      for (int64_t i = 0; i < half; ++i) {
        const double angle = pos * static_cast<double>(inv_freq[i]);
        cos_v[i] = static_cast<float>(std::cos(angle) * af);
        sin_v[i] = static_cast<float>(std::sin(angle) * af);
      }
      const float* c = cos_v.data();
      const float* s = sin_v.data();
      for (int64_t h = 0; h < heads; ++h) {
        float* lo = x + t * row_stride + h * head_dim;
        float* hi = lo + half;
#pragma omp simd
        for (int64_t i = 0; i < half; ++i) {
          const float a = lo[i], b = hi[i];
          lo[i] = a * c[i] - b * s[i];
          hi[i] = b * c[i] + a * s[i];
        }
      }
    }
  }
}

void apply_rope_f32_ref(float* x, int64_t n_tokens, int64_t row_stride, int64_t heads, int64_t first_position,
                        const RopeTable& table) {
  check_table(n_tokens, row_stride, heads, table);
  const int64_t half = table.head_dim / 2;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      float* head = x + t * row_stride + h * table.head_dim;
      for (int64_t i = 0; i < half; ++i)
        element::rope_rotate(head[i], head[i + half], first_position + t, table.inv_freq[static_cast<size_t>(i)],
                             table.attention_factor);
    }
  }
}

}  // namespace qjoule::kernels
