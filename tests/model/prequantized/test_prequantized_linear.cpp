// Pre-quantized GPTQ and AWQ checkpoints of the tiny decoders, written by the test from the public
// layouts (prequantized_writer.h): imported, their logits are bit for bit those of qjoule's own int4
// format on the same codes, within int4's error budget of the FP32 model the codes decode to, and each
// broken or foreign layout is one line.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "decoder_fixtures.h"
#include "error_of.h"
#include "prequantized_writer.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/quantization_plan.h"
#include "quantized_checkpoint_test_util.h"
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;
using qjoule::test::error_of;
using qjoule::test::LinearCodes;
using qjoule::test::PrequantizedLayout;
using qjoule::test::qjoule_codes;
using qjoule::test::relative_rms;
using ::testing::HasSubstr;
constexpr auto logits_of = qjoule::test::prompt_logits;
qjoule::model::LinearFactory factory(const std::string& precision, const std::string& exclude = "") {
  return qjoule::test::precision_factory(precision, exclude);
}

// One group per row: scale and zero from the row's range (the test's own asym rule).
LinearCodes per_row_codes(const std::string&, const std::vector<float>& w, int64_t out, int64_t in) {
  LinearCodes c{out, in, 1, {}, {}, {}};
  c.u.resize(static_cast<std::size_t>(out * in));
  for (int64_t o = 0; o < out; ++o) {
    const float* row = w.data() + o * in;
    const float lo = std::min(0.0f, *std::min_element(row, row + in)),
                hi = std::max(0.0f, *std::max_element(row, row + in));
    const uint16_t d = qjoule::quant::fp32_to_fp16_bits((hi - lo) / 15.0f);
    const float s = qjoule::quant::fp16_bits_to_fp32(d);
    const int z = std::clamp(static_cast<int>(std::nearbyint(-lo / s)), 0, 15);
    c.scale.push_back(d);
    c.zero.push_back(z);
    for (int64_t i = 0; i < in; ++i)
      c.u[static_cast<std::size_t>(o * in + i)] =
          static_cast<uint8_t>(std::clamp(static_cast<int>(std::nearbyint(row[i] / s)) + z, 0, 15));
  }
  return c;
}

// The FP32 model whose block Linears hold `decoded` (what the checkpoint's codes decode to).
std::vector<float> decoded_fp32_logits(const fs::path& src, const std::map<std::string, std::vector<float>>& decoded) {
  const auto ck = qjoule::io::Checkpoint::open(src);
  auto params = qjoule::model::load_decoder_params(ck, qjoule::model::load_decoder_config(src, ck));
  for (auto& layer : params.layers)
    for (auto* p : {&layer.q, &layer.k, &layer.v, &layer.o, &layer.gate, &layer.up, &layer.down})
      p->weight = decoded.at(p->name);
  return logits_of(qjoule::model::DecoderLM(std::move(params), qjoule::model::fp32_linear_factory()));
}

