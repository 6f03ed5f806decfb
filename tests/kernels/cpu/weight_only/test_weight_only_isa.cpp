// The kernel path names the ISA actually dispatched, and the scalar path can be forced (by function
// and by QJOULE_FORCE_SCALAR=1) so both paths are tested on an AVX2 machine.
#include <cstdlib>

#include "qjoule/kernels/kernel_overrides.h"
#include "weight_only_test_util.h"

namespace {

using namespace qjoule;

std::string nf4_path() {
  std::vector<float> w(4 * 64, 0.25f);
  return kernels::make_linear_nf4(w.data(), nullptr, 4, 64, {}, "t")->kernel_path();
}

bool bf16_panel_runs() {
  // The avx512_bf16 level: AVX512_BF16 and oneDNN's native BF16 matmul (its kernel path ends in bf16_panel).
  kernels::set_weight_only_isa_limit(kernels::WeightOnlyIsa::avx512_bf16);
  const bool runs = kernels::weight_only_isa() == kernels::WeightOnlyIsa::avx512_bf16;
  kernels::set_force_scalar_kernels(false);
  return runs;
}

kernels::WeightOnlyIsa widest_isa() {
  if (kernels::cpu_supports_avx512_weight_only()) {
    return bf16_panel_runs() ? kernels::WeightOnlyIsa::avx512_bf16 : kernels::WeightOnlyIsa::avx512;
  }
  return kernels::cpu_supports_avx2_fma_f16c() ? kernels::WeightOnlyIsa::avx2 : kernels::WeightOnlyIsa::scalar;
}

TEST(WeightOnlyIsa, PathReflectsTheDispatchedIsa) {
  // The panel override is checked wherever it is set, also where the level never asks for a panel (below
  // avx512_bf16): WeightOnlyPanel.bad_value sets a value it does not take and expects its one line.
  (void)kernels::kernel_override(kernels::KernelOverride::weight_only_panel);
  kernels::set_force_scalar_kernels(false);
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  EXPECT_EQ(kernels::cpu_supports_avx2_fma_f16c(), avx2);
  EXPECT_EQ(kernels::cpu_supports_avx512_weight_only(), avx512);
  if (bf16_panel_runs()) {
    EXPECT_TRUE(avx512 && __builtin_cpu_supports("avx512bf16"));
  }
  if (std::getenv("QJOULE_FORCE_SCALAR") == nullptr) {
    EXPECT_EQ(kernels::weight_only_isa(), widest_isa());
    // The decode GEMV: x16 at the avx512 levels where the CPU has AVX512_VNNI (checked in
    // test_linear_int4), FP32 / BF16 as below with QJOULE_WEIGHT_ONLY_DECODE=float.
    test::ScopedWeightOnlyDecode decode("float");
    const std::string path = nf4_path();
    switch (widest_isa()) {
      case kernels::WeightOnlyIsa::avx512_bf16: {
        // The prefill's panel: BF16 or FP32, measured once per process unless the environment says which.
        const char* forced = std::getenv("QJOULE_WEIGHT_ONLY_PANEL");
        const bool bf16 = path.starts_with("qjoule:avx512_bf16:nf4_bf16,m>4:bf16_panel+onednn:");
        const bool f32 =
            path.starts_with("qjoule:avx512_bf16:nf4_bf16,m>4:f32_panel+onednn:") && path.ends_with(":f32");
        EXPECT_TRUE(bf16 || f32) << path;
        if (forced != nullptr && *forced != '\0') {  // empty: unset, as kernel_override reads it
          EXPECT_TRUE(std::string(forced) == "bf16" ? bf16 : f32) << path;
        }
      } break;
      case kernels::WeightOnlyIsa::avx512: EXPECT_EQ(path, "qjoule:avx512:nf4_f32,m>4:qjoule:avx2:nf4_f32"); break;
      case kernels::WeightOnlyIsa::avx2: EXPECT_EQ(path, "qjoule:avx2:nf4_f32"); break;
      case kernels::WeightOnlyIsa::scalar: EXPECT_EQ(path, "qjoule:scalar:nf4_f32"); break;
    }
  }
}

TEST(WeightOnlyIsa, TheLimitCapsTheIsa) {
  test::ScopedWeightOnlyDecode decode("float");
  kernels::set_weight_only_isa_limit(kernels::WeightOnlyIsa::avx2);
  if (std::getenv("QJOULE_FORCE_SCALAR") == nullptr && kernels::cpu_supports_avx2_fma_f16c()) {
    EXPECT_EQ(kernels::weight_only_isa(), kernels::WeightOnlyIsa::avx2);
    EXPECT_EQ(nf4_path(), "qjoule:avx2:nf4_f32");
  }
  kernels::set_weight_only_isa_limit(kernels::WeightOnlyIsa::avx512);
  if (std::getenv("QJOULE_FORCE_SCALAR") == nullptr && kernels::cpu_supports_avx512_weight_only()) {
    EXPECT_EQ(kernels::weight_only_isa(), kernels::WeightOnlyIsa::avx512);
    EXPECT_EQ(nf4_path(), "qjoule:avx512:nf4_f32,m>4:qjoule:avx2:nf4_f32");
  }
  kernels::set_weight_only_isa_limit(kernels::WeightOnlyIsa::scalar);
  EXPECT_EQ(nf4_path(), "qjoule:scalar:nf4_f32");
  kernels::set_force_scalar_kernels(false);
  EXPECT_EQ(kernels::isa_name(kernels::WeightOnlyIsa::avx512), "avx512");
  EXPECT_EQ(kernels::isa_name(kernels::WeightOnlyIsa::avx512_bf16), "avx512_bf16");
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
  EXPECT_EQ(kernels::weight_only_isa(), widest_isa());
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

// At the avx2 level every 4-bit format and w8 has an x16 decode GEMV on vpmaddwd; its path names it and the FP32
// kernel that runs m > 4. Told by QJOULE_WEIGHT_ONLY_DECODE=x16 here; measured otherwise, per level and layout.
TEST(WeightOnlyIsa, TheAvx2LevelNamesItsX16DecodeGemvs) {
  if (std::getenv("QJOULE_FORCE_SCALAR") != nullptr || !kernels::cpu_supports_avx2_fma_f16c()) {
    GTEST_SKIP() << "this CPU has no AVX2 + FMA + F16C, or QJOULE_FORCE_SCALAR is set";
  }
  test::ScopedIsa scoped(kernels::WeightOnlyIsa::avx2);
  EXPECT_TRUE(kernels::x16_avx2_decode_available(kernels::WeightOnlyIsa::avx2));
  EXPECT_FALSE(kernels::x16_avx2_decode_available(kernels::WeightOnlyIsa::avx512));
  EXPECT_FALSE(kernels::x16_avx2_decode_available(kernels::WeightOnlyIsa::scalar));
  test::ScopedWeightOnlyDecode decode("x16");
  std::vector<float> w(4 * 96, 0.25f);
  EXPECT_EQ(kernels::make_linear_int4(w.data(), nullptr, 4, 96, {32, true, false}, "t")->kernel_path(),
            "qjoule:avx2:int4_x16,m>4:qjoule:avx2:int4_f32");
  EXPECT_EQ(kernels::make_linear_nf4(w.data(), nullptr, 4, 96, {true}, "t")->kernel_path(),
            "qjoule:avx2:nf4dq_x16,m>4:qjoule:avx2:nf4dq_f32");
  EXPECT_EQ(nf4_path(), "qjoule:avx2:nf4_x16,m>4:qjoule:avx2:nf4_f32");
  EXPECT_EQ(kernels::make_linear_mxfp4(w.data(), nullptr, 4, 96, "t")->kernel_path(),
            "qjoule:avx2:mxfp4_x16,m>4:qjoule:avx2:mxfp4_f32");
  EXPECT_EQ(kernels::make_linear_nvfp4(w.data(), nullptr, 4, 96, "t")->kernel_path(),
            "qjoule:avx2:nvfp4_x16,m>4:qjoule:avx2:nvfp4_f32");
  EXPECT_EQ(kernels::make_linear_w8(w.data(), nullptr, 4, 96, "t")->kernel_path(),
            "qjoule:avx2:w8_x16,m>4:qjoule:avx2:w8_f32");
  // int4:a8 keeps its INT8 kernel.
  EXPECT_EQ(kernels::make_linear_int4(w.data(), nullptr, 4, 96, {32, false, true}, "t")->kernel_path(),
            kernels::int4_s8_kernel_path(kernels::WeightOnlyIsa::avx2));
}
