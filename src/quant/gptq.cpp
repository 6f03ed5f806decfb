#include "qjoule/quant/gptq.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "qjoule/error.h"
#include "qjoule/quant/format.h"
#include "qjoule/quant/fp16_convert.h"
#include "qjoule/quant/quantize_int4.h"
#include "qjoule/quant/require_finite.h"

extern "C" {  // LAPACK (OpenBLAS), Fortran calling convention: column-major, arguments by address
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info);
void spotri_(const char* uplo, const int* n, float* a, const int* lda, int* info);
}

namespace qjoule::quant {
namespace {

template <class Block>
constexpr bool kAsym = std::is_same_v<Block, BlockInt4Asym<Block::kSize>>;

// Lower Cholesky factor of the symmetric n × n matrix a (in place; the strict upper triangle is left
// as it was); false where a is not positive definite.
bool cholesky_lower(std::vector<float>& a, int n) {
  int info = 0;
  spotrf_("L", &n, a.data(), &n, &info);
  return info == 0;
}

// U, the upper Cholesky factor of (H + λI)⁻¹ (GPTQ's Hinv), as rows: u[i · n + k] = U(i, k) for k >= i.
// In LAPACK's column-major terms: L₁ = chol(H), H⁻¹ from L₁ (lower triangle), L₂ = chol(H⁻¹) lower,
// U = L₂ᵀ, and column i of L₂ (contiguous) is row i of U.
std::vector<float> inverse_cholesky_upper(std::vector<float> H, int n, double damp, std::string_view tensor) {
  double mean_diag = 0.0;
  for (int j = 0; j < n; ++j) mean_diag += H[static_cast<std::size_t>(j) * n + j];
  mean_diag /= n;
  std::vector<float> a;
  // Damping first as asked, then 10x more up to three times: a factorisation that fails after that
  // says the calibration inputs were degenerate.
  for (int attempt = 0; attempt < 4; ++attempt) {
    const double lambda = damp * std::pow(10.0, attempt) * (mean_diag > 0.0 ? mean_diag : 1.0);
    a = H;
    for (int j = 0; j < n; ++j) a[static_cast<std::size_t>(j) * n + j] += static_cast<float>(lambda);
    int info = 0;
    if (!cholesky_lower(a, n)) continue;
    spotri_("L", &n, a.data(), &n, &info);
    if (info != 0 || !cholesky_lower(a, n)) continue;
    return a;
  }
  fail(
      "tensor '{}': GPTQ: the calibration inputs' Hessian ({} × {}) is not positive definite even with damping "
      "{}; expected inputs that span the layer's columns (more calibration tokens)",
      tensor, n, n, damp * 1000.0);
}

void set_nibble(uint8_t* qs, int64_t i, int u) {
  uint8_t& byte = qs[i / 2];
  byte = (i % 2 == 0) ? static_cast<uint8_t>((byte & 0x0F) | (u << 4)) : static_cast<uint8_t>((byte & 0xF0) | u);
}

int round_clamp(float v, int lo, int hi) {
  return static_cast<int>(std::clamp(std::nearbyint(v), float(lo), float(hi)));
}

// The stored code u of w in a block with scale d (and zero point z): formats.h's rule, as the _ref
// quantizers apply it.
template <class Block>
int code_of(float w, float d, int z) {
  if (d == 0.0f) return kAsym<Block> ? 0 : kInt4SymZero;
  if constexpr (kAsym<Block>) {
    return std::clamp(round_clamp(w / d, -kInt4AsymMaxCode, kInt4AsymMaxCode) + z, 0, kInt4AsymMaxCode);
  } else {
    return round_clamp(w / d, -kInt4SymMaxCode, kInt4SymMaxCode) + kInt4SymZero;
  }
}
template <class Block>
int zero_of(const Block& b) {
  if constexpr (kAsym<Block>) {
    return b.zero;
  } else {
    return kInt4SymZero;
  }
}

// The block's scale and zero point from the reference quantizer on `values` (len <= G); its codes are
// set to the zero point (the padding of a partial group decodes to 0; the others are overwritten).
template <class Block>
void group_parameters(const float* values, int64_t len, Block& block, std::string_view tensor, int64_t row) {
  if constexpr (kAsym<Block>) {
    quantize_row_int4_asym_ref<Block::kSize>(values, len, &block, tensor, row);
  } else {
    quantize_row_int4_sym_ref<Block::kSize>(values, len, &block, tensor, row);
  }
  const int z = zero_of(block);
  for (int64_t i = 0; i < Block::kSize; ++i) set_nibble(block.qs, i, z);
}

}  // namespace

void accumulate_hessian(const float* x, int64_t tokens, int64_t cols, std::vector<float>& H) {
  H.resize(static_cast<std::size_t>(cols * cols), 0.0f);
  if (tokens <= 0) return;
  // Lower triangle (row-major) of H += Xᵀ X; mirrored once, where it is factorised.
  cblas_ssyrk(CblasRowMajor, CblasLower, CblasTrans, static_cast<int>(cols), static_cast<int>(tokens), 1.0f, x,
              static_cast<int>(cols), 1.0f, H.data(), static_cast<int>(cols));
}

template <class Block>
BlockMatrix<Block> quantize_matrix_int4_gptq(const float* w, int64_t rows, int64_t cols, std::vector<float> H,
                                             const GptqOptions& options, std::string_view tensor) {
  constexpr int G = Block::kSize;
  if (rows <= 0 || cols <= 0) fail("tensor '{}': shape [{}, {}]; expected positive dimensions", tensor, rows, cols);
  if (H.size() != static_cast<std::size_t>(cols * cols))
    fail("tensor '{}': GPTQ Hessian of {} values; expected {} × {}", tensor, H.size(), cols, cols);
  for (int64_t r = 0; r < rows; ++r) require_finite(w + r * cols, cols, tensor, r, name(Format::int4));
  for (float h : H) {
    if (!std::isfinite(h))
      fail("tensor '{}': GPTQ: the calibration inputs' Hessian holds {}; expected finite", tensor, h);
  }
  const int n = static_cast<int>(cols);
  const auto at = [cols](int64_t i, int64_t j) { return static_cast<std::size_t>(i * cols + j); };
  for (int64_t i = 0; i < cols; ++i)  // the lower triangle mirrored (the permutation reads both)
    for (int64_t j = i + 1; j < cols; ++j) H[at(i, j)] = H[at(j, i)];

  // Columns no calibration input reached: quantized as zeros, H[j, j] = 1 (GPTQ's dead columns).
  std::vector<float> work(static_cast<std::size_t>(rows * cols));  // column-major in the processing order
  std::vector<int64_t> perm(static_cast<std::size_t>(cols));
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<bool> dead(static_cast<std::size_t>(cols), false);
  for (int64_t j = 0; j < cols; ++j) {
    if (H[at(j, j)] == 0.0f) {
      dead[static_cast<std::size_t>(j)] = true;
      H[at(j, j)] = 1.0f;
    }
  }
  if (options.act_order) {
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return H[at(a, a)] > H[at(b, b)]; });
    std::vector<float> permuted(H.size());
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t j = 0; j < cols; ++j) permuted[at(i, j)] = H[at(perm[size_t(i)], perm[size_t(j)])];
    H.swap(permuted);
  }
  for (int64_t p = 0; p < cols; ++p) {
    const int64_t c = perm[static_cast<std::size_t>(p)];
    for (int64_t r = 0; r < rows; ++r)
      work[static_cast<std::size_t>(p * rows + r)] = dead[size_t(c)] ? 0.0f : w[r * cols + c];
  }
  const std::vector<float> U = inverse_cholesky_upper(std::move(H), n, options.damp, tensor);

  BlockMatrix<Block> out;
  out.rows = rows;
  out.cols = cols;
  const int64_t bpr = out.blocks_per_row();
  out.blocks.assign(static_cast<std::size_t>(rows * bpr), Block{});
  std::vector<float> group(G);
  const auto set_group = [&](int64_t r, int64_t g, const auto& value_of) {  // from the current weights
    const int64_t len = std::min<int64_t>(G, cols - g * G);
    for (int64_t i = 0; i < len; ++i) group[size_t(i)] = value_of(g * G + i);
    group_parameters(group.data(), len, out.blocks[static_cast<std::size_t>(r * bpr + g)], tensor, r);
  };
  if (options.act_order) {  // static groups: from the weights as given (dead columns as zeros)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < bpr; ++g)
        set_group(r, g, [&](int64_t c) { return dead[size_t(c)] ? 0.0f : w[r * cols + c]; });
  }
  std::vector<int64_t> position(static_cast<std::size_t>(cols));  // original column -> processing position
  for (int64_t p = 0; p < cols; ++p) position[static_cast<std::size_t>(perm[size_t(p)])] = p;

  const int64_t B = std::max(1, options.block_columns);
  std::vector<float> err(static_cast<std::size_t>(B * rows));
  for (int64_t b0 = 0; b0 < cols; b0 += B) {
    const int64_t b1 = std::min(cols, b0 + B);
    for (int64_t p = b0; p < b1; ++p) {
      const int64_t c = perm[static_cast<std::size_t>(p)], g = c / G;
      float* wp = work.data() + p * rows;
      if (!options.act_order && c % G == 0) {  // the group's parameters from its weights as they stand now
        for (int64_t r = 0; r < rows; ++r)
          set_group(r, g, [&](int64_t cc) { return work[size_t(position[size_t(cc)] * rows + r)]; });
      }
      const float u_pp = U[static_cast<std::size_t>(p * cols + p)];
      float* e = err.data() + (p - b0) * rows;
      for (int64_t r = 0; r < rows; ++r) {
        Block& block = out.blocks[static_cast<std::size_t>(r * bpr + g)];
        const float d = fp16_bits_to_fp32(block.d);
        const int z = zero_of(block);
        const int u = code_of<Block>(wp[r], d, z);
        set_nibble(block.qs, c % G, u);
        e[r] = (wp[r] - static_cast<float>(u - z) * d) / u_pp;
      }
      for (int64_t k = p + 1; k < b1; ++k) {  // within the block: column by column
        cblas_saxpy(static_cast<int>(rows), -U[static_cast<std::size_t>(p * cols + k)], e, 1, work.data() + k * rows,
                    1);
      }
    }
    if (b1 < cols) {  // the columns after the block: W[b1:, :] −= U[b0:b1, b1:]ᵀ · Err (one GEMM)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(cols - b1), static_cast<int>(rows),
                  static_cast<int>(b1 - b0), -1.0f, U.data() + b0 * cols + b1, n, err.data(), static_cast<int>(rows),
                  1.0f, work.data() + b1 * rows, static_cast<int>(rows));
    }
  }
  return out;
}

