#include "qjoule/kernels/convert_f16_cuda.h"

#include "kernels/cuda/convert_f16_cuda_device.h"
#include "qjoule/error.h"

namespace qjoule::kernels {

void convert_f32_to_f16_cuda(const float* in, uint16_t* out, std::size_t n) {
  if (n == 0) return;
  const std::string error = detail::convert_f32_to_f16_device(in, out, n);
  if (!error.empty()) fail("CUDA FP32 -> FP16 conversion of {} values: {}", n, error);
}

}  // namespace qjoule::kernels
