// One entry point that builds a Linear layer in any format qjoule supports on the CPU, from a
// precision spec parsed by quant::parse_format_spec (format_spec.h: "int8", "int4:g=64:asym:a8",
// "nf4:dq", "int8:emulate").
//
// emulate = true builds a fake-quantized layer for accuracy studies only: weights (and, for bf16,
// int8 and int4:a8, activations) are quantized and immediately dequantized with the same scalar
// quantizers the real kernels use, and the product runs in oneDNN FP32. format() still reports the
// precision (e.g. "int8") but kernel_path() begins with "emulated:not_representative:" — its speed,
// energy and bytes_held (FP32 weights) say nothing about the format.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qjoule/kernels/linear.h"
#include "qjoule/quant/format_spec.h"

namespace qjoule::kernels {

// Fails with one line beginning with `what` (e.g. "--precision fp8") unless make_linear has a CPU
// kernel for the spec's format; the message lists the CPU formats.
void require_cpu_format(const quant::FormatSpec& format, std::string_view what);

// W: [out, in] FP32 row-major (Hugging Face layout); bias [out] or nullptr; both are copied or packed.
// int8_smoothing [in] (or nullptr): SmoothQuant factors for format int8 only (applied inside the
// layer, see make_linear_int8_w8a8); passing them for another precision is an error.
std::unique_ptr<Linear> make_linear(const quant::FormatSpec& format, const float* W, const float* bias, int64_t out,
                                    int64_t in, const std::string& tensor_name, const float* int8_smoothing = nullptr);

// The fake-quantized layer behind emulate = true (any CPU format but fp32).
std::unique_ptr<Linear> make_linear_emulated(const quant::FormatSpec& format, const float* W, const float* bias,
                                             int64_t out, int64_t in, const std::string& tensor_name,
                                             const float* int8_smoothing = nullptr);

}  // namespace qjoule::kernels
