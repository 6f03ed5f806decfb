// INT4 group-wise quantization, sym and asym, G = 32/64/128 (formats.h "int4").
// Budgets: sym round trip |x − x̂| <= d/2 + (max|x| − 7d)⁺ (the FP16-rounded scale may fall short of
// max/7), asym <= d (the integer zero point shifts the grid by up to d/2); d is the stored FP16 scale.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/error.h"
#include "qjoule/quant/fp16_convert.h"
#include "qjoule/quant/quantize_int4.h"
#include "random_data.h"

namespace {

using namespace qjoule::quant;

template <class Block>
constexpr bool kIsSym = std::is_same_v<Block, BlockInt4Sym<Block::kSize>>;

template <class Block>
void quantize_row(const std::vector<float>& x, std::vector<Block>& blocks) {
  blocks.resize(x.size() / Block::kSize);
  if constexpr (kIsSym<Block>) {
    quantize_row_int4_sym_ref<Block::kSize>(x.data(), static_cast<int64_t>(x.size()), blocks.data(), "t", 0);
  } else {
    quantize_row_int4_asym_ref<Block::kSize>(x.data(), static_cast<int64_t>(x.size()), blocks.data(), "t", 0);
  }
}

template <class Block>
std::vector<float> dequantize_row(const std::vector<Block>& blocks) {
  std::vector<float> y(blocks.size() * Block::kSize);
  if constexpr (kIsSym<Block>) {
    dequantize_row_int4_sym_ref<Block::kSize>(blocks.data(), static_cast<int64_t>(y.size()), y.data());
  } else {
    dequantize_row_int4_asym_ref<Block::kSize>(blocks.data(), static_cast<int64_t>(y.size()), y.data());
  }
  return y;
}

template <class Block>
class QuantizeInt4 : public ::testing::Test {};
using Int4Blocks = ::testing::Types<BlockInt4Sym<32>, BlockInt4Sym<64>, BlockInt4Sym<128>, BlockInt4Asym<32>,
                                    BlockInt4Asym<64>, BlockInt4Asym<128>>;
TYPED_TEST_SUITE(QuantizeInt4, Int4Blocks);

TYPED_TEST(QuantizeInt4, RoundTripWithinBudget) {
  using Block = TypeParam;
  constexpr int G = Block::kSize;
  auto x = qjoule::test::random_vector(G * 6, 11, 0.02f);
  for (int i = 0; i < G; ++i) x[static_cast<size_t>(G + i)] = std::fabs(x[static_cast<size_t>(G + i)]);  // all >= 0
  for (int i = 0; i < G; ++i)
    x[static_cast<size_t>(2 * G + i)] = -std::fabs(x[static_cast<size_t>(2 * G + i)]);  // all <= 0
  std::vector<Block> blocks;
  quantize_row<Block>(x, blocks);
  const auto y = dequantize_row<Block>(blocks);
  for (size_t g = 0; g < blocks.size(); ++g) {
    const float d = fp16_bits_to_fp32(blocks[g].d);
    float amax = 0.0f;
    for (int i = 0; i < G; ++i) amax = std::max(amax, std::fabs(x[g * G + static_cast<size_t>(i)]));
    const float budget = kIsSym<Block> ? d * 0.5f * 1.0001f + std::max(0.0f, amax - 7 * d) : d * 1.0001f;
    for (int i = 0; i < G; ++i) {
      const size_t k = g * G + static_cast<size_t>(i);
      ASSERT_LE(std::fabs(x[k] - y[k]), budget) << "group " << g << " i " << i;
    }
    if constexpr (!kIsSym<Block>) {
      if (g == 1) {
        EXPECT_EQ(blocks[g].zero, 0);  // all >= 0: zero point 0
      }
      if (g == 2) {
        EXPECT_EQ(blocks[g].zero, 15);  // all <= 0: zero point 15
      }
      EXPECT_EQ(blocks[g].reserved, 0);
    }
  }
}

TYPED_TEST(QuantizeInt4, AllZeroGroupHasScaleZeroAndDecodesToExactZeros) {
  using Block = TypeParam;
  std::vector<float> x(Block::kSize * 2, 0.0f);
  x[Block::kSize] = 1.0f;  // second group not zero
  std::vector<Block> blocks;
  quantize_row<Block>(x, blocks);
  EXPECT_EQ(blocks[0].d, 0u);
  const auto y = dequantize_row<Block>(blocks);
  for (int i = 0; i < Block::kSize; ++i) EXPECT_EQ(std::bit_cast<uint32_t>(y[static_cast<size_t>(i)]), 0u) << i;
}

TYPED_TEST(QuantizeInt4, ZeroEncodesExactlyAndPlusMinusMaxHitTheEnds) {
  using Block = TypeParam;
  std::vector<float> x(Block::kSize, 0.25f);
  x[0] = 3.0f;
  x[1] = -3.0f;
  x[2] = 0.0f;
  std::vector<Block> blocks;
  quantize_row<Block>(x, blocks);
  const auto y = dequantize_row<Block>(blocks);
  const float d = fp16_bits_to_fp32(blocks[0].d);
  EXPECT_EQ(y[2], 0.0f);
  if constexpr (kIsSym<Block>) {
    EXPECT_EQ(int4_nibble(blocks[0].qs, 0), 15);  // q = +7
    EXPECT_EQ(int4_nibble(blocks[0].qs, 1), 1);   // q = -7
    EXPECT_EQ(y[0], 7 * d);
    EXPECT_EQ(y[1], -7 * d);
    EXPECT_NEAR(y[0], 3.0f, 3.0f * 2e-3f);  // only the FP16 rounding of the scale
  } else {
    // [-3, 3] on 16 levels with an integer zero point (z = 8): the ends land within one step d
    EXPECT_EQ(int4_nibble(blocks[0].qs, 0), 15);
    EXPECT_EQ(int4_nibble(blocks[0].qs, 1), 0);
    EXPECT_NEAR(y[0], 3.0f, d);
    EXPECT_NEAR(y[1], -3.0f, d);
  }
}

TYPED_TEST(QuantizeInt4, SingleOutlierSurvives) {
  using Block = TypeParam;
  std::vector<float> x(Block::kSize, 0.01f);
  x[5] = 100.0f;
  std::vector<Block> blocks;
  quantize_row<Block>(x, blocks);
  const auto y = dequantize_row<Block>(blocks);
  EXPECT_NEAR(y[5], 100.0f, 100.0f * 2e-3f);
}

TYPED_TEST(QuantizeInt4, DenormalsDecodeToZeroWithoutNan) {
  using Block = TypeParam;
  std::vector<float> x(Block::kSize, 1e-40f);
  x[3] = -2e-41f;
  std::vector<Block> blocks;
  quantize_row<Block>(x, blocks);
  for (float v : dequantize_row<Block>(blocks)) {
    EXPECT_TRUE(std::isfinite(v));
    EXPECT_LE(std::fabs(v), 1e-40f);
  }
}

TYPED_TEST(QuantizeInt4, ScaleBeyondFp16RangeIsAnErrorNamingTheTensor) {
  using Block = TypeParam;
  std::vector<float> w(Block::kSize * 2, 1.0f);
  w[Block::kSize + 3] = 1e7f;
  EXPECT_THAT([&] { quantize_matrix_int4<Block>(w.data(), 1, Block::kSize * 2, "enc.ffn.lin1.weight"); },
              ::testing::ThrowsMessage<qjoule::Error>(
                  ::testing::AllOf(::testing::HasSubstr("enc.ffn.lin1.weight"), ::testing::HasSubstr("FP16 range"))));
}

TYPED_TEST(QuantizeInt4, NanIsRejectedNamingTensorAndIndex) {
  using Block = TypeParam;
  std::vector<float> w(Block::kSize * 3, 1.0f);
  w[2 * Block::kSize + 7] = std::nanf("");
  EXPECT_THAT([&] { quantize_matrix_int4<Block>(w.data(), 3, Block::kSize, "q.weight"); },
              ::testing::ThrowsMessage<qjoule::Error>(
                  ::testing::AllOf(::testing::HasSubstr("q.weight"), ::testing::HasSubstr("NaN at [2, 7]"))));
}

// Any width (formats.h): a row's last group holds t < G weights; its scale is that of its t weights
// alone, its padding codes decode to exactly 0, and the row decodes as a zero-padded row would.
TYPED_TEST(QuantizeInt4, APartialLastGroupHasTheScaleOfWhatItHoldsAndZeroPadding) {
  using Block = TypeParam;
  constexpr int G = Block::kSize;
  for (int64_t cols : {int64_t{G + 16}, int64_t{2 * G + 1}, int64_t{331}, int64_t{G - 1}}) {
    const int64_t rows = 3, nb = (cols + G - 1) / G, t = cols - (nb - 1) * G;
    auto w = qjoule::test::random_vector(size_t(rows * cols), 9);
    w[size_t(cols - 1)] = 3.0f;  // the largest weight of row 0 sits in its partial group
    const auto m = quantize_matrix_int4<Block>(w.data(), rows, cols, "k.weight");
    ASSERT_EQ(m.blocks_per_row(), nb);
    ASSERT_EQ(m.padded_cols(), nb * G);
    EXPECT_EQ(m.bytes(), size_t(rows * nb) * sizeof(Block));
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> padded(size_t(nb * G), 0.0f);
      std::copy(w.begin() + r * cols, w.begin() + (r + 1) * cols, padded.begin());
      std::vector<Block> expected;
      quantize_row<Block>(padded, expected);
      for (int64_t g = 0; g < nb; ++g) {
        const Block& got = m.row(r)[g];
        EXPECT_EQ(got.d, expected[size_t(g)].d) << "row " << r << " group " << g;
        EXPECT_EQ(0, std::memcmp(got.qs, expected[size_t(g)].qs, sizeof got.qs)) << "row " << r << " group " << g;
      }
      const Block& last = m.row(r)[nb - 1];
      float amax = 0.0f, lo = 0.0f, hi = 0.0f;
      for (int64_t c = (nb - 1) * G; c < cols; ++c) {
        amax = std::max(amax, std::fabs(w[size_t(r * cols + c)]));
        lo = std::min(lo, w[size_t(r * cols + c)]);
        hi = std::max(hi, w[size_t(r * cols + c)]);
      }
      const float d = kIsSym<Block> ? amax / 7.0f : (hi - lo) / 15.0f;
      EXPECT_EQ(last.d, fp32_to_fp16_bits(d)) << "row " << r;
      int zero = kInt4SymZero;
      if constexpr (!kIsSym<Block>) zero = last.zero;
      for (int64_t i = t; i < G; ++i) EXPECT_EQ(int4_nibble(last.qs, i), zero) << "padding " << i << " of row " << r;
      std::vector<float> back(size_t(cols) + 1, -1.0f);  // one sentinel past the row: dequantize writes cols values
      if constexpr (kIsSym<Block>) {
        dequantize_row_int4_sym_ref<G>(m.row(r), cols, back.data());
      } else {
        dequantize_row_int4_asym_ref<G>(m.row(r), cols, back.data());
      }
      EXPECT_EQ(back[size_t(cols)], -1.0f);
      EXPECT_LE(std::fabs(back[size_t(cols - 1)] - w[size_t(r * cols + cols - 1)]), fp16_bits_to_fp32(last.d));
    }
  }
}

