// The kernel path names the ISA actually dispatched, and the scalar path can be forced (by function
// and by QJOULE_FORCE_SCALAR=1) so both paths are tested on an AVX2 machine.
#include <cstdlib>

#include "weight_only_test_util.h"

namespace {

using namespace qjoule;

std::string nf4_path() {
  std::vector<float> w(4 * 64, 0.25f);
  return kernels::make_linear_nf4(w.data(), nullptr, 4, 64, {}, "t")->kernel_path();
}

TEST(WeightOnlyIsa, PathReflectsTheDispatchedIsa) {
  kernels::set_force_scalar_kernels(false);
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  EXPECT_EQ(kernels::cpu_supports_avx2_fma_f16c(), avx2);
  if (std::getenv("QJOULE_FORCE_SCALAR") == nullptr) {
    EXPECT_EQ(kernels::weight_only_isa(), avx2 ? kernels::WeightOnlyIsa::avx2 : kernels::WeightOnlyIsa::scalar);
    EXPECT_EQ(nf4_path(), avx2 ? "qjoule:avx2:nf4_f32" : "qjoule:scalar:nf4_f32");
  }
}

TEST(WeightOnlyIsa, ScalarCanBeForcedByFunction) {
  kernels::set_force_scalar_kernels(true);
  EXPECT_EQ(kernels::weight_only_isa(), kernels::WeightOnlyIsa::scalar);
  EXPECT_EQ(nf4_path(), "qjoule:scalar:nf4_f32");
  kernels::set_force_scalar_kernels(false);
}

TEST(WeightOnlyIsa, ScalarCanBeForcedByEnvironment) {
  const char* before = std::getenv("QJOULE_FORCE_SCALAR");
  const std::string saved = before != nullptr ? before : "";
  setenv("QJOULE_FORCE_SCALAR", "1", 1);
  EXPECT_EQ(kernels::weight_only_isa(), kernels::WeightOnlyIsa::scalar);
  EXPECT_EQ(nf4_path(), "qjoule:scalar:nf4_f32");
  setenv("QJOULE_FORCE_SCALAR", "0", 1);
  EXPECT_EQ(kernels::weight_only_isa(),
            kernels::cpu_supports_avx2_fma_f16c() ? kernels::WeightOnlyIsa::avx2 : kernels::WeightOnlyIsa::scalar);
  if (before != nullptr) {
    setenv("QJOULE_FORCE_SCALAR", saved.c_str(), 1);
  } else {
    unsetenv("QJOULE_FORCE_SCALAR");
  }
}

TEST(WeightOnlyIsa, LayersKeepTheIsaTheyWereBuiltWith) {
  std::vector<float> w(4 * 64, 0.25f);
  kernels::set_force_scalar_kernels(true);
  auto lin = kernels::make_linear_w8(w.data(), nullptr, 4, 64, "t");
  kernels::set_force_scalar_kernels(false);
  EXPECT_EQ(lin->kernel_path(), "qjoule:scalar:w8_f32");
}

}  // namespace
