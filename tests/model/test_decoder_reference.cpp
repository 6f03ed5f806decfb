// FP32 decoder forward passes vs PyTorch's logits on the tiny fixtures (Llama with GQA and llama3
// RoPE scaling, Qwen2 with Q/K/V biases and tied embeddings, GPT-2 with Conv1D weights and no
// "transformer." prefix), and incremental decoding with the KV cache vs the full forward.
// Budgets: 1e-4 absolute per logit against PyTorch (the issue's); 2e-5 between a full forward and
// the same tokens fed through the cache in pieces (only the GEMM row blocking differs).
#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "fixture_param_name.h"
#include "decoder_fixtures.h"
#include "error_of.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/quantization_plan.h"

namespace {

using qjoule::model::DecoderLM;
using qjoule::model::load_decoder_lm;
using qjoule::test::decoder_fixture;
using qjoule::test::moe_layers;
using qjoule::test::read_decoder_reference;

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

class DecoderReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DecoderReferenceTest, FullForwardMatchesPyTorchWithin1e4) {
  const auto ref = read_decoder_reference(GetParam());
  const auto model = load_decoder_lm(decoder_fixture(GetParam()));
  ASSERT_EQ(model.config().vocab_size, ref.vocab);
  const auto n = static_cast<int64_t>(ref.ids.size());
  auto cache = model.make_cache();
  std::vector<float> logits(static_cast<size_t>(n * ref.vocab));
  model.forward(ref.ids.data(), n, cache, logits.data());
  EXPECT_EQ(cache.size(), n);
  EXPECT_LE(max_abs_diff(logits.data(), ref.logits.data(), logits.size()), 1e-4f);
}

// (LongRoPE picks its factors per forward, by its last position, as transformers does: the property holds
// while every forward stays within original_max_position_embeddings, so there the tokens stop.)
TEST_P(DecoderReferenceTest, IncrementalDecodeWithTheCacheEqualsTheFullForward) {
  const auto ref = read_decoder_reference(GetParam());
  const auto model = load_decoder_lm(decoder_fixture(GetParam()));
  const auto& rs = model.config().rope_scaling;
  const auto n = std::min(static_cast<int64_t>(ref.ids.size()),
                          rs.type == "longrope" ? rs.original_max_position_embeddings : INT64_MAX);
  const int64_t v = ref.vocab;
  auto full_cache = model.make_cache();
  std::vector<float> full(static_cast<size_t>(n * v));
  model.forward(ref.ids.data(), n, full_cache, full.data());

  // Prefill 9 tokens (last logits only), a chunk of 5, then one token at a time.
  auto cache = model.make_cache(n);
  std::vector<float> logits(static_cast<size_t>(n * v));
  model.forward(ref.ids.data(), 9, cache, logits.data(), 8);
  EXPECT_LE(max_abs_diff(logits.data(), full.data() + 8 * v, static_cast<size_t>(v)), 2e-5f) << "prefill";
  model.forward(ref.ids.data() + 9, 5, cache, logits.data());
  EXPECT_LE(max_abs_diff(logits.data(), full.data() + 9 * v, static_cast<size_t>(5 * v)), 2e-5f) << "chunk";
  for (int64_t t = 14; t < n; ++t) {
    model.forward(ref.ids.data() + t, 1, cache, logits.data());
    EXPECT_LE(max_abs_diff(logits.data(), full.data() + t * v, static_cast<size_t>(v)), 2e-5f) << "token " << t;
  }
  EXPECT_EQ(cache.size(), n);
}