TYPED_TEST(QuantizeInt4, MatrixLayoutAndBitsPerWeight) {
  using Block = TypeParam;
  constexpr int G = Block::kSize;
  const auto w = qjoule::test::random_vector(3 * G * 2, 5);
  const auto m = quantize_matrix_int4<Block>(w.data(), 3, G * 2, "t");
  EXPECT_EQ(m.blocks.size(), 6u);
  EXPECT_EQ(m.bytes(), 6 * sizeof(Block));
  const double expected_bpw = kIsSym<Block> ? 4.0 + 16.0 / G : 4.0 + 32.0 / G;
  EXPECT_DOUBLE_EQ(bits_per_weight<Block>(), expected_bpw);
}

// Nibble order, spelled out: element 2i in the HIGH nibble of byte i, element 2i+1 in the low one.
TEST(QuantizeInt4NibbleOrder, FirstElementOfEachPairIsTheHighNibble) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 15 - 7);  // q = i%15 − 7: d = 1
  std::vector<BlockInt4Sym<32>> blocks;
  quantize_row<BlockInt4Sym<32>>(x, blocks);
  EXPECT_EQ(fp16_bits_to_fp32(blocks[0].d), 1.0f);
  // u = q + 8 = i % 15 + 1: bytes (u0 << 4) | u1 = 0x12, 0x34, ..., 0xEF, then i = 14, 15 → u = 15, 1 → 0xF1
  const uint8_t expected[16] = {0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC, 0xDE, 0xF1,
                                0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, 0x12};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(blocks[0].qs[i], expected[i]) << "byte " << i;
}

}  // namespace
