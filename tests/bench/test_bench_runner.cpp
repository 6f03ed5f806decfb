// The bench runner's decoder path on the tiny decoder fixtures (tests/fixtures/decoders): which
// models are decoders, what validate_configs refuses for them, both phases timed and recorded, and
// energy per phase from a scripted sensor (a known wattage) or, without a sensor, null with a reason.
#include <cmath>
#include <filesystem>
#include <span>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "json_schema_subset.h"
#include "qjoule/bench/bench_runner.h"
#include "qjoule/bench/memory_prediction.h"
#include "qjoule/energy/energy_meter.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/cuda_device.h"
#include "scripted_sensors.h"
#include "test_paths.h"

namespace qjoule::bench {
namespace {

using test::error_of;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string decoder(const std::string& name) { return (test::fixtures_dir() / "decoders" / name).string(); }
std::string tiny_bert() { return (test::fixtures_dir() / "tiny-bert").string(); }
const kernels::CudaDeviceStatus& kernels_status() { return kernels::cuda_device_status(); }

const nlohmann::json& schema() {
  static const nlohmann::json s = [] {
    std::ifstream in(QJOULE_BENCH_RECORD_SCHEMA);
    std::stringstream text;
    text << in.rdbuf();
    return nlohmann::json::parse(text.str());
  }();
  return s;
}

RunConfig decoder_config(const std::string& precision, std::size_t seq = 16, const std::string& model = "tiny-llama") {
  RunConfig c;
  c.model = decoder(model);
  c.precision = precision;
  c.batch = 1;
  c.seq = seq;
  c.threads = 1;
  return c;
}

BenchOptions fast_options(std::size_t decode_tokens = 8) {
  BenchOptions o;
  o.warmup = 1;
  o.iters = 3;
  o.decode_tokens = decode_tokens;
  return o;
}

TEST(BenchRunnerDecoder, TellsDecodersFromEncoders) {
  for (const char* name : {"tiny-llama", "tiny-qwen2", "tiny-gpt2"})
    EXPECT_TRUE(is_decoder_model(decoder(name))) << name;
  EXPECT_FALSE(is_decoder_model(tiny_bert()));
  EXPECT_FALSE(is_decoder_model(kSyntheticModelName));
  EXPECT_FALSE(is_decoder_model((test::fixtures_dir() / "no-such-model").string()));
}

TEST(BenchRunnerDecoder, ValidateConfigsRefusesWhatADecoderRunCannotBe) {
  validate_configs({decoder_config("fp32"), decoder_config("int8")}, 8);  // fine

  RunConfig batched = decoder_config("fp32");
  batched.batch = 2;
  EXPECT_EQ(error_of([&] {
              validate_configs({decoder_config("fp32"), batched}, 8);
            }),
            "run tiny-llama_cpu_fp32_s16_bs2_t1: batch 2 with decoder model '" + decoder("tiny-llama") +
                "': decoder runs time one sequence (a prefill of seq prompt tokens, then decode steps), expected "
                "batch 1");

  // tiny-llama has 128 positions: 120 + 8 fits, 120 + 9 does not.
  validate_configs({decoder_config("fp32", 120)}, 8);
  EXPECT_EQ(error_of([&] { validate_configs({decoder_config("fp32", 120)}, 9); }),
            "run tiny-llama_cpu_fp32_s120_bs1_t1: 120 prompt tokens (seq) + 9 decode tokens (--decode-tokens) = 129 "
            "is more than the 128 positions model '" +
                decoder("tiny-llama") + "' has (max_position_embeddings)");
  EXPECT_THAT(error_of([&] { validate_configs({decoder_config("fp32")}, 0); }), HasSubstr("0 decode tokens"));
  EXPECT_THAT(error_of([&] { validate_configs({decoder_config("int8:sq0.5")}, 8); }),
              HasSubstr("SmoothQuant is not supported for decoder model"));

  // Encoders are checked as before, and batch > 1 stays fine for them.
  RunConfig encoder;
  encoder.model = tiny_bert();
  encoder.batch = 4;
  encoder.seq = 16;
  validate_configs({encoder, decoder_config("fp32")}, 8);
}

TEST(BenchRunnerDecoder, RunsPrefillAndDecodeWithoutASensor) {
  energy::EnergyMeter meter(energy::SensorDiscovery{});
  meter.start();
  BenchRunner runner(fast_options(8), meter);
  for (const auto& precision : {"fp32", "int8"}) {
    const RunRecord r = runner.run(decoder_config(precision));
    ASSERT_EQ(r.status, "ok") << r.error;
    EXPECT_EQ(r.prefill_tokens, 16u);
    EXPECT_EQ(r.decode_tokens, 8u);
    EXPECT_EQ(r.iters, 3u);
    EXPECT_EQ(r.decode_iters, 3u);
    ASSERT_TRUE(r.latency);
    EXPECT_EQ(r.latency->count, 3u);
    EXPECT_GT(*r.prefill_tokens_per_s_mean, 0.0);
    EXPECT_GE(*r.prefill_tokens_per_s_std, 0.0);
    EXPECT_GT(*r.decode_tokens_per_s_mean, 0.0);
    EXPECT_GE(*r.decode_tokens_per_s_std, 0.0);
    EXPECT_GT(*r.decode_ms_per_token_mean, 0.0);
    EXPECT_GT(*r.tokens_per_s, 0.0);
    EXPECT_NEAR(*r.tokens_per_s, *r.sequences_per_s * 16, 1e-6 * *r.tokens_per_s);
    // No sensor: every energy figure null, each phase with its reason.
    EXPECT_FALSE(r.energy_j);
    EXPECT_FALSE(r.prefill_mj_per_token);
    EXPECT_FALSE(r.decode_energy_j);
    EXPECT_FALSE(r.decode_mj_per_token);
    EXPECT_THAT(r.energy_unavailable, HasSubstr("no energy sensor"));
    EXPECT_THAT(r.decode_energy_unavailable, HasSubstr("no energy sensor"));
    EXPECT_TRUE(r.energy_window.is_object());
    EXPECT_TRUE(r.decode_energy_window.is_object());
    // Accuracy is qjoule ppl's; fidelity: the next token after 8 prompts, against FP32.
    EXPECT_FALSE(r.accuracy);
    EXPECT_EQ(r.fidelity_examples, kDecoderFidelityPrompts);
    ASSERT_TRUE(r.fidelity_top1_agreement);
    if (std::string(precision) == "fp32") {
      EXPECT_EQ(*r.fidelity_top1_agreement, 1.0);
      EXPECT_EQ(*r.fidelity_max_abs_dlogit, 0.0);
      // tiny-llama is a BF16 checkpoint: its embeddings are held as stored, 2 bytes a value.
      EXPECT_LT(r.model_bytes, r.fp32_bytes);
    } else {
      EXPECT_LT(r.model_bytes, r.fp32_bytes);
      EXPECT_GE(*r.fidelity_top1_agreement, 0.5);
    }
    EXPECT_FALSE(r.kernel_paths.empty());
    const auto json = to_json(r);
    EXPECT_THAT(test::validate_json_schema(schema(), json), IsEmpty()) << json.dump();
    EXPECT_EQ(json["decode_energy_unavailable"], r.decode_energy_unavailable);
  }
}

// The predicted model bytes are the run's exactly (each kind of Linear is built once, as the run
// builds it), and the run's notes give the prediction next to the measured peak.
// A checkpoint tensor the model does not read is a note in the record, naming it (never silent).
TEST(BenchRunnerDecoder, ATensorTheModelDoesNotReadIsNotedInTheRecord) {
  namespace fs = std::filesystem;
  const fs::path dir = test::temp_dir("bench_unused_tensor");
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* file : {"config.json", "tokenizer.json"})
    fs::copy_file(fs::path(decoder("tiny-llama")) / file, dir / file);
  {
    const auto original = io::Checkpoint::open(decoder("tiny-llama"));
    std::vector<io::TensorToWrite> tensors;
    for (const auto& [name, t] : original.tensors())
      tensors.push_back({name, t.dtype, t.shape, std::span<const std::byte>(t.data, t.nbytes)});
    const std::vector<float> extra(4, 1.0f);
    tensors.push_back({"model.layers.0.mlp.up_proj.wieght", io::DType::F32, {4}, std::as_bytes(std::span(extra))});
    io::write_safetensors(dir / "model.safetensors", tensors);
  }
  energy::EnergyMeter meter(energy::SensorDiscovery{});
  meter.start();
  BenchRunner runner(fast_options(4), meter);
  RunConfig c = decoder_config("int8");
  c.model = dir.string();
  const RunRecord r = runner.run(c);
  ASSERT_EQ(r.status, "ok") << r.error;
  EXPECT_THAT(r.notes, ::testing::Contains(dir.string() + ": 1 tensor is not used by the model: "
                                                          "model.layers.0.mlp.up_proj.wieght"));
  const RunRecord clean = runner.run(decoder_config("int8"));
  EXPECT_THAT(clean.notes, ::testing::Not(::testing::Contains(::testing::HasSubstr("not used by the model"))));
}

TEST(BenchRunnerDecoder, PredictsTheRunsModelBytesExactlyAndNotesPredictedAgainstMeasuredPeak) {
  energy::EnergyMeter meter(energy::SensorDiscovery{});
  meter.start();
  BenchRunner runner(fast_options(8), meter);
  for (const char* model : {"tiny-llama", "tiny-gpt2"}) {
    for (const char* precision : {"fp32", "bf16", "int8", "w8", "int4", "nf4"}) {
      const RunConfig c = decoder_config(precision, 8, model);
      const MemoryPrediction p = predict_peak_memory(c, 8, 1000);
      ASSERT_THAT(p.unavailable, IsEmpty());
      EXPECT_EQ(p.baseline_bytes, 1000u);
      EXPECT_GT(p.build_transient_bytes, 0u);
      EXPECT_GT(p.run_bytes, 0u);
      EXPECT_EQ(p.peak_bytes(), p.baseline_bytes + p.model_bytes + p.build_transient_bytes + p.run_bytes);
      const RunRecord r = runner.run(c);
      ASSERT_EQ(r.status, "ok") << r.error;
      EXPECT_EQ(p.model_bytes, r.model_bytes) << model << " " << precision;
      if (r.peak_rss_bytes) {
        bool noted = false;
        for (const auto& n : r.notes) noted = noted || n.find("peak memory predicted") != std::string::npos;
        EXPECT_TRUE(noted) << model << " " << precision;
      }
    }
  }
}

// An encoder's prediction: its model bytes within 2% of the run's (Q, K and V are fused when built),
// the sweep's FP32 parameters as held bytes, and the run notes predicted against measured.
TEST(BenchRunnerEncoder, PredictsModelBytesAndNotesPredictedAgainstMeasuredPeak) {
  energy::EnergyMeter meter(energy::SensorDiscovery{});
  meter.start();
  BenchRunner runner(fast_options(8), meter);
  for (const char* precision : {"fp32", "int8", "int4", "nf4"}) {
    RunConfig c;
    c.model = tiny_bert();
    c.precision = precision;
    c.batch = 4;
    c.seq = 8;
    const MemoryPrediction p = predict_peak_memory(c, 0, 1000);
    ASSERT_THAT(p.unavailable, IsEmpty()) << precision;
    EXPECT_GT(p.held_bytes, 0u);
    EXPECT_GT(p.run_bytes, 0u);
    EXPECT_EQ(p.peak_bytes(), 1000 + p.held_bytes + p.model_bytes + p.build_transient_bytes + p.run_bytes);
    const RunRecord r = runner.run(c);
    ASSERT_EQ(r.status, "ok") << r.error;
    EXPECT_NEAR(double(p.model_bytes), double(r.model_bytes), 0.02 * double(r.model_bytes)) << precision;
    if (r.peak_rss_bytes) {
      EXPECT_THAT(r.notes, ::testing::Contains(HasSubstr("peak memory predicted"))) << precision;
    }
  }
}

// Without any sensor, each absent source's reason appears once in the record (the meter's "no energy
// sensor: ..." already lists them; appending them again doubled every reason).
TEST(BenchRunnerDecoder, EachAbsentSourceIsNamedOnceInTheEnergyReason) {
  energy::SensorDiscovery found;
  found.absent.push_back({"rapl", "no RAPL zones here"});
  found.absent.push_back({"nvml", "no NVIDIA driver"});
  energy::EnergyMeter meter(std::move(found));
  meter.start();
  const RunRecord r = BenchRunner(fast_options(2), meter).run(decoder_config("fp32", 8));
  ASSERT_EQ(r.status, "ok") << r.error;
  for (const std::string reason : {"rapl: no RAPL zones here", "nvml: no NVIDIA driver"}) {
    for (const std::string* text : {&r.energy_unavailable, &r.decode_energy_unavailable}) {
      const auto first = text->find(reason);
      EXPECT_NE(first, std::string::npos) << *text;
      EXPECT_EQ(text->find(reason, first + 1), std::string::npos) << *text;
    }
  }
}

TEST(BenchRunnerDecoder, EveryFixtureArchitectureRuns) {
  energy::EnergyMeter meter(energy::SensorDiscovery{});
  meter.start();
  BenchRunner runner(fast_options(4), meter);
  for (const char* model : {"tiny-qwen2", "tiny-gpt2"}) {
    const RunRecord r = runner.run(decoder_config("w8", 8, model));
    ASSERT_EQ(r.status, "ok") << model << ": " << r.error;
    EXPECT_GT(*r.decode_tokens_per_s_mean, 0.0) << model;
    EXPECT_EQ(r.decode_tokens, 4u);
  }
}

TEST(BenchRunnerDecoder, EnergyPerTokenOfEachPhaseFromItsOwnWindow) {
  auto sensor = std::make_unique<test::ScriptedSensor>("rapl:package-0", true, false, 25.0);
  energy::SensorDiscovery found;
  found.sensors.push_back(std::move(sensor));
  energy::MeterOptions meter_options;
  meter_options.period = std::chrono::milliseconds(1);
  energy::EnergyMeter meter(std::move(found), meter_options);
  meter.start();
  BenchOptions options = fast_options(8);
  options.iters.reset();  // time-bound, so that each window spans many sampler periods
  options.min_time_s = 0.05;
  BenchRunner runner(options, meter);
  const RunRecord r = runner.run(decoder_config("fp32"));
  ASSERT_EQ(r.status, "ok") << r.error;
  ASSERT_TRUE(r.energy_j && r.decode_energy_j) << r.energy_unavailable << " / " << r.decode_energy_unavailable;
  EXPECT_TRUE(r.energy_unavailable.empty());
  EXPECT_TRUE(r.decode_energy_unavailable.empty());
  // 25 W over each window (no idle baseline: gross is the basis).
  const double prefill_s = r.energy_window.at("duration_s").get<double>();
  const double decode_s = r.decode_energy_window.at("duration_s").get<double>();
  EXPECT_NEAR(*r.energy_j / prefill_s, 25.0, 25.0 * 0.15);
  EXPECT_NEAR(*r.decode_energy_j / decode_s, 25.0, 25.0 * 0.15);
  // Per token: the window's energy over the tokens it processed.
  EXPECT_DOUBLE_EQ(*r.prefill_mj_per_token, *r.energy_j * 1e3 / (static_cast<double>(r.iters) * 16));
  EXPECT_DOUBLE_EQ(*r.energy_mj_per_token, *r.prefill_mj_per_token);
  EXPECT_DOUBLE_EQ(*r.energy_j_per_inference, *r.energy_j / static_cast<double>(r.iters));
  EXPECT_DOUBLE_EQ(*r.decode_mj_per_token, *r.decode_energy_j * 1e3 / (static_cast<double>(*r.decode_iters) * 8));
  EXPECT_GE(r.iters, 3u);
  EXPECT_GE(*r.decode_iters, 3u);
  EXPECT_THAT(r.energy_method, HasSubstr("measured: rapl:package-0"));
  EXPECT_THAT(test::validate_json_schema(schema(), to_json(r)), IsEmpty());
}

TEST(BenchRunnerDecoder, AFailedDecoderRunKeepsItsShapeAndAReason) {
  energy::EnergyMeter meter(energy::SensorDiscovery{});
  meter.start();
  BenchRunner runner(fast_options(8), meter);
  RunConfig c = decoder_config("fp32");
  c.batch = 2;  // not validated first: the runner refuses it itself
  const RunRecord r = runner.run(c);
  EXPECT_EQ(r.status, "failed");
  EXPECT_THAT(r.error, HasSubstr("batch 2 with decoder model"));
  EXPECT_EQ(r.prefill_tokens, 16u);
  EXPECT_EQ(r.decode_tokens, 8u);
  EXPECT_FALSE(r.decode_tokens_per_s_mean);
  const auto json = to_json(r);
  EXPECT_EQ(json["decode_energy_unavailable"], "not measured (no reason recorded)");
  EXPECT_THAT(test::validate_json_schema(schema(), json), IsEmpty());

  // Too many positions: a failed record naming both numbers.
  const RunRecord long_run = BenchRunner(fast_options(20), meter).run(decoder_config("fp32", 120));
  EXPECT_EQ(long_run.status, "failed");
  EXPECT_THAT(long_run.error, HasSubstr("120 prompt tokens (seq) + 20 decode tokens (--decode-tokens) = 140"));
}

// ---- --device cuda ---------------------------------------------------------------------------------

RunConfig encoder_config(const std::string& precision, const std::string& device = "cpu") {
  RunConfig c;
  c.model = tiny_bert();
  c.device = device;
  c.precision = precision;
  c.batch = 2;
  c.seq = 16;
  c.threads = 1;
  return c;
}

// A meter with a CPU package at 25 W and a GPU board ("nvml:gpu0", scope gpu) at 300 W.
std::unique_ptr<energy::EnergyMeter> cpu_and_gpu_meter() {
  auto package = std::make_unique<test::ScriptedSensor>("rapl:package-0", true, false, 25.0);
  auto board = std::make_unique<test::ScriptedSensor>("nvml:gpu0", true, false, 300.0);
  board->mutable_info().scope = energy::SensorScope::gpu;
  energy::SensorDiscovery found;
  found.sensors.push_back(std::move(package));
  found.sensors.push_back(std::move(board));
  energy::MeterOptions meter_options;
  meter_options.period = std::chrono::milliseconds(1);
  auto meter = std::make_unique<energy::EnergyMeter>(std::move(found), meter_options);
  meter->start();
  return meter;
}

// Where a driver is present, asking for the status starts the CUDA runtime, whose allocations
// LeakSanitizer reports: the GPU-facing tests run in release builds only (as the CUDA tests do).
#if defined(__SANITIZE_ADDRESS__)
#define SKIP_UNDER_ASAN() GTEST_SKIP() << "the CUDA runtime's allocations read as leaks under LeakSanitizer"
#else
#define SKIP_UNDER_ASAN() (void)0
#endif

TEST(BenchRunnerCuda, ValidateConfigsSaysWhyNoGpuRunsBeforeAnyRun) {
  SKIP_UNDER_ASAN();
  const auto& status = kernels_status();
  if (status.usable) {
    validate_configs({encoder_config("fp8", "cuda"), encoder_config("int4:g32", "cuda:0")});  // names, not the GPU
    EXPECT_THAT(error_of([] { validate_configs({encoder_config("int8:sq0.5", "cuda")}); }),
                HasSubstr("SmoothQuant runs on the CPU only"));
    EXPECT_THAT(error_of([] { validate_configs({encoder_config("w8", "cuda")}); }),
                HasSubstr("precision 'w8' (INT8 weight-only) has no CUDA kernel"));
    RunConfig d = decoder_config("fp32");
    d.device = "cuda";
    validate_configs({d}, 8);  // decoders run on the GPU too
    return;
  }
  EXPECT_EQ(error_of([] {
              validate_configs({encoder_config("fp32"), encoder_config("int8", "cuda")});
            }),
            "--device cuda: " + status.reason);
  EXPECT_EQ(error_of([] { validate_configs({encoder_config("fp32", "cuda:1")}); }),
            "--device cuda:1: " + status.reason);
  EXPECT_THAT(error_of([] { validate_configs({encoder_config("fp32", "gpu")}); }),
              HasSubstr("--device gpu: expected cpu, cuda or cuda:N"));
  // A run that did not go through validate_configs fails with the same reason, recorded.
  energy::EnergyMeter meter(energy::SensorDiscovery{});
  meter.start();
  BenchRunner runner(fast_options(), meter);
  const RunRecord r = runner.run(encoder_config("fp32", "cuda"));
  EXPECT_EQ(r.status, "failed");
  EXPECT_EQ(r.error, "--device cuda: " + status.reason);
}

TEST(BenchRunnerCuda, ACpuRunNeverCountsAGpuBoard) {
  const auto meter = cpu_and_gpu_meter();
  BenchOptions options = fast_options();
  options.iters.reset();
  options.min_time_s = 0.05;
  BenchRunner runner(options, *meter);
  const RunRecord r = runner.run(encoder_config("fp32"));
  ASSERT_EQ(r.status, "ok") << r.error;
  ASSERT_TRUE(r.energy_j) << r.energy_unavailable;
  EXPECT_THAT(r.energy_method, HasSubstr("measured: rapl:package-0 ("));
  EXPECT_THAT(r.energy_method, ::testing::Not(HasSubstr("nvml")));
  const double seconds = r.energy_window.at("duration_s").get<double>();
  EXPECT_NEAR(*r.energy_j / seconds, 25.0, 25.0 * 0.15);
  EXPECT_THAT(r.notes, ::testing::Contains(HasSubstr("not part of this cpu run's energy")));
  EXPECT_THAT(test::validate_json_schema(schema(), to_json(r)), IsEmpty());
}

TEST(BenchRunnerCuda, AGpuRunIsTimedByEventsAndMeasuredByItsGpuSensor) {
  SKIP_UNDER_ASAN();
  const auto& status = kernels_status();
  if (!status.usable) GTEST_SKIP() << "no usable GPU: " << status.reason;
  const auto meter = cpu_and_gpu_meter();
  BenchOptions options = fast_options();
  options.iters.reset();
  options.min_time_s = 0.05;
  options.gpu_energy_sensors[0] = "nvml:gpu0";
  BenchRunner runner(options, *meter);
  const RunRecord r = runner.run(encoder_config("int8", "cuda"));
  ASSERT_EQ(r.status, "ok") << r.error;
  ASSERT_TRUE(r.energy_j) << r.energy_unavailable;
  EXPECT_THAT(r.energy_method, HasSubstr("measured: nvml:gpu0 ("));
  EXPECT_THAT(r.energy_method, HasSubstr("GPU 0's board only"));
  const double seconds = r.energy_window.at("duration_s").get<double>();
  EXPECT_NEAR(*r.energy_j / seconds, 300.0, 300.0 * 0.15);
  EXPECT_THAT(r.energy_window.at("synchronized_with").dump(), HasSubstr("cuda:0 cudaDeviceSynchronize"));
  EXPECT_THAT(r.notes, ::testing::Contains(HasSubstr("latency: CUDA events on GPU 0")));
  EXPECT_THAT(r.kernel_paths, ::testing::Contains(HasSubstr("cublaslt:s8:tensor_op")));
  EXPECT_GT(r.latency->p50_ms, 0.0);
  EXPECT_EQ(r.fidelity_top1_agreement, 1.0);
  EXPECT_THAT(test::validate_json_schema(schema(), to_json(r)), IsEmpty());

  // Without a sensor for its GPU: unavailable with the reason, never the CPU package's energy.
  options.gpu_energy_sensors.clear();
  options.gpu_energy_absent[0] = "GPU 0 (0000:01:00.0) has no NVML match: test";
  BenchRunner bare(options, *meter);
  const RunRecord u = bare.run(encoder_config("fp32", "cuda"));
  ASSERT_EQ(u.status, "ok") << u.error;
  EXPECT_FALSE(u.energy_j);
  EXPECT_THAT(u.energy_unavailable, HasSubstr("no NVML sensor was selected for GPU 0: GPU 0 (0000:01:00.0)"));
  // The hook left with the model: a later window is not synchronized with the GPU.
  energy::Window w = meter->begin_window("after");
  EXPECT_TRUE(meter->end_window(w).synchronized_with.empty());
}

}  // namespace
}  // namespace qjoule::bench
