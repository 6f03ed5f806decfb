// The CUDA backend's device status and its first kernel. Without a GPU (or without the backend) the
// status says why and the GPU tests skip with that reason; with one, the kernel matches its CPU twin.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <limits>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/quant/fp16_convert.h"
#include "random_data.h"
#if QJOULE_HAVE_CUDA
#include "qjoule/kernels/convert_f16_cuda.h"
#endif

namespace qjoule::kernels {
namespace {

using test::error_of;
using ::testing::HasSubstr;

TEST(CudaDevice, StatusSaysWhyWhenThereIsNoGpu) {
  const CudaDeviceStatus& s = cuda_device_status();
  EXPECT_EQ(s.built, QJOULE_HAVE_CUDA != 0);
  if (s.usable) {
    EXPECT_GT(s.device_count, 0);
    EXPECT_EQ(s.devices.size(), static_cast<std::size_t>(s.device_count));
  } else {
    EXPECT_FALSE(s.reason.empty());
    EXPECT_THAT(error_of([] { require_cuda_device("cuda"); }), HasSubstr("--device cuda: " + s.reason));
  }
}

TEST(CudaDevice, DeviceNamesAreChecked) {
  EXPECT_THAT(error_of([] { require_cuda_device("cuda:x"); }), HasSubstr("--device cuda:x: expected cuda or cuda:N"));
  EXPECT_THAT(error_of([] { require_cuda_device("tpu"); }), HasSubstr("--device tpu: expected cpu, cuda or cuda:N"));
  if (cuda_device_status().usable) {
    EXPECT_THAT(error_of([] { require_cuda_device("cuda:99"); }), HasSubstr("GPU 99 does not exist"));
  }
}

#if QJOULE_HAVE_CUDA
// cuBLASLt is loaded with dlopen on first use, never linked: the CUDA build finds it without loading it,
// loads it when asked (where the toolkit is installed), and says in one line why not where it cannot.
TEST(CublasLt, FoundWithoutLoadingAndLoadedOnFirstUse) {
  if (!cuda_device_status().built) {
    EXPECT_EQ(cublaslt_status().reason, "this qjoule was built without the CUDA backend");
    EXPECT_EQ(cublaslt_location(), "not built");
    return;
  }
  const char* forced = std::getenv("QJOULE_CUBLASLT_LIB");
  if (forced != nullptr) {  // the library hidden (ctest: CublasLt.hidden)
    EXPECT_THAT(cublaslt_location(), ::testing::HasSubstr("does not exist"));
    EXPECT_FALSE(cublaslt_status().loaded);
    EXPECT_THAT(cublaslt_status().reason, ::testing::HasSubstr(std::string("dlopen ") + forced));
    EXPECT_THAT(cublaslt_status().reason, ::testing::HasSubstr("cannot be loaded"));
    EXPECT_EQ(cublaslt_status().reason.find('\n'), std::string::npos);
    return;
  }
  if (cublaslt_location().starts_with("not found")) GTEST_SKIP() << "no cuBLASLt here: " << cublaslt_location();
  EXPECT_TRUE(cublaslt_status().loaded) << cublaslt_status().reason;
  EXPECT_THAT(cublaslt_status().library, ::testing::HasSubstr("libcublasLt.so"));
}

TEST(CudaConvertF16, BitExactWithTheCpuReference) {
  const CudaDeviceStatus& s = cuda_device_status();
  if (!s.usable) GTEST_SKIP() << "no usable GPU: " << s.reason;
  auto x = test::random_vector(100003, 7, 1000.0f);
  for (float e : {0.0f, -0.0f, 65504.0f, 65520.0f, -70000.0f, 6e-8f, 1e-5f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()})
    x.push_back(e);
  std::vector<uint16_t> gpu(x.size());
  convert_f32_to_f16_cuda(x.data(), gpu.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const uint16_t ref = quant::fp32_to_fp16_bits(x[i]);
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(quant::fp16_bits_to_fp32(gpu[i])));
    } else {
      ASSERT_EQ(gpu[i], ref) << "at " << i << ": " << x[i];
    }
  }
}
#endif

}  // namespace
}  // namespace qjoule::kernels
