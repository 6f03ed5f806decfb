// `qjoule export` (model/export/checkpoint_export.h): each exportable spec written from the tiny decoders,
// imported back, runs bit for bit what qjoule's own format runs on the original; numpy's reader
// (tools/read_quantized_checkpoint.py) decodes the export to weights within the format's error budget;
// and every refusal is one line before anything is written.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "decoder_fixtures.h"
#include "error_of.h"
#include "qjoule/model/export/checkpoint_export.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/quantization_plan.h"
#include "prequantized/quantized_checkpoint_test_util.h"
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;
using qjoule::test::error_of;
using qjoule::test::relative_rms;
using ::testing::HasSubstr;
constexpr auto logits_of = qjoule::test::prompt_logits;
qjoule::model::LinearFactory factory(const std::string& precision, const std::string& exclude = "") {
  return qjoule::test::precision_factory(precision, exclude);
}

using qjoule::test::have_numpy;
constexpr auto kPython = qjoule::test::kDebianPython;

struct Case {
  std::string name, fixture, precision;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
class CheckpointExport : public ::testing::TestWithParam<Case> {};

TEST_P(CheckpointExport, ImportedBackRunsBitForBitWhatTheOwnFormatRuns) {
  const auto& p = GetParam();
  const auto src = qjoule::test::decoder_fixture(p.fixture);
  const auto dir = qjoule::test::temp_dir("export_" + p.name);
  const auto spec = qjoule::quant::parse_format_spec(p.precision);
  const auto summary = qjoule::model::export_checkpoint(src, spec, dir / "out");
  EXPECT_EQ(summary.bytes, fs::file_size(dir / "out" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "out" / "tokenizer.json"));

  const auto imported = qjoule::model::load_decoder_lm(dir / "out", factory(p.precision));
  const auto own = qjoule::model::load_decoder_lm(src, factory(p.precision));
  // Every block Linear (q, k, v, o, gate, up, down; each expert's), not the head nor a mixture's routers.
  int linears = 0;
  for (const auto& [path, count] : own.kernel_path_counts()) linears += count;
  EXPECT_EQ(summary.quantized, linears - 1 - qjoule::test::moe_layers(own.config()));
  EXPECT_EQ(imported.kernel_path_counts(), own.kernel_path_counts());
  EXPECT_EQ(imported.bytes_held(), own.bytes_held());
  const auto a = logits_of(imported), b = logits_of(own);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "bit for bit";

  // The reverse direction: numpy reads the export and decodes it; FP32 on those weights is within the
  // format's kernel error (BF16 activations) of the imported run.
  if (!have_numpy()) GTEST_SKIP() << kPython << " with numpy is absent (Debian's python3-numpy)";
  const auto reader =
      qjoule::test::fixtures_dir().parent_path().parent_path() / "tools" / "read_quantized_checkpoint.py";
  const std::string command =
      std::string(kPython) + " " + reader.string() + " " + (dir / "out").string() + " " + (dir / "deq").string();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  EXPECT_LT(relative_rms(a, logits_of(qjoule::model::load_decoder_lm(dir / "deq"))), 2e-2);
}

INSTANTIATE_TEST_SUITE_P(Specs, CheckpointExport,
                         ::testing::Values(Case{"int4_g32_sym", "tiny-llama", "int4:g=32:sym"},
                                           Case{"int4_g64_asym", "tiny-llama", "int4:g=64:asym"},
                                           Case{"int4_g128_asym", "tiny-llama", "int4:g=128:asym"},
                                           Case{"int4_g128_sym_partial_group", "tiny-qwen2", "int4:g=128:sym"},
                                           Case{"nf4", "tiny-llama", "nf4"}, Case{"nf4_dq", "tiny-llama", "nf4:dq"},
                                           Case{"nf4_dq_qwen2", "tiny-qwen2", "nf4:dq"},
                                           Case{"int4_g32_sym_qwen3", "tiny-qwen3", "int4:g=32:sym"},
                                           Case{"int4_g32_sym_mixtral", "tiny-mixtral", "int4:g=32:sym"},
                                           Case{"int4_g32_asym_olmoe", "tiny-olmoe", "int4:g=32:asym"},
                                           Case{"int4_g32_sym_qwen3_moe", "tiny-qwen3-moe", "int4:g=32:sym"}),
                         [](const ::testing::TestParamInfo<Case>& case_info) { return case_info.param.name; });

// fp16 / bf16: every floating tensor converted; the export loads, and an fp16 run of it is the fp16 run
// of the original (FP16 weights convert to FP16 exactly) wherever only the Linears differ.
TEST(CheckpointExport, Fp16AndBf16WritePlainSafetensors) {
  const auto src = qjoule::test::decoder_fixture("tiny-gpt2");
  for (const char* precision : {"fp16", "bf16"}) {
    const auto out = qjoule::test::temp_dir(std::string("export_plain_") + precision) / "out";
    const auto summary = qjoule::model::export_checkpoint(src, qjoule::quant::parse_format_spec(precision), out);
    EXPECT_EQ(summary.quantized, 0);
    EXPECT_EQ(summary.layout, std::string("safetensors ") + precision);
    const auto ck = qjoule::io::Checkpoint::open(out);
    for (const auto& [name, t] : ck.tensors())
      EXPECT_EQ(t.dtype, std::string(precision) == "fp16" ? qjoule::io::DType::F16 : qjoule::io::DType::BF16) << name;
    nlohmann::json config;
    std::ifstream(out / "config.json") >> config;
    EXPECT_EQ(config["torch_dtype"], std::string(precision) == "fp16" ? "float16" : "bfloat16");
    const auto m = qjoule::model::load_decoder_lm(out);
    EXPECT_EQ(logits_of(m).size(), 24u * static_cast<std::size_t>(m.config().vocab_size));
  }
}

TEST(CheckpointExport, RefusalsAreOneLineBeforeAnythingIsWritten) {
  const auto llama = qjoule::test::decoder_fixture("tiny-llama");
  const auto dir = qjoule::test::temp_dir("export_refusals");
  const auto refusal = [&](const fs::path& model, const std::string& precision, const fs::path& out) {
    return error_of([&] { qjoule::model::export_checkpoint(model, qjoule::quant::parse_format_spec(precision), out); });
  };
  for (const char* spec : {"int8", "w8", "fp32", "int4:g=64:asym:a8", "bf16:emulate"})
    EXPECT_THAT(
        refusal(llama, spec, dir / "a"),
        HasSubstr(std::string("--precision ") + qjoule::quant::to_string(qjoule::quant::parse_format_spec(spec)) +
                  ": no checkpoint layout holds it; qjoule exports int4:g=32|64|128[:sym|:asym], nf4, "
                  "nf4:dq, fp16, bf16"));
  EXPECT_FALSE(fs::exists(dir / "a"));
  EXPECT_THAT(refusal(qjoule::test::decoder_fixture("tiny-gpt2"), "nf4", dir / "b"),
              HasSubstr("GPT-2's Conv1D layers have no GPTQ or bitsandbytes layout qjoule writes"));
  // tiny-bert's hidden size 32 is below bitsandbytes' blocks of 64.
  EXPECT_THAT(refusal(qjoule::test::fixtures_dir() / "tiny-bert", "nf4", dir / "c"),
              HasSubstr("tensor 'bert.encoder.layer.0.attention.output.dense.weight' is [32, 32]: bitsandbytes' blocks "
                        "of 64 run over the flattened weight, so in_features must be a multiple of 64"));
  // An export is not exported again, and an output folder with files is never overwritten.
  qjoule::model::export_checkpoint(llama, qjoule::quant::parse_format_spec("int4:g=128:asym"), dir / "gptq");
  EXPECT_THAT(refusal(dir / "gptq", "nf4", dir / "d"), HasSubstr("the model is pre-quantized already"));
  EXPECT_THAT(refusal(llama, "nf4", dir / "gptq"),
              HasSubstr("the folder holds files already; expected a new or empty folder"));
  EXPECT_FALSE(fs::exists(dir / "b") || fs::exists(dir / "c") || fs::exists(dir / "d"));
}

// A BERT classifier exported as GPTQ and imported back classifies bit for bit as qjoule's own int4.
TEST(CheckpointExport, ABertClassifierRoundTrips) {
  const auto src = qjoule::test::fixtures_dir() / "tiny-bert";
  const auto out = qjoule::test::temp_dir("export_bert") / "out";
  const auto summary = qjoule::model::export_checkpoint(src, qjoule::quant::parse_format_spec("int4:g=32:asym"), out);
  EXPECT_EQ(summary.quantized, 6 * 2);  // two layers of query, key, value, attention output, intermediate, output
  const auto run = [](const qjoule::model::EncoderClassifier& m) {
    const int64_t batch = 2, seq = 10;
    std::vector<int32_t> ids(static_cast<std::size_t>(batch * seq)), mask(ids.size(), 1);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 17 + 3) % 53);
    std::vector<float> logits(static_cast<std::size_t>(batch * m.config().num_labels));
    m.forward(ids.data(), mask.data(), batch, seq, logits.data());
    return logits;
  };
  const auto a = run(qjoule::model::load_encoder_classifier(out, factory("int4:g=32:asym")));
  const auto b = run(qjoule::model::load_encoder_classifier(src, factory("int4:g=32:asym")));
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "bit for bit";
}

}  // namespace
