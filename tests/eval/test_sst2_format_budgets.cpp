// Accuracy of every CPU format on the SST-2 DistilBERT (../shared), against the budgets:
// bf16, fp16, w8 (and FP32 with BF16 activations) within 0.5 pt of FP32; int8 (with and without
// SmoothQuant) within 1.0 pt; int4, nf4, mxfp4 and nvfp4 with top-1 agreement with FP32 of at least 95%.
// Each format runs in-process with the same tokenization and batches as `qjoule eval`.
#include <cstdio>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "qjoule/dataset.h"
#include "qjoule/eval/classifier_eval.h"
#include "qjoule/eval/fidelity.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/threads.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/tokenize/wordpiece_tokenizer.h"
#include "test_paths.h"

namespace qjoule::eval {
namespace {

struct FormatBudget {
  std::string name;         // for the test's name
  std::string precision;    // --precision
  std::string act_dtype;    // --act-dtype
  float smoothquant_alpha;  // < 0: off
  double max_drop_pt;       // accuracy drop budget in points; < 0: judged by agreement instead
  double min_agreement;     // top-1 agreement with FP32
};
void PrintTo(const FormatBudget& b, std::ostream* os) { *os << b.name; }

class Sst2FormatBudgets : public ::testing::TestWithParam<FormatBudget> {
 protected:
  struct Shared {
    model::EncoderParams params;
    Dataset dataset;
    std::optional<tokenize::WordPieceTokenizer> tokenizer;
    ClassifierEvalResult fp32;
  };
  static std::optional<Shared>& shared() {
    static std::optional<Shared> s;
    return s;
  }
  static constexpr ClassifierEvalOptions kOptions{32, 128};

  void SetUp() override {
    QJOULE_REQUIRE_SHARED("models/sst2-distilbert-mini/config.json");
    QJOULE_REQUIRE_SHARED("sst2/dev.tsv");
    if (shared()) return;
    kernels::set_num_threads(0);
    const auto dir = test::shared_data("models/sst2-distilbert-mini");
    const auto checkpoint = io::Checkpoint::open(dir);
    Shared s{model::load_encoder_params(checkpoint, model::load_encoder_config(dir, checkpoint)),
             load_dataset(test::shared_data("sst2/dev.tsv"), {}),
             tokenize::WordPieceTokenizer::from_model_dir(dir),
             {}};
    const model::EncoderClassifier fp32(s.params, model::fp32_linear_factory());
    s.fp32 = evaluate_classifier(fp32, &*s.tokenizer, s.dataset, kOptions);
    shared() = std::move(s);
  }
};

TEST_P(Sst2FormatBudgets, WithinBudget) {
  const FormatBudget& b = GetParam();
  Shared& s = *shared();
  ASSERT_EQ(s.fp32.correct, 717u) << "the FP32 baseline must be PyTorch's 717/872";

  model::QuantizationOptions q;
  q.policy.precision = b.precision;
  const auto policy = quant::LayerPolicy::parse(q.policy, q.format_defaults);
  model::SmoothingFactors smoothing;
  if (b.smoothquant_alpha >= 0.0f) {
    Dataset calib{s.dataset.path, {}, s.dataset.pretokenized, s.dataset.labeled};
    calib.examples.assign(s.dataset.examples.begin(), s.dataset.examples.begin() + 128);
    smoothing = model::calibrate_smoothquant(s.params, b.smoothquant_alpha, [&](const model::EncoderClassifier& m) {
      evaluate_classifier(m, &*s.tokenizer, calib, kOptions);
    });
  }
  const model::EncoderClassifier m(s.params, model::quantized_linear_factory(policy, smoothing),
                                   model::parse_activation_dtype(b.act_dtype));
  const auto r = evaluate_classifier(m, &*s.tokenizer, s.dataset, kOptions);
  const auto f = compare_logits(s.fp32.logits, r.logits);
  const double drop_pt = 100.0 * (s.fp32.accuracy() - r.accuracy());
  std::printf("%-12s accuracy %zu/%zu = %.4f (drop %+.2f pt), top-1 agreement %.4f, mean KL %.3g, max |dlogit| %.3g\n",
              b.name.c_str(), r.correct, r.labelled, r.accuracy(), drop_pt, f.top1_agreement, f.mean_kl,
              f.max_abs_dlogit);
  if (b.max_drop_pt >= 0.0) {
    EXPECT_LE(drop_pt, b.max_drop_pt) << b.name;
  }
  EXPECT_GE(f.top1_agreement, b.min_agreement) << b.name;
}

INSTANTIATE_TEST_SUITE_P(Cases, Sst2FormatBudgets,
                         ::testing::Values(FormatBudget{"bf16", "bf16", "f32", -1.0f, 0.5, 0.95},
                                           FormatBudget{"fp16", "fp16", "f32", -1.0f, 0.5, 0.95},
                                           FormatBudget{"w8", "w8", "f32", -1.0f, 0.5, 0.95},
                                           FormatBudget{"act_bf16", "fp32", "bf16", -1.0f, 0.5, 0.95},
                                           FormatBudget{"int8", "int8", "f32", -1.0f, 1.0, 0.95},
                                           FormatBudget{"int8_sq05", "int8", "f32", 0.5f, 1.0, 0.95},
                                           FormatBudget{"int4", "int4", "f32", -1.0f, -1.0, 0.95},
                                           FormatBudget{"int4_g64_asym", "int4:g64:asym", "f32", -1.0f, -1.0, 0.95},
                                           FormatBudget{"nf4", "nf4", "f32", -1.0f, -1.0, 0.95},
                                           FormatBudget{"nf4_dq", "nf4:dq", "f32", -1.0f, -1.0, 0.95},
                                           FormatBudget{"mxfp4", "mxfp4", "f32", -1.0f, -1.0, 0.95},
                                           FormatBudget{"nvfp4", "nvfp4", "f32", -1.0f, -1.0, 0.95}),
                         [](const ::testing::TestParamInfo<FormatBudget>& case_info) { return case_info.param.name; });

}  // namespace
}  // namespace qjoule::eval
