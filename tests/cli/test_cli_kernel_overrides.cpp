// Kernel choices forced through the environment (qjoule/kernels/kernel_overrides.h), end to end: a value
// an override does not take stops any command at once in one line, `qjoule info --kernels` lists them,
// and a bench record names those in force (and none when qjoule chose every kernel).
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench_cli_helpers.h"
#include "run_command.h"
#include "test_paths.h"
#include "qjoule/io/huge_pages.h"

namespace {

using qjoule::test::run_command;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string qjoule() { return qjoule::test::qjoule_binary().string(); }
fs::path tiny_bert() { return qjoule::test::fixtures_dir() / "tiny-bert"; }

TEST(CliKernelOverrides, ABadValueStopsEveryCommandInOneLineButNotHelp) {
  for (const std::string& command :
       std::vector<std::string>{"info --formats", "sensors", "eval --model " + tiny_bert().string()}) {
    const auto r = run_command("QJOULE_WEIGHT_ONLY_PANEL=amx " + qjoule() + " " + command + " 2>&1");
    EXPECT_EQ(r.exit_code, 1) << command;
    EXPECT_EQ(r.output, "qjoule: error: QJOULE_WEIGHT_ONLY_PANEL=amx: expected bf16 or f32\n") << command;
  }
  const auto help = run_command("QJOULE_WEIGHT_ONLY_PANEL=amx " + qjoule() + " bench --help 2>&1");
  EXPECT_EQ(help.exit_code, 0) << help.output;
}

TEST(CliKernelOverrides, InfoKernelsListsEveryOverrideAndItsValueNow) {
  const auto r = run_command("QJOULE_WEIGHT_ONLY_DECODE=x16 " + qjoule() + " info --kernels 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* v : {"QJOULE_WEIGHT_ONLY_DECODE=x16|float", "QJOULE_WEIGHT_ONLY_PANEL=bf16|f32",
                        "QJOULE_FORCE_SCALAR=0|1", "QJOULE_CUDA_GEMV4=split|plain", "QJOULE_DECODE_GRAPH=0|1",
                        "QJOULE_TOKENS_PER_PASS=N", "QJOULE_WEIGHT_ONLY_LAYOUT=repacked|rows", "now: x16"})
    EXPECT_THAT(r.output, HasSubstr(v));
  const auto both = run_command(qjoule() + " info --kernels --formats 2>&1");
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_THAT(both.output, HasSubstr("info: --kernels and --formats are two questions"));
}

TEST(CliKernelOverrides, ABenchRecordNamesTheOverridesInForce) {
  const fs::path dir = qjoule::test::temp_dir("cli_kernel_overrides");
  const std::string args = " bench --model " + tiny_bert().string() +
                           " --precisions nf4 --batch 1 --seq 8 --threads 1 --warmup 0 --iters 1 --min-time 0 --idle 0";
  const auto forced = run_command(qjoule::test::no_sensors(dir) + "QJOULE_FORCE_SCALAR=1 " + qjoule() + args +
                                  " --out " + (dir / "forced").string() + " 2>&1");
  ASSERT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_THAT(forced.output,
              HasSubstr("kernel choices forced by the environment (each record names them): QJOULE_FORCE_SCALAR=1"));
  const auto records = qjoule::test::read_records(dir / "forced" / "results.jsonl");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0]["environment"]["kernel_overrides"], (nlohmann::json{{"QJOULE_FORCE_SCALAR", "1"}}));
  EXPECT_THAT(records[0]["kernel_paths"].dump(), HasSubstr("qjoule:scalar:nf4_f32"));

  const auto chosen = run_command(qjoule::test::no_sensors(dir) + "env -u QJOULE_FORCE_SCALAR " + qjoule() + args +
                                  " --out " + (dir / "chosen").string() + " 2>&1");
  ASSERT_EQ(chosen.exit_code, 0) << chosen.output;
  const auto plain = qjoule::test::read_records(dir / "chosen" / "results.jsonl");
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0]["environment"]["kernel_overrides"], nlohmann::json::object());
  // And the pages its weights were held on: the kernel's transparent huge page mode.
  EXPECT_EQ(plain[0]["environment"]["transparent_hugepages"], qjoule::io::transparent_huge_pages_mode());
}

}  // namespace
