// INT8 W8A8 dynamic linear layer: per-token activation quantization, oneDNN's u8×s8→s32 matmul and
// one dequantization pass. (Layout and numerics are documented in linear_onednn_lowp.h.)
//
// What is fused where: oneDNN 2.6 can scale the output per column (output scales, mask 2) but not per
// row, and a per-row binary post-op drops it from gemm:jit to its reference int8 matmul (measured).
// Since the per-token scale forces one pass over the output anyway, the matmul writes raw int32
// accumulators into y's own storage and a single pass then applies everything at once:
// compensation for the +128 activation shift, per-token × per-channel scale, and bias.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm_u8s8s32.h"
#include "kernels/cpu/quantize_symmetric_rows.h"
#include "qjoule/quant/format.h"
#include "qjoule/error.h"
#include "qjoule/kernels/linear_onednn_lowp.h"

namespace qjoule::kernels {
namespace {

// y[i, j] = float(acc[i, j] − comp[j]) · (sa[i] · sw[j]) + b[j], the expression of the kernel's
// dequantize_row_s32_scalar (the AVX paths fuse its last multiply-add).
inline float dequantize(int32_t acc, int32_t comp, float sa, float sw, float b) {
  return static_cast<float>(acc - comp) * (sa * sw) + b;
}

// W·diag(s) (a copy) and 1/s, after checking s; nothing when s is nullptr.
void apply_smoothing(const float* W, int64_t out, int64_t in, const float* s, const std::string& name,
                     std::vector<float>& smoothed_w, std::vector<float>& inv_s) {
  if (s == nullptr) return;
  inv_s.resize(static_cast<size_t>(in));
  for (int64_t k = 0; k < in; ++k) {
    if (!std::isfinite(s[k]) || !(s[k] > 0.0f)) {
      fail("{}: SmoothQuant factor [{}] = {}; expected a finite value > 0", name, k, s[k]);
    }
    inv_s[static_cast<size_t>(k)] = 1.0f / s[k];
  }
  smoothed_w.resize(static_cast<size_t>(out * in));
  for (int64_t j = 0; j < out; ++j)
    for (int64_t k = 0; k < in; ++k) smoothed_w[static_cast<size_t>(j * in + k)] = W[j * in + k] * s[k];
}

// Per-thread scratch for the quantized activations, reused across calls.
struct ActivationScratch {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};
ActivationScratch& activation_scratch() {
  thread_local ActivationScratch scratch;
  return scratch;
}

class LinearInt8W8A8OneDnn final : public Linear {
 public:
  LinearInt8W8A8OneDnn(const float* W, const float* bias, int64_t out, int64_t in, const std::string& tensor_name,
                       const float* smoothing)
      : out_(out), in_(in), name_(tensor_name), qmax_(int8_w8a8_weight_qmax()) {
    if (out <= 0 || in <= 0) fail("{}: linear shape [{}, {}] is empty; expected out > 0 and in > 0", name_, out, in);
    std::vector<float> smoothed_w;
    apply_smoothing(W, out, in, smoothing, name_, smoothed_w, inv_smoothing_);
    std::vector<int8_t> codes(static_cast<size_t>(out * in));
    weight_scales_.resize(static_cast<size_t>(out));
    quantize_rows_symmetric_s8(smoothing != nullptr ? smoothed_w.data() : W, out, in, qmax_, codes.data(),
                               weight_scales_.data(), name_);
    compensation_.resize(static_cast<size_t>(out));
    for (int64_t j = 0; j < out; ++j) {
      int32_t sum = 0;
      for (int64_t k = 0; k < in; ++k) sum += codes[j * in + k];
      compensation_[j] = 128 * sum;
    }
    bias_.assign(static_cast<size_t>(out), 0.0f);
    if (bias != nullptr) std::copy(bias, bias + out, bias_.begin());
    gemm_ = std::make_unique<GemmU8S8S32>(codes.data(), out, in);
    kernel_path_ = gemm_->kernel_path() + (qmax_ == 63 ? ":w7bit" : "") + (smoothing != nullptr ? ":smoothed" : "");
  }

