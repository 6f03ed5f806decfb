// The panel products' padding (panel_matmul.h): which padded shape a product runs on when oneDNN sends
// its real shape to another implementation, and that the padded product equals the real one; and
// ParallelErrors, which brings an exception out of an OpenMP region instead of ending the process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/weight_only/panel_matmul.h"
#include "kernels/cpu/parallel_errors.h"

namespace qjoule::kernels::avx512 {
namespace {

using Tried = std::vector<std::pair<int64_t, int64_t>>;

// oneDNN 2.6's AMX BF16 matmul turns down "small shapes" (at most 32 rows with at most 256 outputs for
// the panel's n columns, or a depth of at most 16): they run on the AVX-512 BF16 kernel instead.
auto amx_rule(int64_t n, Tried& tried) {
  return [n, &tried](int64_t m, int64_t k) {
    tried.emplace_back(m, k);
    return !((m <= 32 && m * n <= 256) || k <= 16);
  };
}

TEST(PanelPadding, PadsRowsThenDepthUntilTheProductRunsWhereThePathSays) {
  Tried tried;
  auto pad = panel_padding(64, 256, amx_rule(64, tried));  // a shape AMX takes as it is
  ASSERT_TRUE(pad);
  EXPECT_EQ(pad->m, 64);
  EXPECT_EQ(pad->k, 256);
  EXPECT_EQ(tried, (Tried{{64, 256}}));
  tried.clear();
  pad = panel_padding(6, 32, amx_rule(16, tried));  // the 6 x 32 x 16 product seen on an AMX Xeon
  ASSERT_TRUE(pad);
  EXPECT_EQ(pad->m, kPanelPadRows);
  EXPECT_EQ(pad->k, 32);
  tried.clear();
  pad = panel_padding(6, 16, amx_rule(16, tried));  // both too small: both padded
  ASSERT_TRUE(pad);
  EXPECT_EQ(pad->m, kPanelPadRows);
  EXPECT_EQ(pad->k, kPanelPadDepth);
  EXPECT_EQ(tried, (Tried{{6, 16}, {33, 16}, {6, 32}, {33, 32}}));
}

TEST(PanelPadding, NoPaddingThatWorksIsNulloptAndNoShapeIsTriedTwice) {
  Tried tried;
  const auto never = [&tried](int64_t m, int64_t k) {
    tried.emplace_back(m, k);
    return false;
  };
  EXPECT_FALSE(panel_padding(40, 64, never));  // nothing to pad: one shape, tried once
  EXPECT_EQ(tried, (Tried{{40, 64}}));
  tried.clear();
  EXPECT_FALSE(panel_padding(5, 64, never));
  EXPECT_EQ(tried, (Tried{{5, 64}, {33, 64}}));
}

// y[:, 0..n) of a strided y (ldy > n) by the real shape and by a padded one: the same values, and the
// columns right of the panel untouched.
template <class T, class Product, class Padded>
void expect_padded_equals_real(Product product, Padded padded, T (*convert)(float)) {
  constexpr int64_t m = 6, k = 20, n = 16, ldy = 24;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<T> a(m * k), panel(n * k);
  std::vector<float> bias(n);
  for (auto& v : a) v = convert(dist(rng));
  for (auto& v : panel) v = convert(dist(rng));
  for (auto& v : bias) v = dist(rng);
  std::vector<float> real(m * ldy, -7.0f), pad(m * ldy, -7.0f);
  product(a.data(), m, k, panel.data(), n, bias.data(), real.data(), ldy);
  padded(a.data(), m, k, panel.data(), n, bias.data(), pad.data(), ldy, PanelPadding{kPanelPadRows, kPanelPadDepth});
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < ldy; ++j) {
      const float want = real[i * ldy + j];
      if (j >= n) {
        EXPECT_EQ(pad[i * ldy + j], -7.0f) << "column " << j << " is not the panel's";
      }
      EXPECT_NEAR(pad[i * ldy + j], want, 1e-5f * (1.0f + std::fabs(want))) << "row " << i << ", column " << j;
    }
  }
}

TEST(PanelMatmul, FP32ProductOnZeroPaddedOperandsEqualsTheRealShape) {
  expect_padded_equals_real<float>(
      f32_panel_matmul, f32_panel_matmul_padded, +[](float v) { return v; });
}

TEST(PanelMatmul, BF16ProductOnZeroPaddedOperandsEqualsTheRealShape) {
  if (!bf16_panel_available()) GTEST_SKIP() << "no AVX512_BF16 matmul in oneDNN on this CPU";
  expect_padded_equals_real<uint16_t>(
      bf16_panel_matmul, bf16_panel_matmul_padded, +[](float v) { return f32_to_bf16_bits(v); });
}

TEST(PanelScratch, ReleasingTheKeptPanelsFreesThemAndTheNextProductIsTheSame) {
  // A whole-panel product (256 rows, a 1024 x 1024 FP32 panel of 4 MiB kept by the calling thread).
  constexpr int64_t m = 256, N = 1024, K = 1024;
  std::vector<float> a(static_cast<size_t>(m * K)), y1(static_cast<size_t>(m * N)), y2(y1.size());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : a) v = u(rng);
  const auto fill = [](int64_t begin, int64_t end, float* rows) {
    for (int64_t o = begin; o < end; ++o)
      for (int64_t k = 0; k < K; ++k) rows[(o - begin) * K + k] = static_cast<float>((o * 7 + k * 3) % 11) - 5.0f;
  };
  ASSERT_TRUE(whole_panel_applies(m, N, K));
  f32_panel_gemm(a.data(), m, N, K, nullptr, y1.data(), fill);
  const auto allocated = [] {
    const struct mallinfo2 i = ::mallinfo2();
    return i.uordblks + i.hblkhd;  // in use on the heaps and in mapped blocks
  };
  const size_t before = allocated();
  release_panel_scratch();
#if defined(__SANITIZE_ADDRESS__)
  (void)before;  // ASan's allocator does not report to mallinfo2: the memory check is the release build's
#else
  EXPECT_GE(before - allocated(), static_cast<size_t>(N * K) * sizeof(float)) << "the 4 MiB whole panel is freed";
#endif
  f32_panel_gemm(a.data(), m, N, K, nullptr, y2.data(), fill);
  EXPECT_EQ(y1, y2);
}

TEST(ParallelErrors, AnExceptionInsideAnOpenMpLoopIsRethrownAfterIt) {
  ParallelErrors errors;
  std::vector<int> ran(64, 0);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < 64; ++i) {
    errors.run([&] {
      ran[static_cast<size_t>(i)] = 1;
      if (i == 17) throw std::runtime_error("panel 17 failed");
    });
  }
  EXPECT_THAT([&] { errors.rethrow(); },
              ::testing::ThrowsMessage<std::runtime_error>(::testing::HasSubstr("panel 17 failed")));
  EXPECT_EQ(std::count(ran.begin(), ran.end(), 1), 64) << "the other iterations still ran";
  ParallelErrors none;
  EXPECT_NO_THROW(none.rethrow());
}

}  // namespace
}  // namespace qjoule::kernels::avx512
