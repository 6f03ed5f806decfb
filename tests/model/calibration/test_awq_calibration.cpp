// AWQ calibration of a decoder (model/calibration/decoder_calibration.h, model/calibration/awq_block.h) on the tiny fixtures,
// one per way a block reads its inputs (Llama with GQA, Qwen2 with Q / K / V biases, GPT-2 with fused
// c_attn, LayerNorm β and GELU):
//  * the scales are folded (norms changed) and the calibrated model runs the kernels and bytes of
//    round-to-nearest;
//  * its output is closer to FP32's than round-to-nearest's (mean KL over held-out sequences), which a
//    scale folded into the wrong rows, norm or bias would undo by far;
//  * the norms come back with the codes where the model is loaded again, and a calibration of another
//    model is one line.
#include <gmock/gmock.h>

#include "calibration_test_util.h"
#include "decoder_fixtures.h"
#include "qjoule/error.h"
#include "qjoule/model/calibration/decoder_calibration.h"
#include "qjoule/model/decoder_loading.h"

namespace {

using namespace qjoule;
using test::mean_kl;
using test::policy;
using test::text_like_sequences;
using ::testing::HasSubstr;

// tiny-gpt2 with c_attn's biases shifted by 4: V's bias then carries much of O's input, end to end (the
// folds themselves are checked exactly in test_awq_block).
std::filesystem::path gpt2_with_large_biases() {
  return test::rewritten_fixture("tiny-gpt2", "awq_gpt2_biases", [](const std::string& name, std::vector<float>& v) {
    if (name.ends_with("attn.c_attn.bias"))
      for (float& x : v) x += 4.0f;
  });
}

TEST(AwqCalibration, FoldsItsScalesRunsRtnsKernelsAndIsCloserToFp32) {
  for (const std::string name : {"tiny-llama", "tiny-qwen2", "tiny-gpt2", "tiny-gpt2 with large biases"}) {
    const auto dir = name.ends_with("biases") ? gpt2_with_large_biases() : test::decoder_fixture(name);
    const auto fp32 = model::load_decoder_lm(dir);
    const int32_t vocab = int32_t(fp32.config().vocab_size);
    const auto calib = text_like_sequences(32, 64, vocab, 11);
    const auto held_out = text_like_sequences(8, 64, vocab, 12);
    for (const std::string rtn_spec : {"int4:g=32:sym", "int4:g=128:asym"}) {
      const auto awq_policy = policy(rtn_spec + ":awq");
      auto calibrated = std::make_shared<model::CalibratedInt4>(model::calibrate_decoder(dir, awq_policy, calib, {}));
      EXPECT_EQ(calibrated->method, "AWQ");
      EXPECT_FALSE(calibrated->norms.empty()) << name << " " << rtn_spec << ": no scales folded into a norm";
      const auto awq = model::load_decoder(dir, -1, awq_policy, calibrated);
      const auto rtn = model::load_decoder(dir, -1, policy(rtn_spec));
      EXPECT_EQ(awq.model.kernel_path_counts(), rtn.model.kernel_path_counts()) << name << " " << rtn_spec;
      EXPECT_EQ(awq.model.bytes_held(), rtn.model.bytes_held()) << name << " " << rtn_spec;
      const double kl_awq = mean_kl(fp32, awq.model, held_out), kl_rtn = mean_kl(fp32, rtn.model, held_out);
      RecordProperty(name + "_" + rtn_spec, std::to_string(kl_awq / kl_rtn));
      EXPECT_LT(kl_awq, kl_rtn) << name << " " << rtn_spec << ": " << kl_awq << " vs RTN " << kl_rtn;
    }
  }
}

TEST(AwqCalibration, MixesWithGptqAndKeepsA8sKernels) {
  const auto dir = test::decoder_fixture("tiny-llama");
  const int32_t vocab = 256;
  const auto calib = text_like_sequences(8, 32, vocab, 3);
  quant::LayerPolicyOptions o;
  o.precision = "int4:g=32:awq:a8";
  o.layer_precision = "*.mlp.*=int4:g=32:gptq";
  const auto p = quant::LayerPolicy::parse(o);
  auto calibrated = std::make_shared<model::CalibratedInt4>(model::calibrate_decoder(dir, p, calib, {}));
  EXPECT_EQ(calibrated->method, "AWQ + GPTQ");
  EXPECT_EQ(calibrated->int8_activations.size(), 8u) << "2 layers × Q, K, V, O";
  const auto m = model::load_decoder(dir, -1, p, calibrated);
  std::string paths;
  for (const auto& [path, count] : m.model.kernel_path_counts()) paths += path + " ";
  EXPECT_THAT(paths, HasSubstr("int4_s8"));
}

TEST(AwqCalibration, NormsOfAnotherModelAreOneLine) {
  auto calibrated = std::make_shared<model::CalibratedInt4>();
  calibrated->norms["model.layers.9.input_layernorm"] =
      model::LayerNormParams{"model.layers.9.input_layernorm", {1.0f}, {}};
  EXPECT_THAT(
      [&] { model::load_decoder(test::decoder_fixture("tiny-llama"), -1, policy("int4:g=32:awq"), calibrated); },
      ::testing::ThrowsMessage<Error>(::testing::AllOf(
          HasSubstr("calibration changed 1 norms and the model has 0 of them; expected the model it was calibrated on"),
          ::testing::Not(HasSubstr("\n")))));
}

}  // namespace
