// Fake-quantized linear layers (`emulate`, make_linear.h): quantize → dequantize with the same
// scalar quantizers the real kernels use, then oneDNN FP32. For accuracy studies only; kernel_path()
// says "emulated:not_representative:..." so no speed or energy figure can pass for the format's.
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/quantize_symmetric_rows.h"
#include "qjoule/error.h"
#include "qjoule/kernels/backend_registry.h"
#include "qjoule/kernels/linear_onednn_lowp.h"
#include "qjoule/kernels/make_linear.h"
#include "qjoule/quant/quantize_activations_q8.h"
#include "qjoule/quant/quantize_fp16.h"
#include "qjoule/quant/quantize_fp4.h"
#include "qjoule/quant/quantize_int4.h"
#include "qjoule/quant/quantize_int8.h"
#include "qjoule/quant/quantize_nf4.h"

namespace qjoule::kernels {
namespace {

using quant::Format;

template <class Block, class Dequantize>
std::vector<float> int4_round_trip(const float* W, int64_t out, int64_t in, const std::string& name, Dequantize dq) {
  const auto m = quant::quantize_matrix_int4<Block>(W, out, in, name);
  std::vector<float> w(static_cast<size_t>(out * in));
  for (int64_t r = 0; r < out; ++r) dq(m.row(r), in, w.data() + r * in);
  return w;
}

template <int G>
std::vector<float> int4_round_trip(const float* W, int64_t out, int64_t in, bool asym, const std::string& name) {
  if (asym) return int4_round_trip<quant::BlockInt4Asym<G>>(W, out, in, name, quant::dequantize_row_int4_asym_ref<G>);
  return int4_round_trip<quant::BlockInt4Sym<G>>(W, out, in, name, quant::dequantize_row_int4_sym_ref<G>);
}

// W as the format holds it, decoded back to FP32.
std::vector<float> weight_round_trip(const quant::FormatSpec& f, const float* W, int64_t out, int64_t in,
                                     const std::string& name, int int8_qmax) {
  std::vector<float> w(static_cast<size_t>(out * in));
  const Format p = f.format;
  if (p == Format::bf16) {
    for (int64_t i = 0; i < out * in; ++i) {
      if (!std::isfinite(W[i])) fail("{}: weight [{}, {}] = {}; expected finite weights", name, i / in, i % in, W[i]);
      w[static_cast<size_t>(i)] = round_to_bf16(W[i]);
    }
  } else if (p == Format::fp16) {
    const auto m = quant::quantize_matrix_fp16(W, out, in, name);
    for (int64_t r = 0; r < out; ++r) quant::dequantize_row_fp16_ref(m.bits.data() + r * in, in, w.data() + r * in);
  } else if (p == Format::int8) {  // the W8A8 kernel's own quantizer and code range on this CPU
    std::vector<int8_t> q(w.size());
    std::vector<float> scales(static_cast<size_t>(out));
    quantize_rows_symmetric_s8(W, out, in, int8_qmax, q.data(), scales.data(), name);
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(q[i]) * scales[i / static_cast<size_t>(in)];
  } else if (p == Format::w8) {
    const auto m = quant::quantize_matrix_int8(W, out, in, name);
    for (int64_t r = 0; r < out; ++r) {
      quant::dequantize_row_int8_ref(m.q.data() + r * in, m.scales[static_cast<size_t>(r)], in, w.data() + r * in);
    }
  } else if (p == Format::int4) {
    if (f.group_size == 32) return int4_round_trip<32>(W, out, in, f.int4_asymmetric, name);
    if (f.group_size == 64) return int4_round_trip<64>(W, out, in, f.int4_asymmetric, name);
    if (f.group_size == 128) return int4_round_trip<128>(W, out, in, f.int4_asymmetric, name);
    fail("{}: int4 group size {}; expected 32, 64 or 128", name, f.group_size);
  } else if (p == Format::nf4) {
    if (f.nf4_double_quant) {
      const auto m = quant::quantize_matrix_nf4_double(W, out, in, name);
      for (int64_t r = 0; r < out; ++r) quant::dequantize_row_nf4_dq_ref(m, r, w.data() + r * in);
    } else {
      const auto m = quant::quantize_matrix_nf4(W, out, in, name);
      for (int64_t r = 0; r < out; ++r) quant::dequantize_row_nf4_ref(m.row(r), in, w.data() + r * in);
    }
  } else if (p == Format::mxfp4) {
    const auto m = quant::quantize_matrix_mxfp4(W, out, in, name);
    for (int64_t r = 0; r < out; ++r) quant::dequantize_row_mxfp4_ref(m.row(r), in, w.data() + r * in);
  } else if (p == Format::nvfp4) {
    const auto m = quant::quantize_matrix_nvfp4(W, out, in, name);
    for (int64_t r = 0; r < out; ++r) quant::dequantize_row_nvfp4_ref(m.row(r), in, m.tensor_scale, w.data() + r * in);
  } else {
    fail("{}: cannot emulate precision '{}'; expected a CPU format other than fp32 ({})", name, p,
         backend_format_names(Backend::cpu));
  }
  return w;
}

class LinearEmulated final : public Linear {
 public:
  LinearEmulated(const quant::FormatSpec& f, const float* W, const float* bias, int64_t out, int64_t in,
                 const std::string& name, const float* smoothing)
      : format_(f), name_(name), in_(in), int8_qmax_(f.format == Format::int8 ? int8_w8a8_weight_qmax() : 127) {
    std::vector<float> smoothed;
    if (smoothing != nullptr) {  // W·diag(s) offline, x·(1/s) at run time, as the real int8 layer does
      smoothed.assign(W, W + out * in);
      inv_smoothing_.resize(static_cast<size_t>(in));
      for (int64_t k = 0; k < in; ++k) {
        if (!std::isfinite(smoothing[k]) || !(smoothing[k] > 0.0f)) {
          fail("{}: SmoothQuant factor [{}] = {}; expected a finite value > 0", name, k, smoothing[k]);
        }
        inv_smoothing_[static_cast<size_t>(k)] = 1.0f / smoothing[k];
        for (int64_t j = 0; j < out; ++j) smoothed[static_cast<size_t>(j * in + k)] *= smoothing[k];
      }
      W = smoothed.data();
    }
    const std::vector<float> w = weight_round_trip(f, W, out, in, name, int8_qmax_);
    inner_ = make_linear_f32_onednn(w.data(), bias, out, in);
    std::string what = quant::to_string(f);
    if (f.format == Format::int8) what += int8_qmax_ == 63 ? "(w7bit,a8bit/token)" : "(w8bit,a8bit/token)";
    if (smoothing != nullptr) what += "+smoothed";
    kernel_path_ = fmt::format("emulated:not_representative:{}_fake_quant>{}", what, inner_->kernel_path());
  }

