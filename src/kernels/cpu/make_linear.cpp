#include "qjoule/kernels/make_linear.h"

#include "qjoule/error.h"
#include "qjoule/kernels/linear_onednn_lowp.h"
#include "qjoule/kernels/linear_weight_only.h"

namespace qjoule::kernels {

using quant::Format;

void require_cpu_format(const quant::FormatSpec& format, std::string_view what) {
  if (!quant::traits(format.format).runs_on_cpu) {
    fail("{}: {} runs on CUDA only; on the CPU expected one of {}", what, format.format, quant::cpu_format_names());
  }
}

std::unique_ptr<Linear> make_linear(const quant::FormatSpec& format, const float* W, const float* bias, int64_t out,
                                    int64_t in, const std::string& tensor_name, const float* int8_smoothing) {
  const Format f = format.format;
  if (int8_smoothing != nullptr && f != Format::int8) {
    fail("{}: SmoothQuant factors given for precision '{}'; expected them with int8 only", tensor_name, f);
  }
  require_cpu_format(format, tensor_name);
  // GPTQ's codes come from calibration inputs: made from the weights alone they would be round-to-
  // nearest's under another name.
  if (quant::needs_calibration(format)) fail("{}: {}", tensor_name, quant::calibration_needed_message(format));
  if (f == Format::fp32) return make_linear_f32_onednn(W, bias, out, in);
  if (format.emulate) return make_linear_emulated(format, W, bias, out, in, tensor_name, int8_smoothing);
  switch (f) {
    case Format::bf16: return make_linear_bf16(W, bias, out, in, tensor_name);
    case Format::fp16: return make_linear_fp16_weights(W, bias, out, in, tensor_name);
    case Format::int8: return make_linear_int8_w8a8(W, bias, out, in, tensor_name, int8_smoothing);
    case Format::w8: return make_linear_w8(W, bias, out, in, tensor_name);
    case Format::int4: {
      Int4Options o;
      o.group_size = format.group_size;
      o.asymmetric = format.int4_asymmetric;
      o.int8_activations = format.int4_int8_activations;
      return make_linear_int4(W, bias, out, in, o, tensor_name);
    }
    case Format::nf4: {
      Nf4Options o;
      o.double_quant = format.nf4_double_quant;
      return make_linear_nf4(W, bias, out, in, o, tensor_name);
    }
    case Format::fp32:
    case Format::tf32:
    case Format::fp8: break;  // handled above
  }
  fail("{}: no CPU kernel for precision '{}'", tensor_name, f);
}

}  // namespace qjoule::kernels
