// The CPU path carries no GPU: `qjoule` links no CUDA library (cuBLASLt is loaded with dlopen on the
// first GPU use), and with cuBLASLt out of reach (QJOULE_CUBLASLT_LIB pointing nowhere) every CPU
// command works as before while `--device cuda` ends in one line saying what is missing.
#include <algorithm>
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/kernels/cuda_device.h"
#include "bench_cli_helpers.h"
#include "run_command.h"
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;
using qjoule::test::no_sensors;
using qjoule::test::run_command;
using ::testing::HasSubstr;

std::string qjoule() { return qjoule::test::qjoule_binary().string(); }
fs::path tiny_bert() { return qjoule::test::fixtures_dir() / "tiny-bert"; }
const std::string kHidden = "QJOULE_CUBLASLT_LIB=/nonexistent/libcublasLt.so.13 ";

TEST(CliWithoutCudaLibraries, LddListsNoCudaLibrary) {
  const auto r = run_command("ldd " + qjoule());
  if (r.exit_code != 0) GTEST_SKIP() << "ldd did not run: " << r.output;
  for (const char* library : {"libcublas", "libcudart", "libcuda.so", "libnvrtc", "libcublasLt"})
    EXPECT_THAT(r.output, ::testing::Not(HasSubstr(library))) << r.output;
}

TEST(CliWithoutCudaLibraries, VersionSaysWhereCublasLtWouldLoadFrom) {
  const auto r = run_command(qjoule() + " --version");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  if (!qjoule::kernels::cuda_device_status().built) {
    EXPECT_THAT(r.output, ::testing::Not(HasSubstr("cuBLASLt")));
    return;
  }
  EXPECT_THAT(r.output, HasSubstr("cuda(CUDA "));
  EXPECT_THAT(r.output, HasSubstr("cuBLASLt (loaded on first GPU use): "));
  const auto hidden = run_command(kHidden + qjoule() + " --version");
  ASSERT_EQ(hidden.exit_code, 0) << hidden.output;
  EXPECT_THAT(hidden.output, HasSubstr("not found: QJOULE_CUBLASLT_LIB=/nonexistent/libcublasLt.so.13 does not exist"));
}

TEST(CliWithoutCudaLibraries, CpuCommandsWorkAndCudaSaysWhatIsMissing) {
  const fs::path dir = qjoule::test::temp_dir("cli_without_cuda_libraries");
  const std::string dataset = (tiny_bert() / "dataset.tsv").string();
  const auto eval = run_command(kHidden + qjoule() + " eval --model " + tiny_bert().string() + " --dataset " + dataset);
  EXPECT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_THAT(eval.output, HasSubstr("accuracy"));
  const auto bench = run_command(kHidden + no_sensors(dir) + qjoule() + " bench --model " + tiny_bert().string() +
                                 " --dataset " + dataset + " --precisions fp32 --batch 2 --seq 8 --threads 1 " +
                                 "--iters 3 --warmup 1 --idle 0 --out " + (dir / "out").string());
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  const auto report = run_command(kHidden + qjoule() + " report " + (dir / "out" / "results.jsonl").string() + " -o " +
                                  (dir / "report.html").string());
  EXPECT_EQ(report.exit_code, 0) << report.output;
  EXPECT_TRUE(fs::exists(dir / "report.html"));
  const auto cuda = run_command(kHidden + no_sensors(dir) + qjoule() + " bench --model " + tiny_bert().string() +
                                " --precisions fp32 --batch 2 --seq 8 --device cuda --out " + (dir / "gpu").string());
  EXPECT_NE(cuda.exit_code, 0);
  // One line: the GPU that is not there, or (with a GPU) the cuBLASLt that cannot be loaded.
  EXPECT_THAT(cuda.output, HasSubstr("--device cuda: "));
  EXPECT_LE(std::count(cuda.output.begin(), cuda.output.end(), '\n'), 1) << cuda.output;
  if (qjoule::kernels::cuda_device_status().usable) {
    EXPECT_THAT(cuda.output, HasSubstr("cuBLASLt"));
  }
  EXPECT_FALSE(fs::exists(dir / "gpu" / "results.jsonl"));
}

}  // namespace
