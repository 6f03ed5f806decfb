// The Linear that every weight-only format shares: it holds the packed matrix (a qjoule::quant
// container) and the FP32 bias, and runs the GEMM entry chosen for the ISA at construction.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "qjoule/kernels/linear.h"
#include "qjoule/kernels/linear_weight_only.h"

namespace qjoule::kernels::detail {

// The GEMM entry of a layer built for `isa`, one per level.
template <class Gemm>
Gemm gemm_for(WeightOnlyIsa isa, Gemm scalar, Gemm avx2, Gemm avx512, Gemm avx512_bf16) {
  switch (isa) {
    case WeightOnlyIsa::avx512_bf16: return avx512_bf16;
    case WeightOnlyIsa::avx512: return avx512;
    case WeightOnlyIsa::avx2: return avx2;
    case WeightOnlyIsa::scalar: break;
  }
  return scalar;
}

// `isa`, at most avx2: the level of kernels with no AVX-512 form (fp16; int4:a8 without AVX512_VNNI).
inline WeightOnlyIsa at_most_avx2(WeightOnlyIsa isa) { return isa > WeightOnlyIsa::avx2 ? WeightOnlyIsa::avx2 : isa; }

// Packed: quant::Fp16Matrix, Int8Matrix, BlockMatrix<...>, Nf4DqMatrix (rows, cols, bytes()).
template <class Packed>
class WeightOnlyLinear final : public Linear {
 public:
  using Gemm = void (*)(const Packed&, const float* bias, const float* x, int64_t m, float* y);
  using GemmNamed = void (*)(const Packed&, const float* bias, const float* x, int64_t m, float* y, std::string_view);

  // kernel_path: weight_only_kernel_path(isa, kernel name, ...), e.g. "qjoule:avx2:nf4_f32".
  WeightOnlyLinear(Packed w, const float* bias, std::string format, std::string kernel_path, Gemm gemm,
                   GemmNamed gemm_named, std::string tensor_name)
      : w_(std::move(w)),
        format_(std::move(format)),
        kernel_path_(std::move(kernel_path)),
        gemm_(gemm),
        gemm_named_(gemm_named),
        tensor_name_(std::move(tensor_name)) {
    if (bias != nullptr) bias_.assign(bias, bias + w_.rows);
  }

  void forward(const float* x, int64_t m, float* y) const override {
    if (m <= 0) return;
    const float* b = bias_.empty() ? nullptr : bias_.data();
    const int64_t K = w_.padded_cols();
    if (K != w_.cols) {                        // rows ending in a partial block: x zero-padded to the blocks' width
      thread_local std::vector<float> padded;  // reused across calls: no allocation per forward
      padded.assign(static_cast<std::size_t>(m * K), 0.0f);
      for (int64_t i = 0; i < m; ++i) std::copy(x + i * w_.cols, x + (i + 1) * w_.cols, padded.data() + i * K);
      x = padded.data();
    }
    if (gemm_named_ != nullptr) {
      gemm_named_(w_, b, x, m, y, tensor_name_);
    } else {
      gemm_(w_, b, x, m, y);
    }
  }
  int64_t in_features() const override { return w_.cols; }
  int64_t out_features() const override { return w_.rows; }
  std::string format() const override { return format_; }
  std::string kernel_path() const override { return kernel_path_; }
  std::size_t bytes_held() const override { return w_.bytes() + bias_.size() * sizeof(float); }

 private:
  Packed w_;
  std::vector<float> bias_;
  std::string format_, kernel_path_;
  Gemm gemm_;
  GemmNamed gemm_named_;
  std::string tensor_name_;
};

}  // namespace qjoule::kernels::detail