double relative_output_error(const float* w, const float* q, int64_t rows, int64_t cols, const std::vector<float>& H) {
  double num = 0.0, den = 0.0;
  std::vector<double> dw(static_cast<std::size_t>(cols)), ww(static_cast<std::size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) {
      dw[size_t(j)] = double(w[r * cols + j]) - q[r * cols + j];
      ww[size_t(j)] = w[r * cols + j];
    }
    for (int64_t i = 0; i < cols; ++i) {
      double hd = 0.0, hw = 0.0;
      for (int64_t j = 0; j < cols; ++j) {
        const double h = H[size_t(std::max(i, j) * cols + std::min(i, j))];  // the lower triangle
        hd += h * dw[size_t(j)];
        hw += h * ww[size_t(j)];
      }
      num += dw[size_t(i)] * hd;
      den += ww[size_t(i)] * hw;
    }
  }
  return den > 0.0 ? num / den : 0.0;
}

#define QJOULE_GPTQ(G)                                                                           \
  template BlockMatrix<BlockInt4Sym<G>> quantize_matrix_int4_gptq<BlockInt4Sym<G>>(              \
      const float*, int64_t, int64_t, std::vector<float>, const GptqOptions&, std::string_view); \
  template BlockMatrix<BlockInt4Asym<G>> quantize_matrix_int4_gptq<BlockInt4Asym<G>>(            \
      const float*, int64_t, int64_t, std::vector<float>, const GptqOptions&, std::string_view);
QJOULE_GPTQ(32)
QJOULE_GPTQ(64)
QJOULE_GPTQ(128)
#undef QJOULE_GPTQ

}  // namespace qjoule::quant
