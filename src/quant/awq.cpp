#include "qjoule/quant/awq.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "qjoule/error.h"
#include "qjoule/quant/quantize_int4.h"

namespace qjoule::quant {
namespace {

template <class Block>
constexpr bool kAsym = std::is_same_v<Block, BlockInt4Asym<Block::kSize>>;

// One row (n <= a whole row's width) through the reference quantizer and back.
template <class Block>
void round_trip_row(const float* w, int64_t n, float* out, Block* blocks, std::string_view tensor, int64_t row) {
  constexpr int G = Block::kSize;
  if constexpr (kAsym<Block>) {
    quantize_row_int4_asym_ref<G>(w, n, blocks, tensor, row);
    dequantize_row_int4_asym_ref<G>(blocks, n, out);
  } else {
    quantize_row_int4_sym_ref<G>(w, n, blocks, tensor, row);
    dequantize_row_int4_sym_ref<G>(blocks, n, out);
  }
}

// Σ_r d_r · (H d_r) over rows of d [rows, cols] (H's lower triangle), chunk by chunk of rows.
double quadratic_form_rows(const float* d, int64_t rows, int64_t cols, const float* H, int64_t ldh,
                           std::vector<float>& scratch, double* per_row = nullptr) {
  constexpr int64_t kChunk = 256;
  double total = 0.0;
  for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
    const int64_t n = std::min(kChunk, rows - r0);
    scratch.resize(static_cast<std::size_t>(n * cols));
    cblas_ssymm(CblasRowMajor, CblasRight, CblasLower, static_cast<int>(n), static_cast<int>(cols), 1.0f, H,
                static_cast<int>(ldh), d + r0 * cols, static_cast<int>(cols), 0.0f, scratch.data(),
                static_cast<int>(cols));
    for (int64_t r = 0; r < n; ++r) {
      double e = 0.0;
      for (int64_t j = 0; j < cols; ++j) e += double(d[(r0 + r) * cols + j]) * scratch[size_t(r * cols + j)];
      if (per_row != nullptr) per_row[r0 + r] = e;
      total += e;
    }
  }
  return total;
}

}  // namespace

template <class Block>
void int4_round_trip(const float* w, int64_t rows, int64_t cols, float* out, std::string_view tensor) {
  const auto blocks_per_row = static_cast<std::size_t>((cols + Block::kSize - 1) / Block::kSize);
  // Rows are independent: the OpenMP threads the kernels use take them in turn (the codes do not depend on
  // how rows are shared out).
#pragma omp parallel
  {
    std::vector<Block> blocks(blocks_per_row);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      round_trip_row<Block>(w + r * cols, cols, out + r * cols, blocks.data(), tensor, r);
  }
}

double output_error(const float* w, const float* v, int64_t rows, int64_t cols, const std::vector<float>& H) {
  std::vector<float> d(static_cast<std::size_t>(rows * cols)), scratch;
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = w[i] - v[i];
  return quadratic_form_rows(d.data(), rows, cols, H.data(), cols, scratch);
}

AwqScales search_awq_scales(const std::vector<AwqMember>& members, int64_t cols, const std::vector<float>& mean_abs,
                            const std::vector<float>& H, const AwqOptions& options) {
  if (static_cast<int64_t>(mean_abs.size()) != cols || static_cast<int64_t>(H.size()) != cols * cols)
    fail("AWQ: {} channel means and a {}-value H for {} columns; expected {} and {}", mean_abs.size(), H.size(), cols,
         cols, cols * cols);
  for (const AwqMember& m : members)
    if (m.H != nullptr && static_cast<int64_t>(m.H->size()) != cols * cols)
      fail("AWQ: a member's {}-value H for {} columns; expected {}", m.H->size(), cols, cols * cols);
  AwqScales best;
  best.error = std::numeric_limits<double>::infinity();
  // Each member's rows the error is measured on: all, or search_rows of them evenly strided.
  std::vector<std::vector<float>> sampled(members.size());
  std::vector<AwqMember> measured = members;
  for (std::size_t m = 0; m < members.size(); ++m) {
    const int64_t rows = members[m].rows, keep = std::min(rows, std::max<int64_t>(options.search_rows, 1));
    if (keep == rows) continue;
    sampled[m].resize(static_cast<std::size_t>(keep * cols));
    for (int64_t i = 0; i < keep; ++i)
      std::copy_n(members[m].w + (i * rows / keep) * cols, cols, sampled[m].data() + i * cols);
    measured[m].w = sampled[m].data();
    measured[m].rows = keep;
  }
  std::vector<float> s(static_cast<std::size_t>(cols)), scaled, back, d, scratch;
  for (int i = 0; i < std::max(options.grid, 1); ++i) {
    const double alpha = double(i) / std::max(options.grid, 1);
    float lo = std::numeric_limits<float>::max(), hi = 0.0f;
    for (int64_t j = 0; j < cols; ++j) {
      s[size_t(j)] = std::max(static_cast<float>(std::pow(double(mean_abs[size_t(j)]), alpha)), 1e-4f);
      lo = std::min(lo, s[size_t(j)]);
      hi = std::max(hi, s[size_t(j)]);
    }
    const float norm = std::sqrt(lo * hi);
    for (float& v : s) v /= norm;
    double error = 0.0;
    for (const AwqMember& m : measured) {
      const auto n = static_cast<std::size_t>(m.rows * cols);
      scaled.resize(n);
      back.resize(n);
      d.resize(n);
      for (std::size_t k = 0; k < n; ++k) scaled[k] = m.w[k] * s[k % size_t(cols)];
      m.round_trip(scaled.data(), m.rows, cols, back.data());
      for (std::size_t k = 0; k < n; ++k) d[k] = m.w[k] - back[k] / s[k % size_t(cols)];
      error += quadratic_form_rows(d.data(), m.rows, cols, (m.H != nullptr ? *m.H : H).data(), cols, scratch);
    }
    if (i == 0) best.rtn_error = error;
    if (error < best.error) {
      best.error = error;
      best.alpha = alpha;
      best.scales = s;
    }
  }
  return best;
}

