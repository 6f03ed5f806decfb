// The FP4 formats (formats.h "mxfp4 / nvfp4"): E2M1 on its standard grid, every FP8 E4M3 value, and
// MXFP4 / NVFP4 codes, scales and decoded values bit for bit equal to a NumPy implementation of the OCP and
// NVIDIA definitions (tools/make_fp4_reference.py: nearest value searched in each value list, not this
// code's arithmetic). Budgets: codes, scales and decoded values exact; a round trip within half a grid step
// of the block's scale (E2M1's largest gap is 2, from 4 to 6) where nothing saturates.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "error_of.h"
#include "qjoule/quant/import_mxfp4.h"
#include "qjoule/quant/quantize_fp4.h"
#include "test_paths.h"

namespace {

using namespace qjoule::quant;

nlohmann::json reference() {
  std::ifstream in(qjoule::test::fixtures_dir() / "fp4" / "reference.json");
  return nlohmann::json::parse(in);
}

uint8_t code_at(const uint8_t* qs, int64_t i) { return i % 2 == 0 ? qs[i / 2] >> 4 : qs[i / 2] & 0x0F; }

TEST(Fp4Elements, E2M1IsTheStandardGrid) {
  for (int code = 0; code < 16; ++code) {  // s ee m: (−1)^s · 2^(e − 1) · (1 + m / 2), or 0.5 · m for e = 0
    const int s = code >> 3, e = (code >> 1) & 3, m = code & 1;
    const double v = (e == 0 ? 0.5 * m : std::ldexp(1.0 + 0.5 * m, e - 1)) * (s ? -1 : 1);
    EXPECT_EQ(kE2M1Table[static_cast<std::size_t>(code)], static_cast<float>(v)) << code;
    if (code != 8) {
      EXPECT_EQ(e2m1_code(static_cast<float>(v)), code) << "every value encodes to its own code";
    }
  }
  EXPECT_EQ(e2m1_code(-0.0f), 0) << "−0 as +0";
  EXPECT_EQ(e2m1_code(100.0f), 7) << "saturates";
  EXPECT_EQ(e2m1_code(-0.2f), 0);
}

TEST(Fp4Elements, E4M3EveryFiniteValueAndItsRounding) {
  const auto values = reference()["e4m3_values"];
  ASSERT_EQ(values.size(), 127u);
  for (int code = 0; code < 127; ++code) {
    const float v = values[static_cast<std::size_t>(code)].get<float>();
    EXPECT_EQ(e4m3_value(static_cast<uint8_t>(code)), v) << code;
    EXPECT_EQ(e4m3_bits(v), code) << v;
  }
  EXPECT_EQ(e4m3_value(0x7E), kE4M3Max);
  EXPECT_TRUE(std::isnan(e4m3_value(0x7F)));
  EXPECT_EQ(e4m3_bits(1000.0f), 0x7E) << "saturates at 448";
  EXPECT_EQ(e4m3_bits(1.0625f), 0x38) << "1 + 1/16: a tie, to the even mantissa (1.0)";
  EXPECT_EQ(e4m3_bits(1.1875f), 0x3A) << "1 + 3/16: a tie, to the even mantissa (1.25)";
  EXPECT_EQ(e4m3_bits(std::ldexp(1.0f, -10)), 0) << "half the smallest subnormal: a tie, to 0";
  EXPECT_EQ(e8m0_value(127), 1.0f);
  EXPECT_EQ(e8m0_value(0), std::ldexp(1.0f, -127));
  EXPECT_TRUE(std::isnan(e8m0_value(255)));
}

TEST(Fp4Formats, Mxfp4AndNvfp4EqualTheNumPyDefinitions) {
  const auto ref = reference();
  const auto rows = ref["rows"].get<int64_t>(), cols = ref["cols"].get<int64_t>();
  const auto w = ref["w"].get<std::vector<float>>();
  std::vector<float> back(static_cast<std::size_t>(cols));

  const Mxfp4Matrix mx = quantize_matrix_mxfp4(w.data(), rows, cols, "w");
  const auto& mref = ref["mxfp4"];
  ASSERT_EQ(mx.blocks.size(), mref["scales"].size());
  for (std::size_t b = 0; b < mx.blocks.size(); ++b) EXPECT_EQ(mx.blocks[b].scale_e8m0, mref["scales"][b]) << b;
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row_mxfp4_ref(mx.row(r), cols, back.data());
    for (int64_t c = 0; c < cols; ++c) {
      const auto i = static_cast<std::size_t>(r * cols + c);
      EXPECT_EQ(code_at(mx.row(r)[c / kMxfp4BlockSize].qs, c % kMxfp4BlockSize), mref["codes"][i]) << r << "," << c;
      EXPECT_EQ(back[static_cast<std::size_t>(c)], mref["values"][i].get<float>()) << r << "," << c;
    }
  }