TEST_P(DecoderReferenceTest, PositionsBeyondTheModelAndBadIdsAreClearErrors) {
  const auto model = load_decoder_lm(decoder_fixture(GetParam()));
  const int64_t positions = model.config().max_positions;
  std::vector<int32_t> ids(static_cast<size_t>(positions + 1), 1);
  std::vector<float> logits(static_cast<size_t>(model.config().vocab_size));
  auto cache = model.make_cache();
  const auto beyond =
      qjoule::test::error_of([&] { model.forward(ids.data(), positions + 1, cache, logits.data(), positions); });
  EXPECT_NE(beyond.find("max_position_embeddings = " + std::to_string(positions)), std::string::npos) << beyond;
  EXPECT_NE(beyond.find(std::to_string(positions + 1)), std::string::npos) << beyond;
  const auto too_big = qjoule::test::error_of([&] { (void)model.make_cache(positions + 5); });
  EXPECT_NE(too_big.find(std::to_string(positions + 5)), std::string::npos) << too_big;
  const int32_t bad = static_cast<int32_t>(model.config().vocab_size);
  const auto id = qjoule::test::error_of([&] { model.forward(&bad, 1, cache, logits.data()); });
  EXPECT_NE(id.find("token id " + std::to_string(bad)), std::string::npos) << id;
  EXPECT_NE(id.find("vocabulary of " + std::to_string(bad) + " tokens"), std::string::npos) << id;
}

TEST_P(DecoderReferenceTest, ReportsEveryLinearAndItsBytes) {
  const auto model = load_decoder_lm(decoder_fixture(GetParam()));
  const auto& c = model.config();
  const auto reports = model.linear_reports();
  // q | k | v, o, gate | up (Llama, Qwen2) or up (GPT-2), down: fused Linears, one report each. A mixture's
  // layer: q | k | v, o, the router and each expert's gate | up and down.
  const int64_t moe = moe_layers(c), experts = c.moe.num_experts;
  EXPECT_EQ(reports.size(), static_cast<size_t>(4 * (c.num_layers - moe) + (3 + 2 * experts) * moe + 1));
  int counted = 0;
  for (const auto& [path, count] : model.kernel_path_counts()) counted += count;
  // GPT-2's c_attn and Phi-3's qkv_proj and gate_up_proj are one checkpoint Linear each.
  const bool four = c.arch == qjoule::model::DecoderArch::Gpt2 || c.arch == qjoule::model::DecoderArch::Phi3;
  EXPECT_EQ(counted, (four ? 4 : 7) * (c.num_layers - moe) + (5 + 3 * experts) * moe + 1)
      << "kernel_path_counts counts the checkpoint's Linears";
  // A decode step reads its top-k experts: each expert Linear's report says which share of tokens reads it.
  for (const auto& r : reports) {
    const bool expert = r.name.find(".experts.") != std::string::npos;
    EXPECT_DOUBLE_EQ(r.token_share,
                     expert ? static_cast<double>(c.moe.experts_per_token) / static_cast<double>(experts) : 1.0)
        << r.name;
  }
  EXPECT_EQ(reports.back().name, "lm_head");
  // All FP32 but a BF16 checkpoint's embeddings, held as stored (2 bytes a value).
  const auto embeddings = static_cast<std::size_t>(c.vocab_size * c.hidden_size);
  EXPECT_EQ(
      model.bytes_held() + (model.nongemm_path().find("embedding_bf16") != std::string::npos ? 2 * embeddings : 0),
      model.fp32_bytes());
}

