// BF16 linear layer: BF16 weights, activations rounded to BF16 per call, FP32 accumulation, on
// oneDNN's native bf16 matmul (or, where that does not beat FP32, BF16 weight rows widened into FP32
// panels for its FP32 matmul), qjoule's AVX2 kernel or a scalar loop (linear_onednn_lowp.h).
#include <cmath>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm_bf16_avx2.h"
#include "kernels/cpu/gemv_dense_avx512.h"
#include "kernels/cpu/linear_bf16_kernels.h"
#include "kernels/cpu/onednn_matmul_by_rows.h"
#include "kernels/cpu/weight_only/panel_matmul.h"
#include "qjoule/io/huge_pages.h"
#include "qjoule/quant/format.h"
#include "qjoule/error.h"
#include "qjoule/kernels/linear_onednn_lowp.h"

namespace qjoule::kernels {
namespace {

using dnnl::memory;

io::HugePageVector<uint16_t> to_bf16(const float* v, int64_t count) {
  io::HugePageVector<uint16_t> bits(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) bits[static_cast<size_t>(i)] = f32_to_bf16_bits(v[i]);
  return bits;
}

// Per-thread scratch for the BF16-rounded activations (as FP32 values or as BF16 bits).
template <typename T>
std::vector<T>& activation_scratch(int64_t count) {
  thread_local std::vector<T> scratch;
  scratch.resize(static_cast<size_t>(count));
  return scratch;
}

class LinearBf16 final : public Linear {
 public:
  LinearBf16(Bf16Kernel kernel, const float* W, const float* bias, int64_t out, int64_t in, const std::string& name)
      : kernel_(kernel),
        out_(out),
        in_(in),
        matmul_(out, in, memory::data_type::bf16, memory::data_type::bf16, bias != nullptr) {
    if (out <= 0 || in <= 0) fail("{}: linear shape [{}, {}] is empty; expected out > 0 and in > 0", name, out, in);
    for (int64_t i = 0; i < out * in; ++i) {
      if (!std::isfinite(W[i]) || std::isinf(round_to_bf16(W[i]))) {
        fail("{}: weight [{}, {}] = {} is not a finite BF16 value; expected finite weights below 3.39e38", name, i / in,
             i % in, W[i]);
      }
    }
    if (bias != nullptr) bias_.assign(bias, bias + out);
    switch (kernel_) {
      case Bf16Kernel::onednn:
        weight_bits_ = to_bf16(W, out * in);
        gemv_ = cpu_supports_gemv_bf16_avx512();
        // Where oneDNN's BF16 matmul does not beat its FP32 one (AVX512_BF16 without AMX: avx512::panel_kind),
        // prefill widens BF16 weight rows into FP32 panels: the same BF16 × BF16 products, FP32 sums.
        f32_panel_ = gemv_ && avx512::bf16_panel_available() && avx512::panel_kind() == avx512::PanelKind::f32;
        kernel_path_ =
            f32_panel_ ? avx512::panel_kernel_path()
                       : onednn_kernel_path(matmul_.primitive_desc(gemv_ ? kGemvDenseMaxRows + 1 : 1)) + ":bf16bf16f32";
        if (gemv_) kernel_path_ = "qjoule:avx512_bf16:bf16_gemv,m>4:" + kernel_path_;
        break;
      case Bf16Kernel::avx2:
        packed_ = pack_bf16_weights(W, bias, out, in);
        kernel_path_ = "qjoule:avx2:bf16w_bf16a_f32acc";
        break;
      case Bf16Kernel::scalar:
      case Bf16Kernel::automatic:
        weight_bits_ = to_bf16(W, out * in);
        kernel_path_ = "qjoule:scalar:bf16w_bf16a_f32acc";
        break;
    }
  }

  void forward(const float* x, int64_t m, float* y) const override {
    if (m <= 0) return;
    const int64_t count = m * in_;
    if (kernel_ == Bf16Kernel::onednn) {
      if (f32_panel_ && m > kGemvDenseMaxRows) {
        // The activations rounded to BF16 once, kept as FP32 values for the FP32 panels.
        std::vector<float>& af = activation_scratch<float>(count);
#pragma omp parallel for schedule(static) if (count >= (int64_t{1} << 16))
        for (int64_t i = 0; i < count; ++i) af[static_cast<size_t>(i)] = round_to_bf16(x[i]);
        avx512::f32_panel_gemm(af.data(), m, out_, in_, bias_.empty() ? nullptr : bias_.data(), y,
                               [this](int64_t o_begin, int64_t o_end, float* panel) {
                                 const uint16_t* w = weight_bits_.data() + o_begin * in_;
                                 const int64_t n = (o_end - o_begin) * in_;
                                 for (int64_t i = 0; i < n; ++i) panel[i] = bf16_bits_to_f32(w[i]);
                               });
        return;
      }
      std::vector<uint16_t>& a = activation_scratch<uint16_t>(count);
#pragma omp parallel for schedule(static) if (count >= (int64_t{1} << 16))
      for (int64_t i = 0; i < count; ++i) a[static_cast<size_t>(i)] = f32_to_bf16_bits(x[i]);
      if (gemv_ && m <= kGemvDenseMaxRows) {
        gemv_bf16_avx512(a.data(), m, weight_bits_.data(), bias_.empty() ? nullptr : bias_.data(), out_, in_, y);
        return;
      }
      matmul_.execute(m, a.data(), weight_bits_.data(), bias_.empty() ? nullptr : bias_.data(), y);
      return;
    }
    std::vector<float>& a = activation_scratch<float>(count);
#pragma omp parallel for schedule(static) if (count >= (int64_t{1} << 16))
    for (int64_t i = 0; i < count; ++i) a[static_cast<size_t>(i)] = round_to_bf16(x[i]);
    if (kernel_ == Bf16Kernel::avx2) {
      gemm_bf16_avx2(a.data(), m, packed_, y);
    } else {
      run_scalar(a.data(), m, y);
    }
  }

