// make_cuda_graph_ops in a build without the CUDA backend (QJOULE_CUDA=OFF, or no nvcc): one line
// saying why, so that `--device cuda` answers instead of failing to link.
#include "qjoule/error.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/model/graph_ops.h"

namespace qjoule::model {

std::shared_ptr<GraphOps> make_cuda_graph_ops(int device) {
  fail("GPU {}: no usable GPU: {}", device, kernels::cuda_device_status().reason);
}

}  // namespace qjoule::model