struct Case {
  std::string name, fixture, precision;
  PrequantizedLayout layout;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
class PrequantizedImport : public ::testing::TestWithParam<Case> {};

TEST_P(PrequantizedImport, LogitsAreQjoulesOwnFormatOnTheSameCodes) {
  const auto& p = GetParam();
  const auto src = qjoule::test::decoder_fixture(p.fixture);
  const auto dst = qjoule::test::temp_dir("prequantized_" + p.name);
  const bool sym = p.precision.ends_with(":sym");
  const int g = p.layout.group_size;
  const auto codes = [&](const std::string& name, const std::vector<float>& w, int64_t out, int64_t in) {
    if (sym) {
      if (g == 32) return qjoule_codes<qjoule::quant::BlockInt4Sym<32>>(name, w, out, in);
      if (g == 64) return qjoule_codes<qjoule::quant::BlockInt4Sym<64>>(name, w, out, in);
      return qjoule_codes<qjoule::quant::BlockInt4Sym<128>>(name, w, out, in);
    }
    if (g == 32) return qjoule_codes<qjoule::quant::BlockInt4Asym<32>>(name, w, out, in);
    if (g == 64) return qjoule_codes<qjoule::quant::BlockInt4Asym<64>>(name, w, out, in);
    return qjoule_codes<qjoule::quant::BlockInt4Asym<128>>(name, w, out, in);
  };
  const auto decoded = qjoule::test::write_prequantized_copy(src, dst, p.layout, codes);

  const auto imported = qjoule::model::load_decoder_lm(dst, factory(p.precision));
  const auto own = qjoule::model::load_decoder_lm(src, factory(p.precision));
  EXPECT_EQ(imported.kernel_path_counts(), own.kernel_path_counts());
  EXPECT_EQ(imported.bytes_held(), own.bytes_held());
  const auto a = logits_of(imported), b = logits_of(own);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "bit for bit";
  // Independently: the FP32 model of the decoded weights, within int4's kernel error (BF16 activations).
  EXPECT_LT(relative_rms(a, decoded_fp32_logits(src, decoded)), 2e-2);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, PrequantizedImport,
    ::testing::Values(
        Case{"gptq_v2_asym_g32", "tiny-llama", "int4:g=32:asym", {"gptq", 32, false, true, true}},
        Case{"gptq_v2_asym_g64", "tiny-llama", "int4:g=64:asym", {"gptq", 64, false, true, true}},
        Case{"gptq_v2_asym_g128", "tiny-llama", "int4:g=128:asym", {"gptq", 128, false, true, false}},
        Case{"gptq_v2_sym_g128", "tiny-llama", "int4:g=128:sym", {"gptq", 128, true, true, true}},
        Case{"gptq_v1_sym_g64", "tiny-llama", "int4:g=64:sym", {"gptq", 64, true, false, true}},
        Case{"gptq_v2_asym_bias_partial_group", "tiny-qwen2", "int4:g=128:asym", {"gptq", 128, false, true, true}},
        Case{"awq_g128", "tiny-llama", "int4:g=128:asym", {"awq", 128, false, true, false}},
        Case{"awq_g32", "tiny-qwen2", "int4:g=32:asym", {"awq", 32, false, true, false}}),
    [](const ::testing::TestParamInfo<Case>& case_info) { return case_info.param.name; });

// group_size −1: one scale and zero per row, held as blocks of 128 repeating them.
TEST(PrequantizedImport, OneGroupPerRowRunsAsBlocksOf128) {
  const auto src = qjoule::test::decoder_fixture("tiny-llama");
  const auto dst = qjoule::test::temp_dir("prequantized_per_row");
  const auto decoded = qjoule::test::write_prequantized_copy(src, dst, {"gptq", -1, false, true, true}, per_row_codes);
  const auto imported = qjoule::model::load_decoder_lm(dst, factory("int4:g=128:asym"));
  EXPECT_LT(relative_rms(logits_of(imported), decoded_fp32_logits(src, decoded)), 2e-2);
  EXPECT_THAT(error_of([&] { qjoule::model::load_decoder_lm(dst, factory("int4:g=64:asym")); }),
              HasSubstr("model.layers.0.self_attn.q_proj: the checkpoint holds this Linear as gptq 4-bit, group_size "
                        "-1, asym, desc_act false, gptq_v2 zeros codes, which run as int4:g=128:asym; --precision "
                        "int4:g=64:asym asks for another format"));
  EXPECT_THAT(error_of([&] { qjoule::model::load_decoder_lm(dst); }),
              HasSubstr("FP32 needs the unquantized model (run this one with --precision int4:g=128:asym)"));
}

// Broken checkpoints: one line naming the tensor, what was found and what was expected.
TEST(PrequantizedImport, BrokenCodesScalesAndLayoutsAreOneLine) {
  const auto src = qjoule::test::decoder_fixture("tiny-llama");
  const auto broken = [&](const std::string& name, PrequantizedLayout layout,
                          const std::function<void(LinearCodes&)>& edit, const std::string& asked = "") {
    const auto dst = qjoule::test::temp_dir("prequantized_bad_" + name);
    qjoule::test::write_prequantized_copy(
        src, dst, layout, [&](const std::string& n, const std::vector<float>& w, int64_t out, int64_t in) {
          auto c = layout.sym ? qjoule_codes<qjoule::quant::BlockInt4Sym<128>>(n, w, out, in)
                              : qjoule_codes<qjoule::quant::BlockInt4Asym<128>>(n, w, out, in);
          if (n == "model.layers.1.mlp.up_proj") edit(c);
          return c;
        });
    return error_of([&] {
      qjoule::model::load_decoder_lm(dst, factory(!asked.empty() ? asked
                                                  : layout.sym   ? "int4:g=128:sym"
                                                                 : "int4:g=128:asym"));
    });
  };
  EXPECT_THAT(
      broken("nan_scale", {"gptq", 128, false, true, true}, [](LinearCodes& c) { c.scale[5] = 0x7E00; }),
      HasSubstr("tensor 'model.layers.1.mlp.up_proj.scales' holds NaN at [0, 5], expected a finite FP16 scale"));
  // The checkpoint's own checks come first, whatever format was asked (fp32 here: the one a user who
  // asked for nothing got before), so a broken scale is never hidden behind a format question.
  EXPECT_THAT(
      broken(
          "nan_scale_fp32", {"gptq", 128, false, true, true}, [](LinearCodes& c) { c.scale[5] = 0x7E00; }, "fp32"),
      HasSubstr("tensor 'model.layers.1.mlp.up_proj.scales' holds NaN at [0, 5], expected a finite FP16 scale"));
  // The classic format keeps z − 1: a zero point of 0 is stored as 15 and reads back as 16.
  EXPECT_THAT(broken("v1_zero_16", {"gptq", 128, false, false, true}, [](LinearCodes& c) { c.zero[3] = 0; }),
              HasSubstr("tensor 'model.layers.1.mlp.up_proj.qzeros' gives zero point 16 at group 0, output 3 (stored "
                        "15 in the classic format, which keeps z − 1), expected 0 to 15"));
  EXPECT_THAT(broken("sym_zero", {"gptq", 128, true, true, true}, [](LinearCodes& c) { c.zero[0] = 9; }),
              HasSubstr("gives zero point 9 at group 0, output 0; sym = true expects 8 everywhere"));

  // A layout that is not the one config.json names (AWQ tensors under a GPTQ config).
  const auto awq = qjoule::test::temp_dir("prequantized_bad_awq_as_gptq");
  qjoule::test::write_prequantized_copy(src, awq, {"awq", 128, false, true, false},
                                        qjoule_codes<qjoule::quant::BlockInt4Asym<128>>);
  nlohmann::json config;
  std::ifstream(awq / "config.json") >> config;
  config["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}, {"sym", false}};
  std::ofstream(awq / "config.json") << config.dump();
  EXPECT_THAT(error_of([&] { qjoule::model::load_decoder_lm(awq, factory("int4:g=128:asym")); }),
              HasSubstr("intermediate_size = 256, but the packed tensors of 'model.layers.0.mlp.gate_proj' give 32"));
  // Unsupported group sizes: before anything loads.
  config["quantization_config"]["group_size"] = 96;
  std::ofstream(awq / "config.json") << config.dump();
  EXPECT_THAT(error_of([&] { qjoule::model::load_decoder_lm(awq, factory("int4:g=128:asym")); }),
              HasSubstr("group_size 96 does not fit qjoule's int4 blocks"));
  // g_idx that is not in order (act-order written without saying so).
  const auto shuffled = qjoule::test::temp_dir("prequantized_bad_g_idx");
  qjoule::test::write_prequantized_copy(src, shuffled, {"gptq", 64, false, true, true, /*g_idx_out_of_order=*/true},
                                        qjoule_codes<qjoule::quant::BlockInt4Asym<64>>);
  EXPECT_THAT(
      error_of([&] { qjoule::model::load_decoder_lm(shuffled, factory("int4:g=64:asym")); }),
      HasSubstr("tensor 'model.layers.0.self_attn.q_proj.g_idx' puts input 0 in group 1, expected 0 (desc_act = "
                "false: groups in order)"));
}

}  // namespace
