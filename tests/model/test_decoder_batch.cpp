// DecoderLM::forward_batch: sequences at different positions over their own caches, in one forward,
// give each sequence the logits (and the cache) forward() gives it alone, on every fixture, with fused
// and separate Q / K / V, in FP32 and a quantized format; bad batches are one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "decoder_fixtures.h"
#include "prequantized/quantized_checkpoint_test_util.h"
#include "qjoule/error.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/quant/layer_policy.h"

namespace {

using qjoule::model::DecoderLM;
using qjoule::model::DecoderSequence;
using qjoule::model::KvCache;
using qjoule::test::decoder_fixture;
using qjoule::test::relative_rms;  // (got, want): ||got − want|| / ||want||

qjoule::model::LinearFactory factory_for(const std::string& precision, bool fuse) {
  qjoule::quant::LayerPolicyOptions policy;
  policy.precision = precision;
  auto inner = qjoule::model::quantized_linear_factory(qjoule::quant::LayerPolicy::parse(policy, {}));
  if (fuse) return inner;
  // A factory that builds nothing for fused params makes the model build Q, K, V (and gate, up) apart.
  return [inner](const qjoule::model::LinearParams& p, bool in_block) -> std::unique_ptr<qjoule::kernels::Linear> {
    if (p.name.find('+') != std::string::npos) return nullptr;
    return inner(p, in_block);
  };
}

// Three sequences: a prefill of 7 tokens (last logits), 4 tokens after 5 cached, 1 token after 9 cached.
struct Case {
  int64_t cached, n, logits_from;
};
const std::vector<Case> kCases = {{0, 7, 6}, {5, 4, 0}, {9, 1, 0}};

std::vector<int32_t> ids_of(const DecoderLM& model, int64_t count, int32_t salt) {
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < count; ++t)
    ids.push_back(static_cast<int32_t>((t * 37 + salt * 11 + 3) % model.config().vocab_size));
  return ids;
}

class DecoderBatchTest : public ::testing::TestWithParam<std::tuple<std::string, std::string, bool>> {};

TEST_P(DecoderBatchTest, EachSequenceGetsTheLogitsAndCacheOfItsOwnForward) {
  const auto& [fixture, precision, fuse] = GetParam();
  const auto model = qjoule::model::load_decoder_lm(decoder_fixture(fixture), factory_for(precision, fuse));
  const int64_t v = model.config().vocab_size;
  std::vector<KvCache> alone, batched;
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::vector<float>> want, got;
  std::vector<DecoderSequence> batch;
  for (size_t i = 0; i < kCases.size(); ++i) {
    const Case& c = kCases[i];
    ids.push_back(ids_of(model, c.cached + c.n + 1, static_cast<int32_t>(i)));
    alone.push_back(model.make_cache(c.cached + c.n + 1));
    batched.push_back(model.make_cache(c.cached + c.n + 1));
    std::vector<float> prefix(static_cast<size_t>(v));
    for (KvCache* cache : {&alone.back(), &batched.back()})
      if (c.cached > 0) model.forward(ids.back().data(), c.cached, *cache, prefix.data(), c.cached - 1);
    want.emplace_back(static_cast<size_t>((c.n - c.logits_from) * v));
    got.emplace_back(want.back().size());
    model.forward(ids.back().data() + c.cached, c.n, alone.back(), want.back().data(), c.logits_from);
  }
  for (size_t i = 0; i < kCases.size(); ++i)
    batch.push_back({ids[i].data() + kCases[i].cached, kCases[i].n, &batched[i], got[i].data(), kCases[i].logits_from});
  model.forward_batch(batch);
  // Summed over 7 + 4 + 1 rows the products may take another kernel than for each sequence alone:
  // rounding only. FP32: 1e-5 relative RMS; int8 (per-token activation codes): 5e-3; int4: 2e-2, as its
  // decode GEMV (m <= 4, a sequence alone) multiplies BF16 activations where the CPU chose it (measured
  // 0.4-0.8%) and the 12-row product FP32 ones.
  const double budget = precision == "fp32" ? 1e-5 : precision == "int8" ? 5e-3 : 2e-2;
  for (size_t i = 0; i < kCases.size(); ++i) {
    EXPECT_EQ(batched[i].size(), kCases[i].cached + kCases[i].n) << "sequence " << i;
    EXPECT_LE(relative_rms(got[i], want[i]), budget) << "sequence " << i;
    // The caches hold the same keys and values: one more token decodes alike from both.
    std::vector<float> next_alone(static_cast<size_t>(v)), next_batched(static_cast<size_t>(v));
    const int32_t* next = ids[i].data() + kCases[i].cached + kCases[i].n;
    model.forward(next, 1, alone[i], next_alone.data());
    model.forward(next, 1, batched[i], next_batched.data());
    EXPECT_LE(relative_rms(next_batched, next_alone), budget) << "sequence " << i << ", the token after";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DecoderBatchTest,
                         ::testing::Combine(::testing::ValuesIn(qjoule::test::decoder_fixture_names()),
                                            ::testing::Values("fp32", "int4", "int8"), ::testing::Bool()),
                         [](const auto& param_info) {
                           std::string name = std::get<0>(param_info.param) + "_" + std::get<1>(param_info.param) +
                                              (std::get<2>(param_info.param) ? "_fused" : "_apart");
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

TEST(DecoderBatch, BadBatchesAreOneLine) {
  const auto model = qjoule::model::load_decoder_lm(decoder_fixture("tiny-llama"));
  const int64_t v = model.config().vocab_size;
  auto a = model.make_cache(8), b = model.make_cache(2);
  const std::vector<int32_t> ids = {1, 2, 3, 4};
  std::vector<float> la(static_cast<size_t>(4 * v)), lb(static_cast<size_t>(4 * v));
  EXPECT_THAT([&] { model.forward_batch({}); }, ::testing::ThrowsMessage<qjoule::Error>(::testing::StrEq(
                                                    "a batched forward needs at least one sequence, got none")));
  const std::vector<DecoderSequence> shared = {{ids.data(), 2, &a, la.data(), 0}, {ids.data(), 2, &a, lb.data(), 0}};
  EXPECT_THAT([&] { model.forward_batch(shared); },
              ::testing::ThrowsMessage<qjoule::Error>(
                  ::testing::StrEq("sequences 0 and 1 of the batch share one KV cache; expected a cache each")));
  const std::vector<DecoderSequence> full = {{ids.data(), 2, &a, la.data(), 0}, {ids.data(), 4, &b, lb.data(), 0}};
  EXPECT_THAT([&] { model.forward_batch(full); },
              ::testing::ThrowsMessage<qjoule::Error>(::testing::StrEq(
                  "sequence 1 of the batch: 4 tokens after 0 cached exceed the KV cache's capacity of 2 tokens")));
  const std::vector<DecoderSequence> no_cache = {{ids.data(), 2, &a, la.data(), 0},
                                                 {ids.data(), 2, nullptr, lb.data(), 0}};
  EXPECT_THAT([&] { model.forward_batch(no_cache); },
              ::testing::ThrowsMessage<qjoule::Error>(
                  ::testing::StrEq("sequence 1 of the batch: expected its ids, its KV cache and where its logits go")));
  EXPECT_EQ(a.size(), 0) << "a refused batch runs nothing";
}

}  // namespace
