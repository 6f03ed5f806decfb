// GPTQ on a mixture of experts (tiny-mixtral): each expert is calibrated on the tokens its router chose for it,
// an expert no calibration token reached keeps round-to-nearest codes and is named so, the calibrated model is
// closer to FP32 than round-to-nearest; and AWQ, whose scales span every expert and the router.
#include <gmock/gmock.h>

#include "calibration_test_util.h"
#include "decoder_fixtures.h"
#include "qjoule/error.h"
#include "qjoule/model/calibration/decoder_calibration.h"
#include "qjoule/model/decoder_loading.h"

namespace {

using namespace qjoule;

TEST(MoeCalibration, EveryExpertGetsCodesAndGptqIsCloserToFp32ThanRoundToNearest) {
  const auto dir = test::decoder_fixture("tiny-mixtral");
  const auto fp32 = model::load_decoder_lm(dir);
  const int32_t vocab = int32_t(fp32.config().vocab_size);
  const auto held_out = test::text_like_sequences(8, 64, vocab, 12);
  const auto gptq_policy = test::policy("int4:g=32:sym:gptq");
  auto calibrated = std::make_shared<model::CalibratedInt4>(
      model::calibrate_decoder(dir, gptq_policy, test::text_like_sequences(16, 64, vocab, 11), {}));
  // 2 layers × (q, k, v, o + 4 experts × gate, up, down); the routers stay FP32.
  EXPECT_EQ(calibrated->codes.size(), 2u * (4 + 4 * 3));
  EXPECT_TRUE(calibrated->round_to_nearest.empty()) << "1,024 tokens reach every expert";
  const auto gptq = model::load_decoder(dir, -1, gptq_policy, calibrated);
  const auto rtn = model::load_decoder(dir, -1, test::policy("int4:g=32:sym"));
  EXPECT_EQ(gptq.model.kernel_path_counts(), rtn.model.kernel_path_counts());
  const double kl_gptq = test::mean_kl(fp32, gptq.model, held_out), kl_rtn = test::mean_kl(fp32, rtn.model, held_out);
  RecordProperty("kl_gptq_over_rtn", std::to_string(kl_gptq / kl_rtn));
  EXPECT_LT(kl_gptq, 0.8 * kl_rtn) << kl_gptq << " vs RTN " << kl_rtn;
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
  const auto dir = test::decoder_fixture("tiny-mixtral");
  const auto fp32 = model::load_decoder_lm(dir);
  const int32_t vocab = int32_t(fp32.config().vocab_size);
  const auto held_out = test::text_like_sequences(8, 64, vocab, 12);
  const auto awq_policy = test::policy("int4:g=32:sym:awq");
  auto calibrated = std::make_shared<model::CalibratedInt4>(
      model::calibrate_decoder(dir, awq_policy, test::text_like_sequences(16, 64, vocab, 11), {}));
  EXPECT_EQ(calibrated->method, "AWQ");
  EXPECT_EQ(calibrated->codes.size(), 2u * (4 + 4 * 3));
  EXPECT_EQ(calibrated->fp32_weights.size(), 2u) << "each layer's router, its columns scaled";
  EXPECT_EQ(calibrated->fp32_weights.count("model.layers.1.block_sparse_moe.gate"), 1u);
  EXPECT_EQ(calibrated->norms.count("model.layers.0.post_attention_layernorm"), 1u);
  // The router's logits are the same for the scaled norm: W_r · diag(s) · (x / s) = W_r · x.
  const auto awq = model::load_decoder(dir, -1, awq_policy, calibrated);
  const auto rtn = model::load_decoder(dir, -1, test::policy("int4:g=32:sym"));
  const double kl_awq = test::mean_kl(fp32, awq.model, held_out), kl_rtn = test::mean_kl(fp32, rtn.model, held_out);
  RecordProperty("kl_awq_over_rtn", std::to_string(kl_awq / kl_rtn));
  EXPECT_LT(kl_awq, kl_rtn) << kl_awq << " vs RTN " << kl_rtn;
}

}  // namespace
