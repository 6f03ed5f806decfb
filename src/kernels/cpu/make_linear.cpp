#include "qjoule/kernels/make_linear.h"

#include "qjoule/error.h"
#include "qjoule/kernels/backend_registry.h"

namespace qjoule::kernels {

void require_cpu_format(const quant::FormatSpec& format, std::string_view what) {
  if (!runs_on(Backend::cpu, format.format)) {
    if (runs_on(Backend::cuda, format.format))
      fail("{}: {} runs on CUDA only; on the CPU expected one of {}", what, format.format,
           backend_format_names(Backend::cpu));
    fail("{}: {} has no kernel on any backend; on the CPU expected one of {}", what, format.format,
         backend_format_names(Backend::cpu));
  }
}

std::unique_ptr<Linear> make_linear(const quant::FormatSpec& format, const float* W, const float* bias, int64_t out,
                                    int64_t in, const std::string& tensor_name, const float* int8_smoothing) {
  const BackendFormat* row = find_backend_format(Backend::cpu, format.format);
  if (int8_smoothing != nullptr && (row == nullptr || !row->takes_smoothing)) {
    fail("{}: SmoothQuant factors given for precision '{}'; expected them with int8 only", tensor_name, format.format);
  }
  require_cpu_format(format, tensor_name);
  // GPTQ's codes come from calibration inputs: made from the weights alone they would be round-to-
  // nearest's under another name.
  if (quant::needs_calibration(format)) fail("{}: {}", tensor_name, quant::calibration_needed_message(format));
  if (format.emulate && format.format != quant::Format::fp32)
    return make_linear_emulated(format, W, bias, out, in, tensor_name, int8_smoothing);
  return row->build_cpu(format, W, bias, out, in, tensor_name, int8_smoothing);
}

}  // namespace qjoule::kernels
