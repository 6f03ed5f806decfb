// The Linears and the GraphOps backend of a model on one device (qjoule/model/device_backend.h).
#include "qjoule/model/device_backend.h"

#include "qjoule/error.h"
#include "qjoule/model/calibrated_linear_factory.h"
#include "qjoule/model/cuda_linear_factory.h"

namespace qjoule::model {

DeviceBackend device_backend(int gpu, const quant::LayerPolicy& policy, SmoothingFactors smoothing) {
  if (gpu < 0) return {quantized_linear_factory(policy, std::move(smoothing)), nullptr, cpu_int4_codes_linear()};
  if (!smoothing.empty())
    fail("SmoothQuant runs on the CPU only (the GPU int8 layers quantize activations per token without smoothing)");
  return {cuda_linear_factory(cuda_linear_formats(policy), gpu), make_cuda_graph_ops(gpu), cuda_int4_codes_linear(gpu)};
}

}  // namespace qjoule::model
