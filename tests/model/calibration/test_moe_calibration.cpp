// GPTQ on a mixture of experts (tiny-mixtral): each expert is calibrated on the tokens its router chose for it,
// an expert no calibration token reached keeps round-to-nearest codes and is named so, the calibrated model is
// closer to FP32 than round-to-nearest; and AWQ, whose scales span every expert and the router.
#include <gmock/gmock.h>

#include "calibration_test_util.h"
#include "decoder_fixtures.h"
#include "qjoule/error.h"
#include "qjoule/model/calibrated_linear_factory.h"
#include "qjoule/model/calibration/decoder_calibration.h"
#include "qjoule/model/decoder_loading.h"

namespace {

using namespace qjoule;

// tiny-mixtral calibrated in `precision` on 16 text-like sequences, and its KL to FP32 on 8 others over
// round-to-nearest's.
struct Calibrated {
  std::shared_ptr<model::CalibratedInt4> codes;  // the codes themselves moved into the model loaded
  std::size_t linears = 0;                       // with codes
  double kl_over_rtn = 0.0;
};
Calibrated calibrated_mixtral(const std::string& precision) {
  const auto dir = test::decoder_fixture("tiny-mixtral");
  const auto fp32 = model::load_decoder_lm(dir);
  const int32_t vocab = int32_t(fp32.config().vocab_size);
  const auto held_out = test::text_like_sequences(8, 64, vocab, 12);
  const auto policy = test::policy(precision);
  auto codes = std::make_shared<model::CalibratedInt4>(
      model::calibrate_decoder(dir, policy, test::text_like_sequences(16, 64, vocab, 11), {}));
  const std::size_t linears = codes->codes.size();
  const auto calibrated = model::load_decoder(dir, -1, policy, codes);
  const auto rtn = model::load_decoder(dir, -1, test::policy("int4:g=32:sym"));
  EXPECT_EQ(calibrated.model.kernel_path_counts(), rtn.model.kernel_path_counts());
  return {codes, linears, test::mean_kl(fp32, calibrated.model, held_out) / test::mean_kl(fp32, rtn.model, held_out)};
}

TEST(MoeCalibration, EveryExpertGetsCodesAndGptqIsCloserToFp32ThanRoundToNearest) {
  const auto gptq = calibrated_mixtral("int4:g=32:sym:gptq");
  // 2 layers × (q, k, v, o + 4 experts × gate, up, down); the routers stay FP32.
  EXPECT_EQ(gptq.linears, 2u * (4 + 4 * 3));
  EXPECT_TRUE(gptq.codes->round_to_nearest.empty()) << "1,024 tokens reach every expert";
  EXPECT_TRUE(gptq.codes->fp32_weights.empty());
  RecordProperty("kl_gptq_over_rtn", std::to_string(gptq.kl_over_rtn));
  EXPECT_LT(gptq.kl_over_rtn, 0.8);
}

TEST(MoeCalibration, AnExpertNoTokenReachedKeepsRoundToNearestCodesAndIsNamed) {
  const auto dir = test::decoder_fixture("tiny-mixtral");
  const auto p = test::policy("int4:g=32:sym:gptq");
  const auto calibrated = model::calibrate_decoder(dir, p, {{5}}, {});  // one token: 2 experts a layer
  EXPECT_EQ(calibrated.codes.size(), 2u * (4 + 4 * 3));
  EXPECT_EQ(calibrated.round_to_nearest.size(), 2u * 2 * 3) << "2 of 4 experts a layer, 3 Linears each";
  for (const auto& name : calibrated.round_to_nearest) EXPECT_NE(name.find(".experts."), std::string::npos) << name;
}

// AWQ on a mixture: one set of scales for every expert's gate and up (each expert measured on the tokens
// routed to it), folded into the norm with the FP32 router's columns times them, so the router chooses as
// before; each expert's down into its own up's rows.
TEST(MoeCalibration, AwqScalesEveryExpertAndTheRouterAndIsCloserToFp32ThanRoundToNearest) {
  const auto awq = calibrated_mixtral("int4:g=32:sym:awq");
  EXPECT_EQ(awq.codes->method, "AWQ");
  EXPECT_EQ(awq.linears, 2u * (4 + 4 * 3));
  EXPECT_EQ(awq.codes->fp32_weights.size(), 2u) << "each layer's router, its columns scaled";
  EXPECT_EQ(awq.codes->fp32_weights.count("model.layers.1.block_sparse_moe.gate"), 1u);
  EXPECT_EQ(awq.codes->norms.count("model.layers.0.post_attention_layernorm"), 1u);
  RecordProperty("kl_awq_over_rtn", std::to_string(awq.kl_over_rtn));
  EXPECT_LT(awq.kl_over_rtn, 1.0);  // 0.41 here (the router left unscaled: 0.43)
}

// A .qjcal whose router weights are not the router's shape (a damaged file): one line naming the Linear.
TEST(MoeCalibration, ARouterOfAnotherShapeIsOneLine) {
  auto calibrated = std::make_shared<model::CalibratedInt4>();
  calibrated->fp32_weights["model.layers.0.block_sparse_moe.gate"] = std::vector<float>(5, 1.0f);
  const auto factory = model::calibrated_linear_factory(
      [](const model::LinearParams&, bool) -> std::unique_ptr<kernels::Linear> { return nullptr; }, calibrated,
      model::cpu_int4_codes_linear());
  model::LinearParams router;
  router.name = "model.layers.0.block_sparse_moe.gate";
  router.out_features = 4;
  router.in_features = 32;
  EXPECT_THAT([&] { factory(router, false); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                  "model.layers.0.block_sparse_moe.gate: calibrated FP32 weights of 5 values; expected 4 × 32")));
}

}  // namespace