  int64_t in_features() const override { return in_; }
  int64_t out_features() const override { return out_; }
  std::string format() const override { return std::string(quant::name(quant::Format::bf16)); }
  std::string kernel_path() const override { return kernel_path_; }
  std::size_t bytes_held() const override {
    if (kernel_ == Bf16Kernel::avx2) {  // padded panels and the padded bias the kernel reads
      return packed_.lanes.size() * sizeof(uint32_t) + packed_.bias.size() * sizeof(float);
    }
    return weight_bits_.size() * sizeof(uint16_t) + bias_.size() * sizeof(float);
  }
  HostRows host_weight_rows() const override {
    if (weight_bits_.empty()) return {};  // the avx2 kernel's panels
    return {weight_bits_.data(), sizeof(uint16_t)};
  }

 private:
  void run_scalar(const float* a, int64_t m, float* y) const {
#pragma omp parallel for schedule(static) if (m * out_ * in_ >= (int64_t{1} << 20))
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < out_; ++j) {
        float acc = 0.0f;
        const uint16_t* w = weight_bits_.data() + j * in_;
        for (int64_t k = 0; k < in_; ++k) acc += a[i * in_ + k] * bf16_bits_to_f32(w[k]);
        y[i * out_ + j] = acc + (bias_.empty() ? 0.0f : bias_[static_cast<size_t>(j)]);
      }
    }
  }

  Bf16Kernel kernel_;
  int64_t out_, in_;
  std::vector<float> bias_;
  io::HugePageVector<uint16_t> weight_bits_;  // onednn and scalar kernels: [out, in] BF16
  PackedBf16Weights packed_;                  // avx2 kernel
  OneDnnMatmulByRows matmul_;                 // onednn kernel (primitives are created on first use only)
  bool gemv_ = false;                         // onednn kernel: qjoule's AVX512_BF16 GEMV for m <= kGemvDenseMaxRows
  bool f32_panel_ = false;                    // onednn kernel: prefill on FP32 panels (avx512::panel_kind)
  std::string kernel_path_;
};

}  // namespace

bool onednn_has_native_bf16_matmul() {
  static const bool has = [] {
    try {
      const OneDnnMatmulByRows probe(64, 64, memory::data_type::bf16, memory::data_type::bf16, true);
      const std::string impl = probe.primitive_desc(64).impl_info_str();
      return impl.rfind("ref", 0) != 0;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return has;
}

std::unique_ptr<Linear> make_linear_bf16_on(Bf16Kernel kernel, const float* W, const float* bias, int64_t out,
                                            int64_t in, const std::string& tensor_name) {
  if (kernel == Bf16Kernel::automatic) {
    kernel = onednn_has_native_bf16_matmul() ? Bf16Kernel::onednn
             : cpu_has_avx2_fma()            ? Bf16Kernel::avx2
                                             : Bf16Kernel::scalar;
  }
  if (kernel == Bf16Kernel::onednn && !onednn_has_native_bf16_matmul()) {
    fail(
        "{}: bf16 kernel 'onednn' requested, but oneDNN {}.{} has no native bf16 matmul on this CPU "
        "(it needs AVX512_BF16 or AMX); the AVX2 kernel runs instead when chosen automatically",
        tensor_name, dnnl::version()->major, dnnl::version()->minor);
  }
  if (kernel == Bf16Kernel::avx2 && !cpu_has_avx2_fma()) {
    fail("{}: bf16 kernel 'avx2' requested, but this CPU lacks AVX2/FMA", tensor_name);
  }
  return std::make_unique<LinearBf16>(kernel, W, bias, out, in, tensor_name);
}

std::unique_ptr<Linear> make_linear_bf16(const float* W, const float* bias, int64_t out, int64_t in,
                                         const std::string& tensor_name) {
  return make_linear_bf16_on(Bf16Kernel::automatic, W, bias, out, in, tensor_name);
}

void linear_bf16_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in, float* y) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < out; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < in; ++k) acc += double(round_to_bf16(x[i * in + k])) * round_to_bf16(W[j * in + k]);
      y[i * out + j] = static_cast<float>(acc + (bias != nullptr ? bias[j] : 0.0));
    }
  }
}

}  // namespace qjoule::kernels
