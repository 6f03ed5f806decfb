// The synthetic DistilBERT: deterministic, Hugging Face names and shapes, and it runs.
#include "qjoule/model/synthetic/synthetic_encoder.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "qjoule/error.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/quantization_plan.h"
#include "small_encoder_spec.h"

namespace qjoule::model {
namespace {

SyntheticEncoderSpec small_spec() { return test::small_encoder_spec(); }

TEST(SyntheticEncoder, DistilBertBaseShapes) {
  const auto s = distilbert_base_spec();
  EXPECT_EQ(s.name, "distilbert-base");
  EXPECT_EQ(s.num_layers, 6);
  EXPECT_EQ(s.hidden_size, 768);
  EXPECT_EQ(s.num_heads, 12);
  EXPECT_EQ(s.intermediate_size, 3072);
  EXPECT_EQ(s.vocab_size, 30522);
}

TEST(SyntheticEncoder, SameSeedSameParametersWithHuggingFaceNames) {
  const auto a = synthetic_encoder_params(small_spec());
  const auto b = synthetic_encoder_params(small_spec());
  EXPECT_EQ(a.word_embeddings, b.word_embeddings);
  EXPECT_EQ(a.layers.at(1).ffn_out.weight, b.layers.at(1).ffn_out.weight);
  EXPECT_EQ(a.layers.at(0).q.name, "distilbert.transformer.layer.0.attention.q_lin");
  EXPECT_EQ(a.layers.at(1).ffn_in.out_features, 128);
  EXPECT_EQ(a.layers.at(1).ffn_in.in_features, 64);
  EXPECT_EQ(a.classifier.name, "classifier");
  double sum2 = 0.0;
  for (float w : a.layers[0].q.weight) sum2 += double(w) * w;
  EXPECT_NEAR(std::sqrt(sum2 / double(a.layers[0].q.weight.size())), 0.02, 0.002) << "std of N(0, 0.02)";
  auto other = small_spec();
  other.seed += 1;
  EXPECT_NE(synthetic_encoder_params(other).word_embeddings, a.word_embeddings);
}

TEST(SyntheticEncoder, RunsAndTokensAreInRange) {
  const auto spec = small_spec();
  const EncoderClassifier m(synthetic_encoder_params(spec), fp32_linear_factory());
  const auto ids = synthetic_token_ids(spec, 3, 16);
  ASSERT_EQ(ids.size(), 48u);
  EXPECT_EQ(ids[0], 101);
  EXPECT_EQ(ids[15], 102);
  for (int32_t id : ids) EXPECT_LT(id, spec.vocab_size);
  const std::vector<int32_t> mask(ids.size(), 1);
  std::vector<float> logits(6);
  m.forward(ids.data(), mask.data(), 3, 16, logits.data());
  for (float l : logits) EXPECT_TRUE(std::isfinite(l));
}

// The same factory, but Q, K and V always built apart.
LinearFactory unfused(LinearFactory inner) {
  return [inner = std::move(inner)](const LinearParams& p, bool in_block) -> std::unique_ptr<kernels::Linear> {
    if (!p.fused_from.empty()) return nullptr;
    return inner(p, in_block);
  };
}

LinearFactory policy_factory(const std::string& precision, const std::string& layer_precision = "",
                             SmoothingFactors smoothing = {}) {
  quant::LayerPolicyOptions o;
  o.precision = precision;
  o.layer_precision = layer_precision;
  return quantized_linear_factory(quant::LayerPolicy::parse(o), std::move(smoothing));
}

std::vector<float> logits_of(const EncoderClassifier& m, const SyntheticEncoderSpec& spec) {
  const int64_t batch = 3, seq = 16;
  const auto ids = synthetic_token_ids(spec, batch, seq);
  std::vector<int32_t> mask(ids.size(), 1);
  for (int64_t t = 9; t < seq; ++t) mask[static_cast<size_t>(seq + t)] = 0;  // one padded example
  std::vector<float> logits(static_cast<size_t>(batch * spec.num_labels));
  m.forward(ids.data(), mask.data(), batch, seq, logits.data());
  return logits;
}

TEST(SyntheticEncoder, QkvFusedIntoOneLinearAndReportedSo) {
  const auto spec = small_spec();
  const EncoderClassifier m(synthetic_encoder_params(spec), policy_factory("int8"));
  const auto reports = m.linear_reports();
  ASSERT_EQ(reports.size(), 2u * 4u + 2u) << "per block: fused q+k+v, out_lin, lin1, lin2; then the head";
  EXPECT_EQ(reports[0].name, "distilbert.transformer.layer.0.attention.q_lin+k_lin+v_lin");
  EXPECT_EQ(reports[0].format, "int8");
  EXPECT_EQ(reports[0].fp32_bytes, 3u * 64u * (64u + 1u) * sizeof(float));
  EXPECT_EQ(reports[1].name, "distilbert.transformer.layer.0.attention.out_lin");
  int fused = 0, total = 0;
  for (const auto& [path, n] : m.kernel_path_counts()) {
    total += n;
    if (path.ends_with(EncoderClassifier::kFusedQkvMark)) {
      fused += n;
      EXPECT_EQ(path.rfind("int8 ", 0), 0u) << path;
    }
  }
  EXPECT_EQ(fused, 2);
  EXPECT_EQ(total, 10) << "fused Q, K, V count once each: 2 blocks x (1 + 3) + 2 head Linears";
  EXPECT_EQ(m.bytes_held(),
            EncoderClassifier(synthetic_encoder_params(spec), unfused(policy_factory("int8"))).bytes_held())
      << "the same codes, scales, compensations and biases, held once";
}

TEST(SyntheticEncoder, QkvKeptApartWhenTheirFormatsDiffer) {
  const auto spec = small_spec();
  const EncoderClassifier m(synthetic_encoder_params(spec), policy_factory("int8", "*.k_lin=bf16"));
  const auto reports = m.linear_reports();
  ASSERT_EQ(reports.size(), 2u * 6u + 2u);
  EXPECT_EQ(reports[0].name, "distilbert.transformer.layer.0.attention.q_lin");
  EXPECT_EQ(reports[0].format, "int8");
  EXPECT_EQ(reports[1].format, "bf16");
  for (const auto& [path, n] : m.kernel_path_counts())
    EXPECT_FALSE(path.ends_with(EncoderClassifier::kFusedQkvMark)) << path;
}

TEST(SyntheticEncoder, FusedQkvGivesTheLogitsOfSeparateLinears) {
  // int8: the same per-token activation codes (one input), per-row weight codes and exact integer
  // products, so the logits are bit-identical; fp32/bf16 may differ by oneDNN's blocking: budget 1e-5.
  const auto spec = small_spec();
  const auto params = synthetic_encoder_params(spec);
  for (const std::string precision : {"fp32", "bf16", "int8", "w8"}) {
    const auto fused = logits_of(EncoderClassifier(params, policy_factory(precision)), spec);
    const auto apart = logits_of(EncoderClassifier(params, unfused(policy_factory(precision))), spec);
    ASSERT_EQ(fused.size(), apart.size());
    for (size_t i = 0; i < fused.size(); ++i) {
      if (precision == "int8") {
        EXPECT_EQ(fused[i], apart[i]) << precision << " logit " << i;
      } else {
        EXPECT_NEAR(fused[i], apart[i], 1e-5f) << precision << " logit " << i;
      }
    }
  }
  // SmoothQuant: Q, K and V share one s, so the fused layer takes it.
  const auto smoothing = calibrate_smoothquant(params, 0.5f, [&](const EncoderClassifier& m) { logits_of(m, spec); });
  const EncoderClassifier smoothed(params, policy_factory("int8", "", smoothing));
  EXPECT_EQ(smoothed.linear_reports().size(), 10u);
  EXPECT_NE(smoothed.linear_reports()[0].kernel_path.find(":smoothed"), std::string::npos);
  const EncoderClassifier smoothed_apart(params, unfused(policy_factory("int8", "", smoothing)));
  EXPECT_EQ(logits_of(smoothed, spec), logits_of(smoothed_apart, spec));
  EXPECT_EQ(smoothed.bytes_held() + 2u * 2u * 64u * sizeof(float), smoothed_apart.bytes_held())
      << "per block, the fused layer holds the shared 1/s once instead of three times";
}

// Widths that are not multiples of the 4-bit groups (hidden 320 as BERT-small, FFN 1000): int4 with its
// default group 128 and nf4 build every layer with a partial last group, and the logits stay close to
// FP32 (relative RMS over the logits < 0.1; 4-bit weights, 2 layers).
TEST(SyntheticEncoder, FourBitFormatsRunAtWidthsThatAreNotMultiplesOfTheirGroups) {
  auto spec = small_spec();
  spec.hidden_size = 320;
  spec.num_heads = 5;
  spec.intermediate_size = 1000;
  const auto params = synthetic_encoder_params(spec);
  const auto fp32 = logits_of(EncoderClassifier(params, policy_factory("fp32")), spec);
  for (const std::string precision : {"int4", "nf4", "int4:g64:asym", "nf4:dq"}) {
    const EncoderClassifier m(params, policy_factory(precision));
    for (const auto& r : m.linear_reports()) {  // the transformer blocks' Linears (the head's policy is its own)
      if (r.name.find(".layer.") == std::string::npos) continue;
      EXPECT_EQ(r.format, precision.substr(0, precision.find(':'))) << r.name;
    }
    const auto q = logits_of(m, spec);
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < q.size(); ++i) {
      num += (double(q[i]) - fp32[i]) * (double(q[i]) - fp32[i]);
      den += double(fp32[i]) * fp32[i];
    }
    EXPECT_LT(std::sqrt(num / den), 0.1) << precision;
  }
}

TEST(SyntheticEncoder, BadSpecsAreClearErrors) {
  auto s = small_spec();
  s.num_heads = 5;
  EXPECT_THAT([&] { synthetic_encoder_params(s); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("hidden size 64 is not a multiple of 5 heads")));
  EXPECT_THAT([&] { synthetic_token_ids(small_spec(), 1, 33); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("sequence length 33 is outside [2, 32]")));
}

// A batch larger than one CPU pass runs in passes of whole sequences: every sequence's logits are those
// it gets alone (padding included), fused and unfused Q/K/V alike, and the path says so.
TEST(SyntheticEncoderPasses, BatchInPassesGivesEachSequenceItsOwnLogits) {
  const auto spec = small_spec();
  const int64_t seq = 16, per_pass = std::max<int64_t>(1, cpu_tokens_per_pass() / seq);
  const int64_t batch = 2 * per_pass + 3;  // two full passes and a short one
  const auto ids = synthetic_token_ids(spec, batch, seq);
  std::vector<int32_t> mask(ids.size(), 1);
  for (int64_t b = 1; b < batch; b += 5)
    for (int64_t t = 7 + b % 5; t < seq; ++t) mask[static_cast<size_t>(b * seq + t)] = 0;
  for (const bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused Q/K/V" : "Q, K, V apart");
    const EncoderClassifier m(synthetic_encoder_params(spec),
                              fused ? policy_factory("int8") : unfused(policy_factory("int8")));
    EXPECT_EQ(m.sequences_per_pass(batch, seq), per_pass);
    EXPECT_THAT(m.nongemm_path(), ::testing::HasSubstr(fmt::format("passes of <= {} tokens", cpu_tokens_per_pass())));
    std::vector<float> all(static_cast<size_t>(batch * spec.num_labels));
    m.forward(ids.data(), mask.data(), batch, seq, all.data());
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<float> one(static_cast<size_t>(spec.num_labels));
      m.forward(ids.data() + b * seq, mask.data() + b * seq, 1, seq, one.data());
      for (int64_t l = 0; l < spec.num_labels; ++l)
        EXPECT_NEAR(all[static_cast<size_t>(b * spec.num_labels + l)], one[static_cast<size_t>(l)], 1e-4)
            << "sequence " << b << ", label " << l;
    }
  }
}