  const Nvfp4Matrix nv = quantize_matrix_nvfp4(w.data(), rows, cols, "w");
  const auto& nref = ref["nvfp4"];
  EXPECT_EQ(nv.tensor_scale, nref["tensor_scale"].get<float>());
  ASSERT_EQ(nv.blocks.size(), nref["scales"].size());
  for (std::size_t b = 0; b < nv.blocks.size(); ++b) EXPECT_EQ(nv.blocks[b].scale_e4m3, nref["scales"][b]) << b;
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row_nvfp4_ref(nv.row(r), cols, nv.tensor_scale, back.data());
    for (int64_t c = 0; c < cols; ++c) {
      const auto i = static_cast<std::size_t>(r * cols + c);
      EXPECT_EQ(code_at(nv.row(r)[c / kNvfp4BlockSize].qs, c % kNvfp4BlockSize), nref["codes"][i]) << r << "," << c;
      EXPECT_EQ(back[static_cast<std::size_t>(c)], nref["values"][i].get<float>()) << r << "," << c;
    }
  }
  EXPECT_EQ(mx.bytes(), 9u * sizeof(BlockMxfp4));
  EXPECT_EQ(nv.bytes(), 15u * sizeof(BlockNvfp4) + sizeof(float));
  EXPECT_DOUBLE_EQ(kMxfp4BitsPerWeight, 4.25);
  EXPECT_DOUBLE_EQ(kNvfp4BitsPerWeight, 4.5);
}

TEST(Fp4Formats, ARoundTripIsWithinHalfAStepOfTheBlocksScale) {
  std::vector<float> w(256), back(256);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37f * static_cast<float>(i)) * 0.02f;
  const Mxfp4Matrix mx = quantize_matrix_mxfp4(w.data(), 1, 256, "w");
  dequantize_row_mxfp4_ref(mx.row(0), 256, back.data());
  for (std::size_t i = 0; i < w.size(); ++i) {
    const float scale = e8m0_value(mx.blocks[i / kMxfp4BlockSize].scale_e8m0);
    // |w| / X < 8; above 6 it saturates (at most 2 X off), below, half the local gap: at most 1 X.
    EXPECT_LE(std::fabs(w[i] - back[i]), 2.0f * scale) << i;
  }
  const Nvfp4Matrix nv = quantize_matrix_nvfp4(w.data(), 1, 256, "w");
  dequantize_row_nvfp4_ref(nv.row(0), 256, nv.tensor_scale, back.data());
  for (std::size_t i = 0; i < w.size(); ++i) {
    const float scale = e4m3_value(nv.blocks[i / kNvfp4BlockSize].scale_e4m3) * nv.tensor_scale;
    // amax_b / 6 rounds to E4M3 (within 1/16): |w| / scale <= 6.4, so at most half of the 4..6 gap + 0.4.
    EXPECT_LE(std::fabs(w[i] - back[i]), 1.4f * scale) << i;
  }
}

TEST(Fp4Formats, ANonFiniteWeightIsOneLine) {
  std::vector<float> w(40, 0.5f);
  w[33] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT(qjoule::test::error_of([&] { quantize_matrix_mxfp4(w.data(), 2, 20, "layers.0.mlp.experts.w1"); }),
              ::testing::HasSubstr("tensor 'layers.0.mlp.experts.w1': NaN at [1, 13]; expected finite weights to "
                                   "quantize to mxfp4"));
  w[33] = std::numeric_limits<float>::infinity();
  EXPECT_THAT(qjoule::test::error_of([&] { quantize_matrix_nvfp4(w.data(), 2, 20, "w2"); }),
              ::testing::HasSubstr("tensor 'w2': +Inf at [1, 13]; expected finite weights to quantize to nvfp4"));
}

}  // namespace

