// One entry point that builds a Linear layer in any format qjoule supports (`--precision NAME`),
// plus the precision-spec parser the CLI and --layer-precision share.
//
// Precision spec: NAME[:OPTION...], e.g. "int8", "int4:g64:asym:a8", "nf4:dq", "int8:emulate".
//   NAME     fp32 | bf16 | fp16 | int8 | w8 | int4 | nf4   (supported_precisions())
//   g32|g64|g128  int4 group size (default 128)          sym|asym  int4 scheme (default sym)
//   a8       int4 with activations quantized per block of 32 to INT8 (integer dot products)
//   dq       nf4 with double quantization
//   emulate  fake quantization (see below)
// Options that do not apply to NAME are rejected with a one-line error.
//
// emulate = true builds a fake-quantized layer for accuracy studies only: weights (and, for bf16,
// int8 and int4:a8, activations) are quantized and immediately dequantized with the same scalar
// quantizers the real kernels use, and the product runs in oneDNN FP32. format() still reports the
// precision (e.g. "int8") but kernel_path() begins with "emulated:not_representative:" — its speed,
// energy and bytes_held (FP32 weights) say nothing about the format. fp32 has nothing to emulate and
// returns the real FP32 layer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qjoule/kernels/linear.h"

namespace qjoule::kernels {

struct LinearFormat {
  std::string precision = "fp32";
  int group_size = 128;               // int4: 32, 64 or 128
  bool int4_asymmetric = false;       // int4: asym scheme with zero points
  bool int4_int8_activations = false; // int4: W4A8 path
  bool nf4_double_quant = false;      // nf4: double-quantized absmax
  bool emulate = false;               // fake quantization, accuracy studies only
};

// {"fp32", "bf16", "fp16", "int8", "w8", "int4", "nf4"}
std::vector<std::string> supported_precisions();

// Parses a precision spec (above). Fields the spec does not mention keep their value from `defaults`
// (so --group-size / --int4-scheme / --double-quant / --emulate can set them for every layer).
LinearFormat parse_precision(std::string_view spec, const LinearFormat& defaults = {});

// The canonical spec of a format, e.g. "int4:g128:asym:a8" (options that apply to its precision only).
std::string format_spec(const LinearFormat& format);

// W: [out, in] FP32 row-major (Hugging Face layout); bias [out] or nullptr; both are copied or packed.
// int8_smoothing [in] (or nullptr): SmoothQuant factors for precision "int8" only (applied inside the
// layer, see make_linear_int8_w8a8); passing them for another precision is an error.
std::unique_ptr<Linear> make_linear(const LinearFormat& format, const float* W, const float* bias, int64_t out,
                                    int64_t in, const std::string& tensor_name,
                                    const float* int8_smoothing = nullptr);

// The fake-quantized layer behind emulate = true (any precision but fp32).
std::unique_ptr<Linear> make_linear_emulated(const LinearFormat& format, const float* W, const float* bias,
                                             int64_t out, int64_t in, const std::string& tensor_name,
                                             const float* int8_smoothing = nullptr);

}  // namespace qjoule::kernels