// The streamed FP32 model (each Linear reads its weights from the checkpoint at every forward) runs
// the same FP32 kernels on the same weights: its logits equal the resident model's bit for bit, and it
// holds no Linear weights.
TEST_P(DecoderReferenceTest, StreamedFp32ModelEqualsTheResidentOneAndHoldsNoLinearWeights) {
  const auto ref = read_decoder_reference(GetParam());
  const auto resident = load_decoder_lm(decoder_fixture(GetParam()));
  const auto streamed = qjoule::model::load_decoder_lm_streamed(decoder_fixture(GetParam()));
  const auto n = static_cast<int64_t>(ref.ids.size());
  std::vector<float> a(static_cast<size_t>(n * ref.vocab)), b(a.size());
  auto cache_a = resident.make_cache(), cache_b = streamed.make_cache();
  resident.forward(ref.ids.data(), n, cache_a, a.data());
  streamed.forward(ref.ids.data(), n, cache_b, b.data());
  // The resident model fuses Q | K | V and gate | up into one Linear each, the streamed one (which holds no weights
  // to concatenate) runs the parts. oneDNN's AVX-512 FP32 kernels give a fused layer's outputs its parts' bits;
  // its AVX2 ones (CPUs without AVX-512) may round them an ulp apart (tiny-olmoe on a Zen 3: 4.8e-7).
  __builtin_cpu_init();
  float max_abs = 0.0f;
  for (const float v : a) max_abs = std::max(max_abs, std::fabs(v));
  const float tolerance = __builtin_cpu_supports("avx512f") != 0 ? 0.0f : 0x1p-20f * max_abs;
  EXPECT_LE(max_abs_diff(a.data(), b.data(), a.size()), tolerance);
  // Twice: the second forward reads the released pages back from the page cache.
  cache_b.clear();
  streamed.forward(ref.ids.data(), n, cache_b, b.data());
  EXPECT_LE(max_abs_diff(a.data(), b.data(), a.size()), tolerance);
  std::size_t linear_bytes = 0;
  for (const auto& r : resident.linear_reports()) linear_bytes += r.bytes_held;
  // A tied resident model's embeddings read its head's FP32 rows; the streamed head holds none to read.
  const std::size_t table =
      resident.embeddings_in_head()
          ? static_cast<std::size_t>(resident.config().vocab_size * resident.config().hidden_size) * sizeof(float)
          : 0;
  EXPECT_FALSE(streamed.embeddings_in_head());
  EXPECT_EQ(streamed.bytes_held(), resident.bytes_held() - linear_bytes + table);
  EXPECT_EQ(streamed.fp32_bytes(), resident.fp32_bytes());
  for (const auto& r : streamed.linear_reports()) EXPECT_EQ(r.bytes_held, 0u) << r.name;
}

// transformers' own generate() (the fixtures of tools/make_hf_decoder_fixtures.py): the same 32 greedy
// tokens after the prompt, the prompt prefilled and each token then decoded through the KV cache.
TEST(DecoderGreedy, ThirtyTwoGreedyTokensEqualTransformers) {
  for (const std::string name : {"tiny-qwen3", "tiny-gemma3", "tiny-phi3", "tiny-llama32"}) {
    const auto ref = qjoule::test::read_greedy_reference(name);
    ASSERT_EQ(ref.tokens.size(), 32u) << name;
    const auto model = load_decoder_lm(decoder_fixture(name));
    EXPECT_EQ(qjoule::test::greedy_tokens(model, ref.prompt, ref.tokens.size()), ref.tokens) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DecoderReferenceTest, ::testing::ValuesIn(qjoule::test::decoder_fixture_names()),
                         qjoule::test::FixtureParamName());

}  // namespace

namespace {

// Every CPU format runs on every fixture and says which kernel ran. Its logits equal those of its
// fake-quantized twin (--emulate: the same quantizers, FP32 oneDNN products) within 1e-3 relative RMS
// (only accumulation order differs; 1e-2 for int8, whose per-token activation rounding can flip on
// such differences: measured 2.7e-3, and 6.3e-3 on tiny-gemma3, whose norms after each block rescale
// the block's small outputs), and stay within a budget of FP32's in relative RMS: bf16/fp16
// 1%, w8/int8 5%, int4/nf4 50% (random Gaussian weights this small are 4-bit's worst case; measured
// 0.18–0.45, and exactly the emulated figure).
class DecoderFormatTest : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

qjoule::model::DecoderLM load_in_format(const std::string& name, const std::string& precision, bool emulate,
                                        int group) {
  qjoule::quant::LayerPolicyOptions policy;
  policy.precision = precision;
  qjoule::quant::FormatSpec defaults;
  defaults.group_size = group;
  defaults.emulate = emulate;
  return load_decoder_lm(decoder_fixture(name),
                         qjoule::model::quantized_linear_factory(qjoule::quant::LayerPolicy::parse(policy, defaults)));
}

double relative_rms(const std::vector<float>& ref, const std::vector<float>& got) {
  double se = 0, sr = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    se += double(ref[i] - got[i]) * double(ref[i] - got[i]);
    sr += double(ref[i]) * double(ref[i]);
  }
  return std::sqrt(se / sr);
}