  void forward(const float* x, int64_t m, float* y) const override {
    if (m <= 0) return;
    ActivationScratch& s = activation_scratch();
    s.codes.resize(static_cast<size_t>(m * in_));
    s.scales.resize(static_cast<size_t>(m));
    quantize_rows_symmetric_u8_shifted(x, m, in_, s.codes.data(), s.scales.data(), name_ + " (input activations)",
                                       inv_smoothing_.empty() ? nullptr : inv_smoothing_.data());
    // int32 accumulators land in y's storage (same size as float) and are converted in place.
    gemm_->run(s.codes.data(), m, reinterpret_cast<int32_t*>(y));
    const float* sa = s.scales.data();
    const DequantizeRowS32 dequantize_row = dequantize_row_s32_for_cpu();
#pragma omp parallel for schedule(static) if (m * out_ >= (int64_t{1} << 15))
    for (int64_t i = 0; i < m; ++i) {
      dequantize_row(y + i * out_, out_, sa[i], compensation_.data(), weight_scales_.data(), bias_.data());
    }
  }

  int64_t in_features() const override { return in_; }
  int64_t out_features() const override { return out_; }
  std::string format() const override { return std::string(quant::name(quant::Format::int8)); }
  std::string kernel_path() const override { return kernel_path_; }
  std::size_t bytes_held() const override {
    return gemm_->b().size() * sizeof(int8_t) + weight_scales_.size() * sizeof(float) +
           compensation_.size() * sizeof(int32_t) + bias_.size() * sizeof(float) +
           inv_smoothing_.size() * sizeof(float);
  }

 private:
  int64_t out_, in_;
  std::string name_;
  int qmax_;
  std::unique_ptr<GemmU8S8S32> gemm_;
  std::vector<float> weight_scales_;
  std::vector<int32_t> compensation_;  // 128 · Σ_k Wq[j, k]
  std::vector<float> bias_;            // zeros when the layer has none (held, so counted)
  std::vector<float> inv_smoothing_;   // 1/s per input channel, empty without SmoothQuant
  std::string kernel_path_;
};

}  // namespace

int int8_w8a8_weight_qmax() { return int8_gemm_weight_qmax(); }

std::unique_ptr<Linear> make_linear_int8_w8a8(const float* W, const float* bias, int64_t out, int64_t in,
                                              const std::string& tensor_name, const float* smoothing) {
  return std::make_unique<LinearInt8W8A8OneDnn>(W, bias, out, in, tensor_name, smoothing);
}

void linear_int8_w8a8_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                          int weight_qmax, float* y, const float* smoothing) {
  std::vector<float> smoothed_w, inv_s, smoothed_x;
  apply_smoothing(W, out, in, smoothing, "linear_int8_w8a8_ref", smoothed_w, inv_s);
  if (smoothing != nullptr) {
    smoothed_x.resize(static_cast<size_t>(m * in));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t k = 0; k < in; ++k)
        smoothed_x[static_cast<size_t>(i * in + k)] = x[i * in + k] * inv_s[static_cast<size_t>(k)];
    W = smoothed_w.data();
    x = smoothed_x.data();
  }
  std::vector<int8_t> wq(static_cast<size_t>(out * in)), xq(static_cast<size_t>(m * in));
  std::vector<float> sw(static_cast<size_t>(out)), sa(static_cast<size_t>(m));
  quantize_rows_symmetric_s8(W, out, in, weight_qmax, wq.data(), sw.data(), "linear_int8_w8a8_ref weight");
  quantize_rows_symmetric_s8(x, m, in, 127, xq.data(), sa.data(), "linear_int8_w8a8_ref input");
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < out; ++j) {
      int64_t acc = 0;
      for (int64_t k = 0; k < in; ++k) acc += int64_t{xq[i * in + k]} * wq[j * in + k];
      y[i * out + j] = dequantize(static_cast<int32_t>(acc), 0, sa[i], sw[j], bias != nullptr ? bias[j] : 0.0f);
    }
  }
}

}  // namespace qjoule::kernels
