// `qjoule export` of calibrated int4 (model/export/checkpoint_export.h with a CalibratedInt4): the GPTQ folder
// imported back runs bit for bit what the calibrated precision runs on the original (its codes, and the
// norms AWQ's scales changed), its g_idx is column / G (act-order's static groups too), and numpy's
// reader (tools/read_quantized_checkpoint.py) decodes it to weights that run within the format's error;
// int4:g=32:sym's calibrated codes go to GGUF as Q4_0 and read back bit for bit too.
#include <cstdlib>
#include <cstring>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "calibration/calibration_test_util.h"
#include "decoder_fixtures.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/error.h"
#include "qjoule/model/export/checkpoint_export.h"
#include "qjoule/model/calibration/decoder_calibration.h"
#include "qjoule/model/decoder_loading.h"
#include "qjoule/model/export/gguf_export.h"
#include "qjoule/model/export/gguf_import.h"
#include "prequantized/quantized_checkpoint_test_util.h"
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;
using namespace qjoule;

struct Case {
  std::string name, fixture, precision;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
class CalibratedExport : public ::testing::TestWithParam<Case> {};

TEST_P(CalibratedExport, ImportedBackRunsBitForBitWhatTheCalibratedPrecisionRuns) {
  const auto& p = GetParam();
  const auto src = test::decoder_fixture(p.fixture);
  const auto dir = test::temp_dir("calibrated_export_" + p.name);
  const auto policy = test::policy(p.precision);
  const auto calib = test::text_like_sequences(16, 32, 256, 5);
  const auto calibrated = model::calibrate_decoder(src, policy, calib, {});
  const auto spec = quant::parse_format_spec(p.precision);
  const auto summary = model::export_checkpoint(src, spec, dir / "out", {}, &calibrated);
  EXPECT_EQ(summary.quantized, 7 * 2);

  const auto own = model::load_decoder(src, -1, policy, std::make_shared<model::CalibratedInt4>(calibrated));
  const auto rtn = quant::to_string(quant::round_to_nearest(spec));
  const auto imported = model::load_decoder_lm(dir / "out", test::precision_factory(rtn));
  EXPECT_EQ(imported.kernel_path_counts(), own.model.kernel_path_counts());
  const auto a = test::prompt_logits(imported), b = test::prompt_logits(own.model);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "bit for bit";

  const auto ck = io::Checkpoint::open(dir / "out");
  const auto g_idx = ck.tensors().at("model.layers.1.mlp.down_proj.g_idx");
  const auto* ids = reinterpret_cast<const int32_t*>(g_idx.data);
  for (int64_t i = 0; i < g_idx.shape[0]; ++i) ASSERT_EQ(ids[i], i / spec.group_size) << i;

  if (!test::have_numpy()) GTEST_SKIP() << test::kDebianPython << " with numpy is absent (Debian's python3-numpy)";
  const std::string command = std::string(test::kDebianPython) + " " +
                              test::tool_script("read_quantized_checkpoint.py").string() + " " +
                              (dir / "out").string() + " " + (dir / "deq").string();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  EXPECT_LT(test::relative_rms(a, test::prompt_logits(model::load_decoder_lm(dir / "deq"))), 2e-2);
}

// --to gguf: calibrated int4:g=32:sym as Q4_0 (Llama's Q and K rows permuted as round-to-nearest's are),
// with AWQ's norms; the file read back (gguf_import.h) runs bit for bit what the calibrated precision runs.
TEST(CalibratedGgufExport, ReadBackRunsBitForBitWhatTheCalibratedPrecisionRuns) {
  for (const auto& [fixture, precision] :
       {std::pair{"tiny-llama", "int4:g=32:sym:awq"}, std::pair{"tiny-qwen2", "int4:g=32:sym:gptq:actorder"}}) {
    const auto src = test::decoder_fixture(fixture);
    const auto dir = test::temp_dir(std::string("calibrated_gguf_") + fixture);
    const auto policy = test::policy(precision);
    const auto calibrated = model::calibrate_decoder(src, policy, test::text_like_sequences(16, 32, 256, 5), {});
    const auto spec = quant::parse_format_spec(precision);
    const auto summary = model::export_gguf(src, spec, dir / "m.gguf", {}, &calibrated);
    EXPECT_EQ(summary.quantized, 7 * 2);
    EXPECT_EQ(model::import_gguf(dir / "m.gguf", dir / "back").q4_0, 14);
    const auto own = model::load_decoder(src, -1, policy, std::make_shared<model::CalibratedInt4>(calibrated));
    const auto back = model::load_decoder_lm(dir / "back", test::precision_factory("int4:g=32:sym"));
    const auto a = test::prompt_logits(back), b = test::prompt_logits(own.model);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << fixture << ": bit for bit";
  }
  const auto src = test::decoder_fixture("tiny-llama");
  try {
    model::export_gguf(src, quant::parse_format_spec("int4:g=32:gptq"),
                       test::temp_dir("calibrated_gguf_no") / "m.gguf");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("--precision int4:g=32:sym:gptq: GPTQ's codes come from calibration; "
                                               "expected --calib FILE (or int4:g=32:sym, round-to-nearest)"));
  }
}

