// The synthetic DistilBERT: deterministic, Hugging Face names and shapes, and it runs.
#include "qjoule/model/synthetic_encoder.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/error.h"
#include "qjoule/model/encoder_classifier.h"

namespace qjoule::model {
namespace {

SyntheticEncoderSpec small_spec() {
  SyntheticEncoderSpec s;
  s.name = "small";
  s.vocab_size = 1100;
  s.hidden_size = 64;
  s.num_layers = 2;
  s.num_heads = 4;
  s.intermediate_size = 128;
  s.max_positions = 32;
  return s;
}

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

TEST(SyntheticEncoder, BadSpecsAreClearErrors) {
  auto s = small_spec();
  s.num_heads = 5;
  EXPECT_THAT([&] { synthetic_encoder_params(s); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("hidden size 64 is not a multiple of 5 heads")));
  EXPECT_THAT([&] { synthetic_token_ids(small_spec(), 1, 33); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("sequence length 33 is outside [2, 32]")));
}

}  // namespace
}  // namespace qjoule::model