  void forward(const float* x, int64_t m, float* y) const override {
    const Format p = format_.format;
    const bool fake_activations =
        p == Format::bf16 || p == Format::int8 || (p == Format::int4 && format_.int4_int8_activations);
    if (!fake_activations) {
      inner_->forward(x, m, y);
      return;
    }
    std::vector<float> xa(x, x + m * in_);
    if (!inv_smoothing_.empty()) {
      for (int64_t i = 0; i < m; ++i)
        for (int64_t k = 0; k < in_; ++k)
          xa[static_cast<size_t>(i * in_ + k)] *= inv_smoothing_[static_cast<size_t>(k)];
    }
    if (p == Format::bf16) {
      for (float& v : xa) v = round_to_bf16(v);
    } else if (p == Format::int8) {  // per token, as the W8A8 kernel quantizes
      std::vector<int8_t> q(xa.size());
      std::vector<float> scales(static_cast<size_t>(m));
      quantize_rows_symmetric_s8(xa.data(), m, in_, 127, q.data(), scales.data(), name_ + " (input activations)");
      for (size_t i = 0; i < xa.size(); ++i) xa[i] = float(q[i]) * scales[i / static_cast<size_t>(in_)];
    } else {  // int4:a8 — blocks of 32 per token
      std::vector<quant::BlockQ8Act> blocks(static_cast<size_t>(in_ / quant::kQ8ActBlockSize));
      for (int64_t i = 0; i < m; ++i) {
        float* row = xa.data() + i * in_;
        quant::quantize_row_q8_act_ref(row, in_, blocks.data(), name_, i);
        for (int64_t k = 0; k < in_; ++k) {
          const auto& b = blocks[static_cast<size_t>(k / quant::kQ8ActBlockSize)];
          row[k] = float(b.qs[k % quant::kQ8ActBlockSize]) * b.d;
        }
      }
    }
    inner_->forward(xa.data(), m, y);
  }

  int64_t in_features() const override { return inner_->in_features(); }
  int64_t out_features() const override { return inner_->out_features(); }
  std::string format() const override { return std::string(quant::name(format_.format)); }
  std::string kernel_path() const override { return kernel_path_; }
  // What is really held: FP32 weights (not the format's size).
  std::size_t bytes_held() const override { return inner_->bytes_held() + inv_smoothing_.size() * sizeof(float); }

 private:
  quant::FormatSpec format_;
  std::string name_;
  int64_t in_;
  int int8_qmax_;
  std::vector<float> inv_smoothing_;
  std::unique_ptr<Linear> inner_;
  std::string kernel_path_;
};

}  // namespace

std::unique_ptr<Linear> make_linear_emulated(const quant::FormatSpec& format, const float* W, const float* bias,
                                             int64_t out, int64_t in, const std::string& tensor_name,
                                             const float* int8_smoothing) {
  if (format.format == Format::fp32 || !runs_on(Backend::cpu, format.format)) {
    fail("{}: cannot emulate precision '{}'; expected a CPU format other than fp32 ({})", tensor_name, format.format,
         backend_format_names(Backend::cpu));
  }
  if (int8_smoothing != nullptr && format.format != Format::int8) {
    fail("{}: SmoothQuant factors given for precision '{}'; expected them with int8 only", tensor_name, format.format);
  }
  return std::make_unique<LinearEmulated>(format, W, bias, out, in, tensor_name, int8_smoothing);
}

}  // namespace qjoule::kernels
