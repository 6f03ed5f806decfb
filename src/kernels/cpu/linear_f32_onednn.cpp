// FP32 linear layer: qjoule's AVX-512 GEMV for m <= kGemvDenseMaxRows (decode) where the CPU has
// AVX-512, oneDNN's matmul otherwise. Weights stay in Hugging Face's [out, in] layout and are
// described to oneDNN as a transposed [in, out] matrix; one primitive is created per distinct
// row count m and cached, since transformer shapes repeat.
#include <vector>

#include "kernels/cpu/gemv_dense_avx512.h"
#include "kernels/cpu/onednn_matmul_by_rows.h"
#include "qjoule/io/huge_pages.h"
#include "qjoule/quant/format.h"
#include "qjoule/kernels/linear.h"

namespace qjoule::kernels {
namespace {

using dnnl::memory;

class LinearF32OneDnn final : public Linear {
 public:
  LinearF32OneDnn(const float* weight, const float* bias, int64_t out_features, int64_t in_features)
      : out_(out_features),
        in_(in_features),
        weight_(weight, weight + out_features * in_features),
        matmul_(out_features, in_features, memory::data_type::f32, memory::data_type::f32, bias != nullptr),
        gemv_(cpu_supports_gemv_f32_avx512()) {
    if (bias != nullptr) bias_.assign(bias, bias + out_features);
    const std::string onednn = onednn_kernel_path(matmul_.primitive_desc(gemv_ ? kGemvDenseMaxRows + 1 : 1)) + ":f32";
    kernel_path_ = gemv_ ? "qjoule:avx512:f32_gemv,m>4:" + onednn : onednn;
  }

  void forward(const float* x, int64_t m, float* y) const override {
    if (m <= 0) return;
    if (gemv_ && m <= kGemvDenseMaxRows) {
      gemv_f32_avx512(x, m, weight_.data(), bias_.empty() ? nullptr : bias_.data(), out_, in_, y);
      return;
    }
    matmul_.execute(m, x, weight_.data(), bias_.empty() ? nullptr : bias_.data(), y);
  }

  int64_t in_features() const override { return in_; }
  int64_t out_features() const override { return out_; }
  std::string format() const override { return std::string(quant::name(quant::Format::fp32)); }
  std::string kernel_path() const override { return kernel_path_; }
  std::size_t bytes_held() const override { return (weight_.size() + bias_.size()) * sizeof(float); }
  HostRows host_weight_rows() const override { return {weight_.data(), sizeof(float)}; }

 private:
  int64_t out_, in_;
  io::HugePageVector<float> weight_;  // [out, in], on huge pages (qjoule/io/huge_pages.h)
  std::vector<float> bias_;
  OneDnnMatmulByRows matmul_;
  bool gemv_;  // qjoule's AVX-512 GEMV for m <= kGemvDenseMaxRows
  std::string kernel_path_;
};

}  // namespace

std::unique_ptr<Linear> make_linear_f32_onednn(const float* weight, const float* bias, int64_t out_features,
                                               int64_t in_features) {
  return std::make_unique<LinearF32OneDnn>(weight, bias, out_features, in_features);
}

void linear_f32_ref(const float* x, int64_t m, const float* weight, const float* bias, int64_t out_features,
                    int64_t in_features, float* y) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t o = 0; o < out_features; ++o) {
      double acc = bias != nullptr ? bias[o] : 0.0;
      for (int64_t k = 0; k < in_features; ++k) acc += double(x[i * in_features + k]) * weight[o * in_features + k];
      y[i * out_features + o] = static_cast<float>(acc);
    }
  }
}

}  // namespace qjoule::kernels
