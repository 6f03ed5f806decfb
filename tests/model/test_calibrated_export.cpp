// `qjoule export` of calibrated int4 (model/checkpoint_export.h with a CalibratedInt4): the GPTQ folder
// imported back runs bit for bit what the calibrated precision runs on the original (its codes, and the
// norms AWQ's scales changed), its g_idx is column / G (act-order's static groups too), and numpy's
// reader (tools/read_quantized_checkpoint.py) decodes it to weights that run within the format's error.
#include <cstdlib>
#include <cstring>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "calibration_test_util.h"
#include "decoder_fixtures.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/checkpoint_export.h"
#include "qjoule/model/decoder_calibration.h"
#include "qjoule/model/decoder_loading.h"
#include "quantized_checkpoint_test_util.h"
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

INSTANTIATE_TEST_SUITE_P(Specs, CalibratedExport,
                         ::testing::Values(Case{"gptq_g32_sym", "tiny-llama", "int4:g=32:sym:gptq"},
                                           Case{"gptq_g64_asym_actorder", "tiny-qwen2", "int4:g=64:asym:gptq:actorder"},
                                           Case{"awq_g32_sym", "tiny-llama", "int4:g=32:sym:awq"},
                                           Case{"awq_g128_asym_qwen2", "tiny-qwen2", "int4:g=128:asym:awq"}),
                         [](const ::testing::TestParamInfo<Case>& case_info) { return case_info.param.name; });

}  // namespace
