// EncoderClassifierCuda in a build without the CUDA backend (QJOULE_CUDA=OFF, or no nvcc): the
// constructor fails with one line, so `--device cuda` says why instead of failing to link.
#include "qjoule/model/encoder_classifier_cuda.h"

#include "qjoule/error.h"
#include "qjoule/kernels/cuda_device.h"

namespace qjoule::model {

struct EncoderClassifierCuda::Impl {};

EncoderClassifierCuda::EncoderClassifierCuda(const EncoderParams& params, const CudaLinearFormats& /*formats*/,
                                             int device)
    : config_(params.config), device_(device) {
  fail("GPU model on GPU {}: {}", device, kernels::cuda_device_status().reason);
}

EncoderClassifierCuda::~EncoderClassifierCuda() = default;

// Unreachable: no object is ever constructed.
void EncoderClassifierCuda::forward(const int32_t*, const int32_t*, int64_t, int64_t, float*) const {
  fail("GPU model: this qjoule was built without the CUDA backend");
}
double EncoderClassifierCuda::forward_timed(const int32_t*, const int32_t*, int64_t, int64_t, float*) const {
  fail("GPU model: this qjoule was built without the CUDA backend");
}
void EncoderClassifierCuda::synchronize() const { kernels::synchronize_cuda_device(device_); }
std::string EncoderClassifierCuda::device_name() const { return {}; }
std::vector<LinearReport> EncoderClassifierCuda::linear_reports() const { return {}; }
std::map<std::string, int> EncoderClassifierCuda::kernel_path_counts() const { return {}; }
std::string EncoderClassifierCuda::nongemm_path() const { return {}; }
std::size_t EncoderClassifierCuda::bytes_held() const { return 0; }
std::size_t EncoderClassifierCuda::fp32_bytes() const { return 0; }
std::size_t EncoderClassifierCuda::workspace_bytes() const { return 0; }

}  // namespace qjoule::model
