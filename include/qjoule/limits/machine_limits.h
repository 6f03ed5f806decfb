// What this machine allows, measured with the run's thread count: the roofs that every speed in a
// record is compared with (roofline.h). One flat value with its JSON form, which `qjoule limits`
// prints, the limits cache stores (limits_cache.h) and each bench record's environment carries.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace qjoule::limits {

// The version of the measurement method: a cached result of another version is measured again.
// 2 added the device and the GPU's figures (tf32, fp16, fp8); 3 the AMX tiles' peaks.
// 4: the CPU bandwidth buffers on 2 MiB huge pages, as the weights, and the read also as 4 streams a thread
// (3 read one stream on 4 KiB pages: about half what a GEMV over several rows streams on a Zen 4 VM).
inline constexpr int kMachineLimitsVersion = 4;

struct MachineLimits {
  int version = kMachineLimitsVersion;
  std::string device = "cpu";  // "cpu", or "cuda:N" (gpu_limits.h)
  int threads = 0;             // the CPU's threads (0 for a GPU)
  // CPU: streaming read (memory_bandwidth.h); GPU: device-to-device copy, bytes read + written. 1e9 B/s.
  std::optional<double> read_gb_per_s;
  std::optional<double> triad_gb_per_s;  // STREAM triad, STREAM's byte count (CPU only)
  std::optional<double> fp32_gflops;     // CPU: FP32 FMA peak; GPU: cuBLASLt FP32 (no tensor cores)
  std::optional<double> bf16_gflops;     // CPU: BF16 dot products (AVX512_BF16); GPU: cuBLASLt BF16
  std::optional<double> int8_gops;       // CPU: u8·s8 dot products (VNNI, or AVX2's sequence); GPU: cuBLASLt s8
  std::optional<double> tf32_gflops, fp16_gflops, fp8_gflops;  // GPU only: cuBLASLt TF32 / FP16 / E4M3
  std::optional<double> amx_bf16_gflops, amx_int8_gops;        // CPU with AMX: BF16 / INT8 tile products
  nlohmann::json unavailable = nlohmann::json::object();       // key of an absent figure -> why
  std::string amx;               // why AMX tiles that are present were not measured ("" = measured, or no AMX)
  std::string method;            // how each figure was measured
  std::string machine;           // machine_fingerprint() when measured
  std::string measured_at;       // ISO 8601 UTC
  double measure_seconds = 0.0;  // how long measuring took
  // "" when the measurement had its cores to itself, else why its figures may be low
  // (cpu_contention.h): such a measurement is not cached.
  std::string contention;

  // The figure named by its JSON key ("fp16_gflops", "int8_gops", ...); nullopt for another key.
  const std::optional<double>& figure(std::string_view key) const;
  // What read_gb_per_s measures: "read" (CPU) or "device copy" (GPU).
  std::string memory_label() const { return device == "cpu" ? "read" : "device copy"; }
};

// Measures every figure with `threads` threads (a few seconds).
MachineLimits measure_machine_limits(int threads);

// "cpu=Intel(R) Xeon(R) ...; microcode=0x2b000603; memory=24562232 kB; kernel=6.1.0-27-amd64": what
// must not change for a cached measurement to stand for this machine.
std::string machine_fingerprint();

// Now, as measured_at holds it: "2026-11-26T19:23:53Z".
std::string measured_now();

nlohmann::json to_json(const MachineLimits& limits);
// Reads what to_json wrote; a missing key, a wrong type or a figure that is not a positive number fails
// with one line naming the key, what was found and what was expected. Version 2 (no AMX figures) reads
// with them absent.
MachineLimits machine_limits_from_json(const nlohmann::json& json);

}  // namespace qjoule::limits
