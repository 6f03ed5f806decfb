// A calibration on disk (model/calibration/calibrated_int4_file.h): what is written reads back equal, byte for byte
// (codes of every layout, a8, biases, norms with and without β, the method and sizes), and a file of
// another calibration, another kind or a damaged one is one line naming it.
#include <gmock/gmock.h>

#include <cstring>
#include <fstream>

#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/calibration/calibrated_int4_file.h"
#include "qjoule/quant/quantize_int4.h"
#include "test_paths.h"

namespace {

using namespace qjoule;
using ::testing::HasSubstr;

template <class Block>
quant::BlockMatrix<Block> codes(int64_t rows, int64_t cols, float scale) {
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = scale * static_cast<float>(int(i * 7919 % 23) - 11);
  return quant::quantize_matrix_int4<Block>(w.data(), rows, cols, "t");
}

model::CalibratedInt4 sample() {
  model::CalibratedInt4 c;
  c.codes.emplace("a.q_proj", codes<quant::BlockInt4Sym<32>>(3, 70, 0.01f));
  c.codes.emplace("a.v_proj", codes<quant::BlockInt4Asym<128>>(2, 300, 0.02f));
  c.codes.emplace("a.o_proj", codes<quant::BlockInt4Sym<64>>(4, 64, 0.03f));
  c.int8_activations.insert("a.q_proj");
  c.biases["a.v_proj"] = {0.5f, -0.25f};
  c.norms["a.input_layernorm"] = model::LayerNormParams{"a.input_layernorm", {1.0f, 2.0f, 3.0f}, {}};
  c.norms["a.ln_2"] = model::LayerNormParams{"a.ln_2", {1.5f}, {-0.5f}};
  c.method = "AWQ + GPTQ";
  c.sequences = 8, c.tokens = 500, c.tokens_per_sequence = 64, c.damp = 0.01, c.seconds = 1.25;
  c.bf16_products = true;
  c.round_to_nearest = {"a.o_proj"};                                      // an expert no calibration token reached
  c.fp32_weights["a.block_sparse_moe.gate"] = {0.5f, -2.0f, 4.0f, 1.0f};  // a router AWQ scaled
  return c;
}

TEST(CalibratedInt4File, ReadsBackWhatWasWritten) {
  const auto path = test::temp_dir("calibrated_file") / "c.qjcal";
  const auto c = sample();
  model::write_calibrated_int4(path, c, "id 1");
  const auto back = model::read_calibrated_int4(path, "id 1");
  EXPECT_EQ(back.method, c.method);
  EXPECT_EQ(back.sequences, 8);
  EXPECT_EQ(back.tokens_per_sequence, 64);
  EXPECT_EQ(back.tokens, 500);
  EXPECT_TRUE(back.bf16_products);
  EXPECT_EQ(back.damp, 0.01);
  EXPECT_EQ(back.seconds, 1.25);
  EXPECT_EQ(back.int8_activations, c.int8_activations);
  EXPECT_EQ(back.biases, c.biases);
  EXPECT_EQ(back.round_to_nearest, c.round_to_nearest);
  EXPECT_EQ(back.fp32_weights, c.fp32_weights);
  ASSERT_EQ(back.norms.size(), 2u);
  EXPECT_EQ(back.norms.at("a.ln_2").beta, std::vector<float>{-0.5f});
  EXPECT_EQ(back.norms.at("a.input_layernorm").gamma, (std::vector<float>{1.0f, 2.0f, 3.0f}));
  ASSERT_EQ(back.codes.size(), c.codes.size());
  for (const auto& [name, m] : c.codes) {
    ASSERT_EQ(back.codes.at(name).index(), m.index()) << name;
    std::visit(
        [&](const auto& want) {
          const auto& got = std::get<std::decay_t<decltype(want)>>(back.codes.at(name));
          EXPECT_EQ(got.rows, want.rows);
          EXPECT_EQ(got.cols, want.cols);
          ASSERT_EQ(got.bytes(), want.bytes());
          EXPECT_EQ(std::memcmp(got.blocks.data(), want.blocks.data(), want.bytes()), 0) << name;
        },
        m);
  }
}

TEST(CalibratedInt4File, AnotherCalibrationOrADamagedFileIsOneLine) {
  const auto dir = test::temp_dir("calibrated_file_bad");
  const auto path = dir / "c.qjcal";
  model::write_calibrated_int4(path, sample(), "id 1");
  EXPECT_THAT([&] { model::read_calibrated_int4(path, "id 2"); },
              ::testing::ThrowsMessage<Error>(::testing::AllOf(
                  HasSubstr("c.qjcal: calibrated from id 1; expected id 2"), ::testing::Not(HasSubstr("\n")))));
  // The router AWQ scaled is named in the metadata but its tensor is gone.
  {
    const auto file = io::SafetensorsFile::open(path);
    std::vector<io::TensorToWrite> kept;
    for (const auto& [name, t] : file.tensors())
      if (name != "a.block_sparse_moe.gate.weight")
        kept.push_back({name, t.dtype, t.shape, std::span<const std::byte>(t.data, t.nbytes)});
    io::write_safetensors(dir / "no_router.qjcal", kept, file.metadata());
  }
  EXPECT_THAT([&] { model::read_calibrated_int4(dir / "no_router.qjcal", "id 1"); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("no_router.qjcal: tensor 'a.block_sparse_moe.gate.weight' is missing")));
  std::ofstream(dir / "junk.qjcal") << "not a safetensors file";
  EXPECT_THAT([&] { model::read_calibrated_int4(dir / "junk.qjcal", "id 1"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("junk.qjcal")));
}

}  // namespace