namespace {

using namespace qjoule::quant;

// A checkpoint's MXFP4 tensor (gpt-oss's blocks and scales) from qjoule's own: the same codes, element 2i
// in the low nibble.
void to_checkpoint(const Mxfp4Matrix& m, std::vector<uint8_t>& blocks, std::vector<uint8_t>& scales) {
  for (const auto& b : m.blocks) {
    scales.push_back(b.scale_e8m0);
    for (const uint8_t byte : b.qs) blocks.push_back(static_cast<uint8_t>((byte << 4) | (byte >> 4)));
  }
}

TEST(Fp4Import, ACheckpointsMxfp4TensorReadsAsQjoulesLayout) {
  std::vector<float> w(2 * 3 * 64);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.11f * static_cast<float>(i)) * 0.3f;
  const Mxfp4Matrix mine = quantize_matrix_mxfp4(w.data(), 6, 64, "w");
  std::vector<uint8_t> blocks, scales;
  to_checkpoint(mine, blocks, scales);
  // As a 3-D expert tensor [experts 2, rows 3, groups 2, 16]: 6 rows of 64.
  const std::vector<int64_t> bshape = {2, 3, 2, 16}, sshape = {2, 3, 2};
  const Mxfp4Matrix read = import_mxfp4_tensor("experts.gate_up_proj", blocks.data(), bshape, scales.data(), sshape);
  ASSERT_EQ(read.rows, 6);
  ASSERT_EQ(read.cols, 64);
  for (std::size_t b = 0; b < mine.blocks.size(); ++b) {
    EXPECT_EQ(read.blocks[b].scale_e8m0, mine.blocks[b].scale_e8m0);
    EXPECT_TRUE(std::equal(std::begin(read.blocks[b].qs), std::end(read.blocks[b].qs), std::begin(mine.blocks[b].qs)));
  }
  // transformers' decode: element 2i from the low nibble, 2i + 1 from the high one, times 2^(s − 127).
  std::vector<float> back(64);
  dequantize_row_mxfp4_ref(read.row(4), 64, back.data());
  for (int i = 0; i < 64; ++i) {
    const std::size_t b = 4 * 2 + static_cast<std::size_t>(i / 32);
    const uint8_t byte = blocks[b * 16 + static_cast<std::size_t>(i % 32 / 2)];
    const uint8_t code = i % 2 == 0 ? byte & 0x0F : byte >> 4;
    EXPECT_EQ(back[static_cast<std::size_t>(i)], std::ldexp(kE2M1Table[code], scales[b] - 127)) << i;
  }
}

TEST(Fp4Import, AMalformedTensorIsOneLine) {
  std::vector<uint8_t> blocks(2 * 16, 0x11), scales(2, 127);
  const std::vector<int64_t> bshape = {2, 1, 16}, sshape = {2, 1};
  const auto error = [&](std::vector<int64_t> b, std::vector<int64_t> s) {
    return qjoule::test::error_of(
        [&] { import_mxfp4_tensor("mlp.experts.down_proj", blocks.data(), b, scales.data(), s); });
  };
  EXPECT_THAT(
      error({2, 1, 8}, sshape),
      ::testing::HasSubstr("tensor 'mlp.experts.down_proj_blocks': shape [2, 1, 8], expected [..., groups, 16]"));
  EXPECT_THAT(error(bshape, {2, 2}),
              ::testing::HasSubstr("tensor 'mlp.experts.down_proj_scales': shape [2, 2], expected "
                                   "[2, 1] (one E8M0 scale a block of"));
  scales[1] = 0xFF;
  EXPECT_THAT(error(bshape, sshape),
              ::testing::HasSubstr("tensor 'mlp.experts.down_proj_scales': NaN scale (E8M0 0xFF) "
                                   "at [1, 0]; expected a power of two"));
}

}  // namespace
