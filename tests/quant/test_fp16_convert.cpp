// Scalar FP16 conversion vs the F16C instructions. Budget: bit-exact (NaN: both NaN).
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include <gtest/gtest.h>

#include "qjoule/quant/fp16_convert.h"

namespace {

using qjoule::quant::fp16_bits_to_fp32;
using qjoule::quant::fp32_to_fp16_bits;

__attribute__((target("f16c"))) uint16_t f16c_encode(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
__attribute__((target("f16c"))) float f16c_decode(uint16_t h) { return _cvtsh_ss(h); }

bool has_f16c() { return __builtin_cpu_supports("f16c") != 0; }

void expect_encode_matches(float f) {
  const uint16_t want = f16c_encode(f), got = fp32_to_fp16_bits(f);
  if (std::isnan(f)) {
    EXPECT_TRUE((got & 0x7C00u) == 0x7C00u && (got & 0x3FFu) != 0) << std::hex << std::bit_cast<uint32_t>(f);
    return;
  }
  ASSERT_EQ(got, want) << "f=" << f << " bits=0x" << std::hex << std::bit_cast<uint32_t>(f);
}

TEST(Fp16Convert, DecodeMatchesF16cOnEveryPattern) {
  if (!has_f16c()) GTEST_SKIP() << "CPU without F16C";
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    const float want = f16c_decode(static_cast<uint16_t>(h)), got = fp16_bits_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << "h=0x" << std::hex << h;
    }
  }
}

TEST(Fp16Convert, EncodeMatchesF16cAtEveryFp16ValueItsNeighboursAndTies) {
  if (!has_f16c()) GTEST_SKIP() << "CPU without F16C";
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    const float v = f16c_decode(static_cast<uint16_t>(h));
    if (std::isnan(v) || std::isinf(v)) continue;
    const uint32_t b = std::bit_cast<uint32_t>(v);
    // the value itself, its FP32 neighbours, and the midpoints (ties) to the next FP16 value
    for (uint32_t delta : {0u, 1u, 0x0FFFu, 0x1000u, 0x1001u}) expect_encode_matches(std::bit_cast<float>(b + delta));
    if ((b & 0x7FFFFFFFu) != 0) expect_encode_matches(std::bit_cast<float>(b - 1));
  }
  // FP16 subnormal range, FP32 subnormals, overflow boundary, specials
  for (float f : {0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, 0x1.ffcp-15f, 1e-40f, -1e-40f, 65504.0f, 65519.0f, 65520.0f,
                  -65520.0f, 1e30f, INFINITY, -INFINITY, NAN})
    expect_encode_matches(f);
}

TEST(Fp16Convert, EncodeMatchesF16cOnRandomFloats) {
  if (!has_f16c()) GTEST_SKIP() << "CPU without F16C";
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) expect_encode_matches(std::bit_cast<float>(static_cast<uint32_t>(rng())));
}

TEST(Fp16Convert, KnownValues) {
  EXPECT_EQ(fp32_to_fp16_bits(1.0f), 0x3C00u);
  EXPECT_EQ(fp32_to_fp16_bits(-2.0f), 0xC000u);
  EXPECT_EQ(fp32_to_fp16_bits(65504.0f), 0x7BFFu);
  EXPECT_EQ(fp32_to_fp16_bits(65520.0f), 0x7C00u);  // rounds to +Inf
  EXPECT_EQ(fp32_to_fp16_bits(0x1p-24f), 0x0001u);  // smallest subnormal
  EXPECT_EQ(fp32_to_fp16_bits(0x1p-25f), 0x0000u);  // tie to even: 0
  EXPECT_EQ(fp16_bits_to_fp32(0x0001u), 0x1p-24f);
  EXPECT_EQ(fp16_bits_to_fp32(0x3555u), 0.333251953125f);
}

}  // namespace