TEST_P(DecoderFormatTest, RunsTheFormatsKernelLikeItsEmulatedTwinAndNearFp32) {
  const auto& [name, precision] = GetParam();
  const auto ref = read_decoder_reference(name);
  const auto n = static_cast<int64_t>(ref.ids.size());
  const auto fp32 = load_decoder_lm(decoder_fixture(name));
  const int group = static_cast<int>(std::min<int64_t>(128, fp32.config().hidden_size));
  const auto model = load_in_format(name, precision, false, group);
  const auto twin = load_in_format(name, precision, true, group);
  // Every block Linear in the format; the head as deployed: the checkpoint's 16-bit type where it stores
  // one (tiny-llama: BF16), else FP32 (the F32 fixtures).
  const auto head = model.head_report();
  const bool head_16bit = decoder_fixture(name) == decoder_fixture("tiny-llama");
  EXPECT_EQ(head.format, head_16bit ? "bf16" : "fp32");
  int quantized = 0, linears = 0;
  for (const auto& [path, count] : model.kernel_path_counts()) {
    EXPECT_EQ(path.find("emulated"), std::string::npos) << path;
    if (path.rfind(precision + " ", 0) == 0) quantized += count;
    linears += count;
  }
  // Every block Linear; a mixture's routers stay FP32, as the head does.
  EXPECT_EQ(quantized, linears - (head.format == precision ? 0 : 1) - moe_layers(model.config()))
      << "every block Linear";
  EXPECT_LT(model.bytes_held(), model.fp32_bytes());

  auto run = [&](const DecoderLM& m) {
    std::vector<float> logits(static_cast<size_t>(n * ref.vocab));
    auto cache = m.make_cache();
    m.forward(ref.ids.data(), n, cache, logits.data());
    return logits;
  };
  const auto a = run(fp32), b = run(model), e = run(twin);
  // Weight-only kernels that multiply in BF16 (AVX-512 BF16 CPUs: the 4-bit GEMV and the BF16 prefill
  // panel, named in the kernel path) round activations and dequantized weights to BF16, which the FP32
  // emulated twin does not: 2^-9 per operand, 0.5-1% relative RMS of these random models' logits
  // (measured on Zen 4), so their budget is 2e-2; a wrong layout is off by O(1).
  bool bf16_compute = false;
  for (const auto& [path, count] : model.kernel_path_counts()) {
    bf16_compute =
        bf16_compute || path.find("bf16_panel") != std::string::npos || path.find("avx512_bf16:") != std::string::npos;
  }
  const double twin_budget = bf16_compute && precision != "bf16" ? 2e-2 : precision == "int8" ? 1e-2 : 1e-3;
  EXPECT_LE(relative_rms(e, b), twin_budget) << "vs the emulated twin";
  const bool four_bit = precision == "int4" || precision == "nf4";
  const bool eight_bit = precision == "int8" || precision == "w8";
  // A mixture's router picks among close experts: the format's rounding flips some token's choice (tiny-mixtral in
  // bf16: 2.7%), so its 16-bit budget is the 8-bit one.
  const bool routed = moe_layers(model.config()) > 0;
  // int8 on CPUs without VNNI keeps 7 of its 8 bits (formats.h, ":w7bit"): twice the weights' step, twice the budget
  // (tiny-llama on a Zen 3: 0.059).
  bool seven_bit = false;
  for (const auto& [path, count] : model.kernel_path_counts()) seven_bit = seven_bit || path.ends_with(":w7bit");
  EXPECT_LE(relative_rms(a, b), four_bit ? 0.5 : seven_bit ? 0.1 : eight_bit || routed ? 0.05 : 0.01) << "vs FP32";
}

INSTANTIATE_TEST_SUITE_P(Formats, DecoderFormatTest,
                         ::testing::Combine(::testing::ValuesIn(qjoule::test::decoder_fixture_names()),
                                            ::testing::Values("bf16", "fp16", "int8", "w8", "int4", "nf4")),
                         [](const auto& param_info) {
                           return qjoule::test::param_name(std::get<0>(param_info.param) + "_" +
                                                           std::get<1>(param_info.param));
                         });

}  // namespace
