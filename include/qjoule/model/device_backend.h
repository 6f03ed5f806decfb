// The two things a model needs to live on one device: the factory of its Linears and the GraphOps
// backend its graph runs on. One decision for every command: the CPU Linears (quantized_linear_factory)
// and the CPU backend, or the CudaLinears of GPU N (cuda_linear_factory) and the CUDA backend on GPU N.
#pragma once

#include <memory>

#include "qjoule/model/calibrated_int4.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/graph_ops.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/quant/layer_policy.h"

namespace qjoule::model {

struct DeviceBackend {
  LinearFactory linears;
  std::shared_ptr<GraphOps> ops;  // nullptr: the CPU backend (every model's default)
  Int4CodesLinear int4_codes;     // calibrated int4 codes as a Linear there (calibrated_linear_factory)
};

// `gpu` < 0: the CPU, with `smoothing` (SmoothQuant) when given; else GPU `gpu` (already checked with
// kernels::require_cuda_device), where SmoothQuant does not exist (an error when `smoothing` is not
// empty). The formats are the policy's decisions.
DeviceBackend device_backend(int gpu, const quant::LayerPolicy& policy, SmoothingFactors smoothing = {});

}  // namespace qjoule::model