template <class Block>
void clip_awq(float* w, int64_t rows, int64_t cols, const std::vector<float>& H, const AwqOptions& options,
              std::string_view tensor) {
  constexpr int64_t G = Block::kSize;
  const int steps = static_cast<int>(std::floor(options.max_shrink * options.grid + 1e-9));
  std::vector<float> group, clipped, back, d, scratch, best_w, org_max;
  std::vector<double> err(static_cast<std::size_t>(rows)), best_err(static_cast<std::size_t>(rows));
  const std::vector<float> original(w, w + rows * cols);
  for (int64_t c0 = 0; c0 < cols; c0 += G) {
    const int64_t len = std::min(G, cols - c0);
    const auto n = static_cast<std::size_t>(rows * len);
    group.resize(n);
    clipped.resize(n);
    back.resize(n);
    d.resize(n);
    org_max.assign(static_cast<std::size_t>(rows), 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < len; ++j) {
        group[size_t(r * len + j)] = w[r * cols + c0 + j];
        org_max[size_t(r)] = std::max(org_max[size_t(r)], std::fabs(w[r * cols + c0 + j]));
      }
    }
    best_w = group;
    std::fill(best_err.begin(), best_err.end(), std::numeric_limits<double>::infinity());
    for (int i = 0; i <= steps; ++i) {
      const float ratio = 1.0f - float(i) / float(std::max(options.grid, 1));
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        Block block{};
        const float mv = org_max[size_t(r)] * ratio;
        for (int64_t j = 0; j < len; ++j)
          clipped[size_t(r * len + j)] = std::clamp(group[size_t(r * len + j)], -mv, mv);
        round_trip_row<Block>(clipped.data() + r * len, len, back.data() + r * len, &block, tensor, r);
      }
      for (std::size_t k = 0; k < n; ++k) d[k] = group[k] - back[k];
      quadratic_form_rows(d.data(), rows, len, H.data() + c0 * cols + c0, cols, scratch, err.data());
      for (int64_t r = 0; r < rows; ++r) {
        if (err[size_t(r)] < best_err[size_t(r)]) {
          best_err[size_t(r)] = err[size_t(r)];
          std::copy_n(clipped.data() + r * len, len, best_w.data() + r * len);
        }
      }
    }
    for (int64_t r = 0; r < rows; ++r) std::copy_n(best_w.data() + r * len, len, w + r * cols + c0);
  }
  // Each group's ratio was chosen on its own inputs (H's diagonal block); the errors of a row's groups add
  // up through the rest of H where inputs correlate (LayerNorm's β gives every token a shared mean), so a
  // row keeps its clipping only where that lowers its whole output error, round-to-nearest's otherwise.
  std::vector<double> clipped_err(static_cast<std::size_t>(rows)), rtn_err(static_cast<std::size_t>(rows));
  back.resize(original.size());
  d.resize(original.size());
  for (auto [from, errors] :
       {std::pair<const float*, double*>{w, clipped_err.data()}, {original.data(), rtn_err.data()}}) {
    int4_round_trip<Block>(from, rows, cols, back.data(), tensor);
    for (std::size_t k = 0; k < original.size(); ++k) d[k] = original[k] - back[k];
    quadratic_form_rows(d.data(), rows, cols, H.data(), cols, scratch, errors);
  }
  for (int64_t r = 0; r < rows; ++r) {
    if (clipped_err[size_t(r)] > rtn_err[size_t(r)]) std::copy_n(original.data() + r * cols, cols, w + r * cols);
  }
}

#define QJOULE_AWQ(B)                                                                         \
  template void int4_round_trip<B>(const float*, int64_t, int64_t, float*, std::string_view); \
  template void clip_awq<B>(float*, int64_t, int64_t, const std::vector<float>&, const AwqOptions&, std::string_view);
QJOULE_AWQ(BlockInt4Sym<32>)
QJOULE_AWQ(BlockInt4Sym<64>)
QJOULE_AWQ(BlockInt4Sym<128>)
QJOULE_AWQ(BlockInt4Asym<32>)
QJOULE_AWQ(BlockInt4Asym<64>)
QJOULE_AWQ(BlockInt4Asym<128>)
#undef QJOULE_AWQ

}  // namespace qjoule::quant
