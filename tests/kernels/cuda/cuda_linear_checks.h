// What the CUDA linear layers' GPU tests share (test_linear_cuda.cpp, test_linear_cuda_four_bit.cpp): the skip
// without a GPU, a shape, the budget's scale S = Σ_k |x_k · w_k| + |b| per output, the check of every output
// against its reference within rel · S, and a layer's forward on the host.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/cuda_gemm_bench.h"
#include "qjoule/kernels/linear_cuda.h"

namespace qjoule::kernels {

#define QJOULE_REQUIRE_GPU()                                                  \
  do {                                                                        \
    const CudaDeviceStatus& status_ = cuda_device_status();                   \
    if (!status_.usable) GTEST_SKIP() << "no usable GPU: " << status_.reason; \
  } while (false)

struct Shape {
  int64_t m, out, in;
};

inline std::string describe(const std::string& what, const Shape& s) {
  return what + " m=" + std::to_string(s.m) + " out=" + std::to_string(s.out) + " in=" + std::to_string(s.in);
}

// S = Σ_k |x_k · w_k| + |b| per output.
inline std::vector<double> budget_scale(const std::vector<float>& x, const std::vector<float>& w, const float* bias,
                                        const Shape& s) {
  std::vector<double> scale(static_cast<std::size_t>(s.m * s.out));
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t o = 0; o < s.out; ++o) {
      double v = bias != nullptr ? std::fabs(double(bias[o])) : 0.0;
      for (int64_t k = 0; k < s.in; ++k)
        v += std::fabs(double(x[static_cast<std::size_t>(i * s.in + k)]) * w[static_cast<std::size_t>(o * s.in + k)]);
      scale[static_cast<std::size_t>(i * s.out + o)] = v;
    }
  return scale;
}

inline void expect_within(const std::vector<float>& y, const std::vector<float>& ref, const std::vector<double>& scale,
                          double rel, const std::string& what) {
  ASSERT_EQ(y.size(), ref.size());
  for (std::size_t at = 0; at < y.size(); ++at) {
    ASSERT_TRUE(std::isfinite(y[at])) << what << " at " << at << " not written or not finite";
    ASSERT_LE(std::fabs(double(y[at]) - ref[at]), rel * scale[at] + 1e-30)
        << what << " at " << at << ": " << y[at] << " vs " << ref[at];
  }
}

inline std::vector<float> run_layer(const CudaLinear& layer, const std::vector<float>& x, const Shape& s) {
  std::vector<float> y(static_cast<std::size_t>(s.m * s.out), std::numeric_limits<float>::quiet_NaN());
  layer.forward(x.data(), s.m, y.data());
  return y;
}

inline int compute_capability() { return cuda_gpu_info(0).major * 10 + cuda_gpu_info(0).minor; }

}  // namespace qjoule::kernels