// AWQ on a mixture changes the router (the scales folded into the norm before it go into its columns): the GPTQ
// folder and the GGUF file carry the changed router, and both read back run bit for bit what AWQ runs.
TEST(CalibratedExport, AMixturesAwqRouterGoesWithItsCodes) {
  const auto src = test::decoder_fixture("tiny-mixtral");
  const auto dir = test::temp_dir("calibrated_export_mixtral_awq");
  const auto policy = test::policy("int4:g=32:sym:awq");
  const auto calibrated = model::calibrate_decoder(src, policy, test::text_like_sequences(16, 32, 256, 5), {});
  ASSERT_EQ(calibrated.fp32_weights.size(), 2u);
  const auto spec = quant::parse_format_spec("int4:g=32:sym:awq");
  EXPECT_EQ(model::export_checkpoint(src, spec, dir / "gptq", {}, &calibrated).quantized, 2 * (4 + 4 * 3));
  model::export_gguf(src, spec, dir / "m.gguf", {}, &calibrated);
  model::import_gguf(dir / "m.gguf", dir / "back");
  const auto own = model::load_decoder(src, -1, policy, std::make_shared<model::CalibratedInt4>(calibrated));
  const auto b = test::prompt_logits(own.model);
  for (const auto& folder : {dir / "gptq", dir / "back"}) {
    const auto ck = io::Checkpoint::open(folder);
    EXPECT_EQ(ck.to_f32("model.layers.0.block_sparse_moe.gate.weight"),
              calibrated.fp32_weights.at("model.layers.0.block_sparse_moe.gate"))
        << folder;
    const auto a = test::prompt_logits(model::load_decoder_lm(folder, test::precision_factory("int4:g=32:sym")));
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << folder << ": bit for bit";
  }
}

INSTANTIATE_TEST_SUITE_P(Specs, CalibratedExport,
                         ::testing::Values(Case{"gptq_g32_sym", "tiny-llama", "int4:g=32:sym:gptq"},
                                           Case{"gptq_g64_asym_actorder", "tiny-qwen2", "int4:g=64:asym:gptq:actorder"},
                                           Case{"awq_g32_sym", "tiny-llama", "int4:g=32:sym:awq"},
                                           Case{"awq_g128_asym_qwen2", "tiny-qwen2", "int4:g=128:asym:awq"},
                                           Case{"awq_g32_sym_qwen3", "tiny-qwen3", "int4:g=32:sym:awq"}),
                         [](const ::testing::TestParamInfo<Case>& case_info) { return case_info.param.name; });

}  // namespace
