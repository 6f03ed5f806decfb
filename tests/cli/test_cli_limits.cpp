// `qjoule limits` and the roofs in bench records: measured once, read from the cache on the next call;
// the records of a CPU bench carry the limits and each phase's fraction of its roof; a deliberately
// slowed kernel (QJOULE_TEST_SLOW_FORWARD_MS) is flagged below 30% of the limit (which fractions are
// flagged, and which are not, is tests/bench/test_paper_table.cpp's: no timing asserted here).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench_cli_helpers.h"
#include "qjoule/kernels/cuda_device.h"
#include "run_command.h"
#include "test_paths.h"

namespace {

using qjoule::test::no_sensors;
using qjoule::test::read_records;
using qjoule::test::run_command;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

std::string qjoule() { return qjoule::test::qjoule_binary().string(); }
fs::path tiny_bert() { return qjoule::test::fixtures_dir() / "tiny-bert"; }
fs::path tiny_decoder() { return qjoule::test::fixtures_dir() / "decoders" / "tiny-llama"; }

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The limits file of a machine whose roofs are `fraction_of` × what a run achieved: that run sits at
// 1 / fraction_of of them.
void write_limits(const fs::path& path, double gflops, double gb_per_s) {
  const nlohmann::json l = {{"version", 2},
                            {"device", "cpu"},
                            {"threads", 1},
                            {"read_gb_per_s", gb_per_s},
                            {"triad_gb_per_s", gb_per_s},
                            {"fp32_gflops", gflops},
                            {"bf16_gflops", gflops},
                            {"int8_gops", gflops},
                            {"tf32_gflops", nullptr},
                            {"fp16_gflops", nullptr},
                            {"fp8_gflops", nullptr},
                            {"unavailable", nlohmann::json::object()},
                            {"amx", ""},
                            {"method", "a test's"},
                            {"machine", "test"},
                            {"measured_at", "2026-11-26T00:00:00Z"},
                            {"measure_seconds", 0.0}};
  std::ofstream(path) << l.dump();
}

TEST(CliLimits, MeasuredOnceThenReadFromTheCacheAndWrittenAsJson) {
  const auto dir = qjoule::test::temp_dir("cli_limits_cache");
  const std::string env = "XDG_CACHE_HOME=" + (dir / "cache").string() + " ";
  const auto first = run_command(env + qjoule() + " limits --threads 1 --json " + (dir / "l.json").string());
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_THAT(first.output, HasSubstr("machine limits with 1 thread: measured in"));
  EXPECT_THAT(first.output, HasSubstr("memory read"));
  EXPECT_THAT(first.output, HasSubstr("fp32 FMA"));
  EXPECT_TRUE(fs::exists(dir / "cache" / "qjoule" / "limits-t1.json"));
  const auto json = nlohmann::json::parse(read_text(dir / "l.json"));
  EXPECT_EQ(json["threads"], 1);
  EXPECT_GT(json["read_gb_per_s"].get<double>(), 0.0);
  EXPECT_GT(json["fp32_gflops"].get<double>(), 0.0);

  const auto second = run_command(env + qjoule() + " limits --threads 1");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_THAT(second.output, HasSubstr("read from " + (dir / "cache" / "qjoule" / "limits-t1.json").string()));
  // The same figures, as written.
  char read[32];
  std::snprintf(read, sizeof read, "%.1f GB/s", json["read_gb_per_s"].get<double>());
  EXPECT_THAT(second.output, HasSubstr(read));
}

TEST(CliLimits, AMeasurementThatSharedItsCoresIsFlaggedAndNotCached) {
  const auto dir = qjoule::test::temp_dir("cli_limits_contended");
  const std::string env = "XDG_CACHE_HOME=" + (dir / "cache").string() + " ";
  const auto contended = run_command(env + "QJOULE_TEST_CONTENDED_CORES=0.9 " + qjoule() +
                                     " limits --threads 1 --json " + (dir / "l.json").string());
  ASSERT_EQ(contended.exit_code, 0) << contended.output;
  EXPECT_THAT(contended.output,
              HasSubstr("not cached: other processes used 0.90 cores that its 1 thread needed while it was measured"));
  EXPECT_THAT(contended.output,
              HasSubstr("! other processes used 0.90 cores that its 1 thread needed while it was measured: these "
                        "figures may be low; run `qjoule limits --refresh` when the machine is quiet"));
  EXPECT_FALSE(fs::exists(dir / "cache" / "qjoule" / "limits-t1.json"));
  EXPECT_THAT(nlohmann::json::parse(read_text(dir / "l.json"))["contention"].get<std::string>(),
              HasSubstr("other processes used 0.90 cores"));
  // The next call measures again (and, uncontended, caches).
  const auto quiet = run_command(env + qjoule() + " limits --threads 1");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_THAT(quiet.output, HasSubstr("measured in"));
  EXPECT_THAT(quiet.output, HasSubstr("(no cache yet)"));
  EXPECT_TRUE(fs::exists(dir / "cache" / "qjoule" / "limits-t1.json"));
}

TEST(CliLimits, ACacheOfAnotherMachineOrBrokenIsMeasuredOverAndABadLimitsFileIsOneLine) {
  const auto dir = qjoule::test::temp_dir("cli_limits_stale");
  fs::create_directories(dir / "cache" / "qjoule");
  const std::string env = "XDG_CACHE_HOME=" + (dir / "cache").string() + " ";
  std::ofstream(dir / "cache" / "qjoule" / "limits-t1.json") << "{ not json";
  const auto broken = run_command(env + qjoule() + " limits --threads 1");
  ASSERT_EQ(broken.exit_code, 0) << broken.output;
  EXPECT_THAT(broken.output, HasSubstr("the cache could not be read"));
  auto json = nlohmann::json::parse(read_text(dir / "cache" / "qjoule" / "limits-t1.json"));
  json["machine"] = "cpu=another; microcode=0x1; memory=1 kB; kernel=0";
  std::ofstream(dir / "cache" / "qjoule" / "limits-t1.json") << json.dump();
  const auto other = run_command(env + qjoule() + " limits --threads 1");
  EXPECT_THAT(other.output, HasSubstr("the cache was for another machine (cpu=another"));

  // A limits file whose fp32 peak is far below what the cores give now: said, with what to do.
  write_limits(dir / "low.json", 1.0, 1.0);
  const auto low = run_command("QJOULE_LIMITS_FILE=" + (dir / "low.json").string() + " " + qjoule() + " limits");
  ASSERT_EQ(low.exit_code, 0) << low.output;
  EXPECT_THAT(low.output, HasSubstr("! an FMA probe reads "));
  EXPECT_THAT(low.output, HasSubstr("x the cached fp32 peak: these figures were measured on a busier host; run "
                                    "`qjoule limits --refresh` when the machine is quiet"));

  std::ofstream(dir / "bad.json") << R"({"version": 2, "device": "cpu", "threads": 2})";
  const auto bad = run_command("QJOULE_LIMITS_FILE=" + (dir / "bad.json").string() + " " + qjoule() + " limits");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("machine limits: key 'read_gb_per_s' is missing"));
  const auto missing = run_command("QJOULE_LIMITS_FILE=" + (dir / "none.json").string() + " " + qjoule() + " limits");
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("QJOULE_LIMITS_FILE=" + (dir / "none.json").string() + ": cannot be read"));
  const auto tpu = run_command(qjoule() + " limits --device tpu");
  EXPECT_EQ(tpu.exit_code, 1) << tpu.output;
  EXPECT_THAT(tpu.output, HasSubstr("tpu"));
  const auto zero = run_command(qjoule() + " limits --threads 0");
  EXPECT_EQ(zero.exit_code, 1) << zero.output;
  EXPECT_THAT(zero.output, HasSubstr("--threads"));
}

