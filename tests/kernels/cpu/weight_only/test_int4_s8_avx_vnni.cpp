// int4:a8's AVX-VNNI kernel (one vpdpbusd a 32-block on 256-bit registers, gemm_int4_s8_avx_vnni) against the
// AVX2 kernel (vpmaddubsw + vpmaddwd): both take exact s32 sums of the same products, so the outputs are the
// same bits. Where the CPU has no AVX-VNNI (AVX-512 CPUs before Sapphire Rapids and Zen 5, e.g. Zen 4), the
// same code runs on the EVEX form of vpdpbusd (AVX512_VNNI + VL): the kernels differ by the one instruction.
// Odd shapes: rows 1-5 a pass, outputs that do not fill a chunk of 16, every group size, sym and asym.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/gemv_u8s8s32_avx512_vnni.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "qjoule/quant/quantize_int4.h"
#include "weight_only_test_util.h"

namespace {

namespace k = qjoule::kernels;
namespace q = qjoule::quant;

template <class Block>
using Gemm = void (*)(const q::BlockMatrix<Block>&, const float*, const float*, int64_t, float*, std::string_view);

template <class Block>
void expect_same_bits_as_avx2(Gemm<Block> vnni, const char* what) {
  for (const int64_t m : {1, 2, 3, 4, 5}) {
    for (const auto& [out, in] : {std::pair<int64_t, int64_t>{7, 128}, {33, 384}, {16, 256}}) {
      SCOPED_TRACE(testing::Message() << what << " G=" << Block::kSize << " m " << m << " out " << out << " in " << in);
      const auto x = qjoule::test::normal_vector(size_t(m * in), unsigned(m + out));
      const auto w = qjoule::test::normal_vector(size_t(out * in), unsigned(in), 0.05f);
      const auto b = qjoule::test::normal_vector(size_t(out), 3);
      const auto packed = q::quantize_matrix_int4<Block>(w.data(), out, in, "t.weight");
      std::vector<float> want(size_t(m * out)), got(want.size());
      k::detail::gemm_int4_s8_avx2<Block>(packed, b.data(), x.data(), m, want.data(), "t");
      vnni(packed, b.data(), x.data(), m, got.data(), "t");
      EXPECT_EQ(got, want);
    }
  }
}

template <template <int> class Block>
void expect_every_group(bool real) {
  if (real) {
    expect_same_bits_as_avx2<Block<32>>(&k::detail::gemm_int4_s8_avx_vnni<Block<32>>, "avx_vnni");
    expect_same_bits_as_avx2<Block<64>>(&k::detail::gemm_int4_s8_avx_vnni<Block<64>>, "avx_vnni");
    expect_same_bits_as_avx2<Block<128>>(&k::detail::gemm_int4_s8_avx_vnni<Block<128>>, "avx_vnni");
  } else {
    expect_same_bits_as_avx2<Block<32>>(&k::detail::gemm_int4_s8_avx512vl_vnni_for_test<Block<32>>, "evex");
    expect_same_bits_as_avx2<Block<64>>(&k::detail::gemm_int4_s8_avx512vl_vnni_for_test<Block<64>>, "evex");
    expect_same_bits_as_avx2<Block<128>>(&k::detail::gemm_int4_s8_avx512vl_vnni_for_test<Block<128>>, "evex");
  }
}

TEST(Int4S8AvxVnni, GivesTheAvx2KernelsBitsOnEveryGroupAndShape) {
  const bool real = k::detail::cpu_supports_avx_vnni();
  if (!real && !k::cpu_supports_avx512_vnni()) GTEST_SKIP() << "this CPU has neither AVX-VNNI nor AVX512_VNNI";
  expect_every_group<q::BlockInt4Sym>(real);
  expect_every_group<q::BlockInt4Asym>(real);
}

// At the AVX2 level the a8 layer runs the AVX-VNNI kernel where the CPU has it, and says so.
TEST(Int4S8AvxVnni, TheAvx2LevelNamesTheKernelItRuns) {
  qjoule::test::ScopedIsa scoped(k::WeightOnlyIsa::avx2);
  const auto w = qjoule::test::normal_vector(64 * 128, 1, 0.05f);
  auto lin = k::make_linear_int4(w.data(), nullptr, 64, 128, k::Int4Options{32, false, true}, "t.weight");
  EXPECT_EQ(lin->kernel_path(), k::detail::cpu_supports_avx_vnni() ? "qjoule:avx_vnni:int4_s8" : "qjoule:avx2:int4_s8");
}

}  // namespace