TEST(SyntheticEncoderPasses, ForwardsOnTwoThreadsAtOnceEachGetTheirOwnBuffers) {
  // forward() keeps its buffers for the next call; a call that finds them in use (another thread's)
  // allocates its own, so concurrent forwards of different shapes give the logits of serial ones.
  const auto spec = small_spec();
  const EncoderClassifier m(synthetic_encoder_params(spec), policy_factory("int8"));
  const int64_t seq = 16;
  const auto ids = synthetic_token_ids(spec, 8, seq);
  const std::vector<int32_t> mask(ids.size(), 1);
  const auto logits = [&](int64_t batch) {
    std::vector<float> out(static_cast<size_t>(batch * spec.num_labels));
    m.forward(ids.data(), mask.data(), batch, seq, out.data());
    return out;
  };
  const auto serial3 = logits(3), serial8 = logits(8);
  std::vector<float> got3, got8;
  std::thread a([&] {
    for (int i = 0; i < 20; ++i) got3 = logits(3);
  });
  std::thread b([&] {
    for (int i = 0; i < 20; ++i) got8 = logits(8);
  });
  a.join();
  b.join();
  ASSERT_EQ(got3.size(), serial3.size());
  ASSERT_EQ(got8.size(), serial8.size());
  for (size_t i = 0; i < got3.size(); ++i) EXPECT_NEAR(got3[i], serial3[i], 1e-5) << i;
  for (size_t i = 0; i < got8.size(); ++i) EXPECT_NEAR(got8[i], serial8[i], 1e-5) << i;
}

}  // namespace
}  // namespace qjoule::model