// The limits are measured before the first run, not inside it: their bandwidth buffers (at least
// 640 MiB together) would otherwise count in its peak memory.
TEST(CliLimits, MeasuringTheLimitsDoesNotCountInARunsPeakMemory) {
  const auto dir = qjoule::test::temp_dir("cli_limits_peak");
  const auto r =
      run_command(no_sensors(dir) + "XDG_CACHE_HOME=" + (dir / "cache").string() + " " + qjoule() + " bench --model " +
                  tiny_bert().string() + " --precisions fp32 --seq 16 --batch 2 --iters 3 --threads 1 --idle 0 --out " +
                  (dir / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("machine limits with 1 thread: measured in"));
  const auto rec = read_records(dir / "out" / "results.jsonl").at(0);
  ASSERT_TRUE(rec["roof_fraction"].is_number()) << rec;
  ASSERT_TRUE(rec["peak_rss_bytes"].is_number()) << rec;
  EXPECT_LT(rec["peak_rss_bytes"].get<double>(), 400.0 * 1024 * 1024) << "the limits' buffers counted in the run";
}

TEST(CliLimits, AGpuWithoutAUsableGpuSaysWhyInOneLine) {
  const auto& status = qjoule::kernels::cuda_device_status();
  if (status.usable) GTEST_SKIP() << "a GPU is usable here: the GPU limits are measured (gpu-acceptance)";
  const auto r = run_command(qjoule() + " limits --device cuda:0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(status.reason));
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST(CliBenchRoofline, RecordsCarryTheLimitsAndASlowedKernelIsFlaggedBelowThirtyPercent) {
  const auto dir = qjoule::test::temp_dir("cli_bench_roofline");
  const std::string bench = qjoule() + " bench --model " + tiny_bert().string() +
                            " --precisions fp32 --seq 16 --batch 2 --iters 20 --threads 1 --idle 0 --out ";
  // First at its own speed, against roofs far below it: what it achieves.
  write_limits(dir / "low.json", 1e-3, 1e-3);
  const auto base = run_command(no_sensors(dir) + "QJOULE_LIMITS_FILE=" + (dir / "low.json").string() + " " + bench +
                                (dir / "base").string());
  ASSERT_EQ(base.exit_code, 0) << base.output;
  const auto rec = read_records(dir / "base" / "results.jsonl").at(0);
  ASSERT_TRUE(rec["roof_gflops"].is_number()) << rec;
  EXPECT_TRUE(rec["roof_unavailable"].is_null());
  EXPECT_EQ(rec["environment"]["machine_limits"]["method"], "a test's");
  EXPECT_THAT(rec["environment"]["machine_limits"]["source"].get<std::string>(), HasSubstr("QJOULE_LIMITS_FILE"));
  EXPECT_GT(rec["roof_flops_per_token"].get<double>(), 0.0);
  EXPECT_GT(rec["roof_bytes_per_token"].get<double>(), 0.0);
  const double achieved = rec["roof_gflops"].get<double>();
  const double intensity = rec["roof_flops_per_token"].get<double>() / rec["roof_bytes_per_token"].get<double>();
  // Roofs at 1.25x what it achieved (compute; the memory roof far above): about 80% of the limit.
  write_limits(dir / "fit.json", achieved * 1.25, achieved * 1.25 / intensity * 1e3);
  const std::string fit = no_sensors(dir) + "QJOULE_LIMITS_FILE=" + (dir / "fit.json").string() + " ";
  const auto own = run_command(fit + bench + (dir / "own").string());
  ASSERT_EQ(own.exit_code, 0) << own.output;
  const auto own_rec = read_records(dir / "own" / "results.jsonl").at(0);
  ASSERT_TRUE(own_rec["roof_fraction"].is_number()) << own_rec;
  EXPECT_THAT(own_rec["roof_bound"].get<std::string>(), HasSubstr("compute: fp32"));
  EXPECT_THAT(read_text(dir / "own" / "summary.md"), HasSubstr("% roof"));
  // The same run with every forward slowed by 20 ms: far below its roof, and said so.
  const auto slow = run_command(fit + "QJOULE_TEST_SLOW_FORWARD_MS=20 " + bench + (dir / "slow").string());
  ASSERT_EQ(slow.exit_code, 0) << slow.output;
  const auto slow_rec = read_records(dir / "slow" / "results.jsonl").at(0);
  EXPECT_LT(slow_rec["roof_fraction"].get<double>(), 0.3) << slow_rec;
  const std::string summary = read_text(dir / "slow" / "summary.md");
  EXPECT_THAT(summary, HasSubstr("! Below 30% of the machine's limit:"));
  EXPECT_THAT(summary, HasSubstr(slow_rec["run_name"].get<std::string>() + ": batches at "));
  EXPECT_THAT(summary, HasSubstr("limited by qjoule's kernel, not by the hardware or the format"));
  EXPECT_THAT(read_text(dir / "slow" / "results.csv"), HasSubstr(",roof_fraction,"));
  // At its own speed against roofs 30x above it (about 3%, below 30% however much faster this run is),
  // on a host that delivered 1% of its FP32 peak: the host is blamed, not the kernel, and the record says
  // what the host delivered.
  write_limits(dir / "far.json", achieved * 30, achieved * 30 / intensity * 1e3);
  const auto busy = run_command(no_sensors(dir) + "QJOULE_LIMITS_FILE=" + (dir / "far.json").string() +
                                " QJOULE_TEST_HOST_CAPACITY=0.01 " + bench + (dir / "busy").string() + " 2>&1");
  ASSERT_EQ(busy.exit_code, 0) << busy.output;
  EXPECT_THAT(busy.output, HasSubstr("; busy host: 1% of its FP32 peak (see notes)\n"));  // on the run's line
  const auto busy_rec = read_records(dir / "busy" / "results.jsonl").at(0);
  const auto& host = busy_rec["environment"]["host_capacity"];
  EXPECT_NEAR(host["delivered_fraction"].get<double>(), 0.01, 1e-9) << host;
  EXPECT_NEAR(host["fp32_gflops_before"].get<double>(), achieved * 0.3, achieved * 1e-9) << host;
  EXPECT_THAT(busy_rec["notes"].dump(), HasSubstr("busy host: the host delivered 1% of its measured FP32 peak"));
  const std::string busy_summary = read_text(dir / "busy" / "summary.md");
  EXPECT_THAT(busy_summary, HasSubstr(busy_rec["run_name"].get<std::string>() + ": batches at "));
  EXPECT_THAT(busy_summary, HasSubstr(", on a busy host: the host delivered 1%"));
  EXPECT_THAT(busy_summary, Not(HasSubstr("limited by qjoule's kernel")));
  // Without the knob (a quiet host against these roofs, or one busy by less than the shortfall) the
  // record still carries the probes.
  EXPECT_TRUE(own_rec["environment"]["host_capacity"]["fp32_gflops_after"].is_number()) << own_rec;
  // Those roofs are far below what the FMA probes read (a tiny model's rate): the record says the
  // limits were measured low.
  EXPECT_THAT(own_rec["notes"].dump(), HasSubstr("machine limits: the FMA probes around this run read up to "));
}

TEST(CliBenchRoofline, ADecoderRecordsPrefillAndDecodeAgainstTheReadBandwidth) {
  const auto dir = qjoule::test::temp_dir("cli_bench_roofline_decoder");
  write_limits(dir / "l.json", 100.0, 10.0);
  const auto r = run_command(no_sensors(dir) + "QJOULE_LIMITS_FILE=" + (dir / "l.json").string() + " " + qjoule() +
                             " bench --model " + tiny_decoder().string() +
                             " --precisions fp32 --seq 16 --decode-tokens 4 --iters 3 --threads 1 --idle 0 --out " +
                             (dir / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rec = read_records(dir / "out" / "results.jsonl").at(0);
  ASSERT_TRUE(rec["decode_roof_fraction"].is_number()) << rec;
  // decode: bytes per token × tok/s over the read bandwidth; the bytes are the model's but the embedding
  // table (one row read) and with the KV cache: near model_bytes.
  EXPECT_NEAR(
      rec["decode_roof_fraction"].get<double>(),
      rec["decode_roof_bytes_per_token"].get<double>() * rec["decode_tokens_per_s_mean"].get<double>() / 1e9 / 10.0,
      1e-9);
  EXPECT_GT(rec["decode_roof_bytes_per_token"].get<double>(), rec["model_bytes"].get<double>() * 0.5);
  EXPECT_LT(rec["decode_roof_bytes_per_token"].get<double>(), rec["model_bytes"].get<double>() * 1.5);
  EXPECT_EQ(rec["decode_roof_bound"], "memory: read 10.0 GB/s");
  EXPECT_TRUE(rec["roof_fraction"].is_number());
  EXPECT_THAT(read_text(dir / "out" / "summary.md"), HasSubstr("decode % roof"));
}

}  // namespace
