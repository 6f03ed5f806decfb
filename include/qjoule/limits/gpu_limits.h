// What GPU N allows, measured: the device-to-device copy bandwidth (bytes read + written, 1 GiB or an
// eighth of the memory, median of 10) as the memory roof, and cuBLASLt's dense matrix-product rate per
// type (fp32, tf32, fp16, bf16, int8, fp8 E4M3; M = N = K = 4096, random operands, median of 5) as the
// compute roofs: what the formats' GEMMs can reach, measured rather than taken from a data sheet. A type
// the GPU's architecture lacks is absent with the reason. A build without the CUDA backend, or no
// usable GPU, is a one-line error.
#pragma once

#include <string>

#include "qjoule/limits/machine_limits.h"

namespace qjoule::limits {

MachineLimits measure_gpu_limits(int device);

// "gpu=NVIDIA H100 80GB HBM3; cc=9.0; sms=132; memory=85045379072": what must not change for a cached
// measurement of GPU `device` to stand.
std::string gpu_fingerprint(int device);

}  // namespace qjoule::limits
