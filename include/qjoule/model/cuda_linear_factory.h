// The Linears of a model on one GPU: the layer policy's format for each (as quantized_linear_factory
// decides on the CPU), built with make_linear_cuda. A model runs them through the CUDA GraphOps
// backend (qjoule/model/graph_ops.h); without a usable GPU, building one is a one-line error.
#pragma once

#include <functional>

#include "qjoule/model/calibrated_int4.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/encoder_params.h"
#include "qjoule/quant/format_spec.h"
#include "qjoule/quant/layer_policy.h"

namespace qjoule::model {

// The format of one Linear on the GPU; `in_block` as for LinearFactory.
using CudaLinearFormats = std::function<quant::FormatSpec(const LinearParams& params, bool in_block)>;

// The layer policy's decision for each Linear, checked with
// kernels::check_cuda_format (so "tf32" and "fp8" are names too, and a format without a CUDA kernel
// is one line naming the tensor): block Linears get --precision (or their rule), the head stays fp32.
CudaLinearFormats cuda_linear_formats(const quant::LayerPolicy& policy);

// Whether Q, K and V in these formats are built as one Linear with the same numbers as three: the same
// format, and neither fp8 (one scale per tensor) nor nf4:dq (absmax groups of 256 blocks would straddle
// them).
bool cuda_fuses_qkv(const quant::FormatSpec& q, const quant::FormatSpec& k, const quant::FormatSpec& v);
// The same for any part beside the first (Q | K | V, a decoder's gate | up).
bool cuda_fuses(const quant::FormatSpec& first, const quant::FormatSpec& part);

// A LinearFactory building every Linear on GPU `device` in the format `formats` gives it. Fused params
// (fused_from set: Q | K | V, gate | up) are built when cuda_fuses holds for every part, else nullptr.
LinearFactory cuda_linear_factory(CudaLinearFormats formats, int device);

// Calibrated int4 codes (GPTQ's, AWQ's) as a Linear on GPU `device` (kernels::make_linear_cuda_int4_packed:
// the kernels round-to-nearest's int4 runs there); a8 has no CUDA kernel (one line).
Int4CodesLinear cuda_int4_codes_linear(int device);

}  // namespace qjoule::model
