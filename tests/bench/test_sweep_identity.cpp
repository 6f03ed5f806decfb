// The identity of a sweep's models and dataset (qjoule/bench/sweep_identity.h): content, not path,
// identifies a checkpoint; a resumed sweep with other models, a changed checkpoint or another dataset is
// one line saying what differs.
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "qjoule/bench/bench_runner.h"
#include "qjoule/bench/sweep_identity.h"
#include "test_paths.h"

namespace qjoule::bench {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using ::testing::HasSubstr;

fs::path copy_of(const std::string& fixture, const std::string& name) {
  const auto dir = test::temp_dir("sweep_identity_" + name);
  fs::copy(test::fixtures_dir() / "decoders" / fixture, dir,
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  return dir;
}

RunConfig config_of(const fs::path& model) {
  RunConfig c;
  c.model = model.string();
  return c;
}

TEST(SweepIdentity, ContentNotPathIdentifiesACheckpoint) {
  EXPECT_EQ(model_identity(kSyntheticModelName), "embedded");
  const auto original = (test::fixtures_dir() / "decoders" / "tiny-llama").string();
  const auto copy = copy_of("tiny-llama", "copy");
  EXPECT_EQ(model_identity(original), model_identity(copy.string()));
  EXPECT_EQ(model_identity(original).size(), 16u);
  std::ofstream(copy / "config.json", std::ios::app) << " ";
  EXPECT_NE(model_identity(original), model_identity(copy.string()));
  EXPECT_NE(model_identity(original), model_identity((test::fixtures_dir() / "decoders" / "tiny-gpt2").string()));
  EXPECT_THAT(error_of([] { (void)model_identity("/no/such/model"); }),
              HasSubstr("/no/such/model/config.json: model config file not found"));
}

TEST(SweepIdentity, AResumeWithOtherModelsAChangedCheckpointOrAnotherDatasetIsOneLine) {
  const auto out = test::temp_dir("sweep_identity_out");
  const auto llama = copy_of("tiny-llama", "llama");
  const auto gpt2 = copy_of("tiny-gpt2", "gpt2");
  check_sweep_identity(out, sweep_identity({config_of(llama)}, ""));
  EXPECT_TRUE(fs::exists(out / kSweepIdentityFileName));
  check_sweep_identity(out, sweep_identity({config_of(llama), config_of(llama)}, ""));  // the same sweep: fine

  EXPECT_THAT(error_of([&] { check_sweep_identity(out, sweep_identity({config_of(gpt2)}, "")); }),
              HasSubstr("sweep-identity.json: this sweep measured model(s) [\"" + llama.string() +
                        "\"], this bench runs [\"" + gpt2.string() + "\"]"));
  EXPECT_THAT(error_of([&] { check_sweep_identity(out, sweep_identity({config_of(llama)}, "dev.tsv")); }),
              HasSubstr("this sweep scored dataset '', this bench 'dev.tsv'"));
  const auto hand_edited = test::temp_dir("sweep_identity_bad_file");
  std::ofstream(hand_edited / kSweepIdentityFileName) << R"({"models": {}, "dataset": 3})";
  EXPECT_THAT(error_of([&] { check_sweep_identity(hand_edited, sweep_identity({config_of(llama)}, "")); }),
              HasSubstr("sweep-identity.json: 'dataset' is 3, expected a string"));
  // --reference: another one, or none where there was one, is one line.
  const auto with_reference = test::temp_dir("sweep_identity_reference");
  check_sweep_identity(with_reference, sweep_identity({config_of(llama)}, "", nullptr, gpt2.string()));
  check_sweep_identity(with_reference, sweep_identity({config_of(llama)}, "", nullptr, gpt2.string()));
  EXPECT_THAT(error_of([&] { check_sweep_identity(with_reference, sweep_identity({config_of(llama)}, "")); }),
              HasSubstr("this sweep compared with --reference " + gpt2.string() + " (identity \"" +
                        model_identity(gpt2.string()) +
                        "\"), this bench with no --reference; resume with the same --reference"));
  std::ofstream(llama / "config.json", std::ios::app) << "\n";
  EXPECT_THAT(error_of([&] { check_sweep_identity(out, sweep_identity({config_of(llama)}, "")); }),
              HasSubstr("model '" + llama.string() + "' has changed since this sweep measured it"));
}

}  // namespace
}  // namespace qjoule::bench
