#include "qjoule/limits/machine_limits.h"

#include <sys/utsname.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "qjoule/error.h"
#include "qjoule/io/huge_pages.h"
#include "qjoule/limits/cpu_contention.h"
#include "qjoule/limits/cpu_peak.h"
#include "qjoule/limits/memory_bandwidth.h"

namespace qjoule::limits {
namespace {

// The first value of `key` in a "key : value" file (/proc/cpuinfo, /proc/meminfo); "" when absent.
std::string proc_value(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string k = line.substr(0, colon);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.pop_back();
    if (k != key) continue;
    std::string v = line.substr(colon + 1);
    const auto first = v.find_first_not_of(" \t");
    return first == std::string::npos ? "" : v.substr(first);
  }
  return "";
}

// Every figure, by its JSON key.
constexpr std::pair<std::string_view, std::optional<double> MachineLimits::*> kFigures[] = {
    {"read_gb_per_s", &MachineLimits::read_gb_per_s},
    {"triad_gb_per_s", &MachineLimits::triad_gb_per_s},
    {"fp32_gflops", &MachineLimits::fp32_gflops},
    {"bf16_gflops", &MachineLimits::bf16_gflops},
    {"int8_gops", &MachineLimits::int8_gops},
    {"tf32_gflops", &MachineLimits::tf32_gflops},
    {"fp16_gflops", &MachineLimits::fp16_gflops},
    {"fp8_gflops", &MachineLimits::fp8_gflops},
    {"amx_bf16_gflops", &MachineLimits::amx_bf16_gflops},
    {"amx_int8_gops", &MachineLimits::amx_int8_gops}};

// Figures added after version 2: absent from what earlier versions wrote.
bool added_after_v2(std::string_view key) { return key.starts_with("amx_"); }

}  // namespace

std::string measured_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

const std::optional<double>& MachineLimits::figure(std::string_view key) const {
  static const std::optional<double> none;
  for (const auto& [name, member] : kFigures)
    if (name == key) return this->*member;
  return none;
}

std::string machine_fingerprint() {
  std::string kernel = "unknown";
  struct utsname u {};
  if (::uname(&u) == 0) kernel = std::string(u.release) + " " + u.machine;
  // The transparent huge page mode too: the bandwidth buffers' pages follow it (up to 1.8x apart).
  return fmt::format("cpu={}; microcode={}; memory={}; kernel={}; thp={}", proc_value("/proc/cpuinfo", "model name"),
                     proc_value("/proc/cpuinfo", "microcode"), proc_value("/proc/meminfo", "MemTotal"), kernel,
                     io::transparent_huge_pages_mode());
}

MachineLimits measure_machine_limits(int threads) {
  if (threads < 1) fail("machine limits: {} threads; expected at least 1", threads);
  const auto start = std::chrono::steady_clock::now();
  MachineLimits l;
  l.threads = threads;
  l.machine = machine_fingerprint();
  l.measured_at = measured_now();
  const ContentionProbe probe(threads);
  l.read_gb_per_s = measured_read(threads).gb_per_s;
  l.triad_gb_per_s = measured_triad(threads).gb_per_s;
  const CpuPeak& peak = measured_peak(threads);
  l.fp32_gflops = peak.fp32_gflops;
  l.bf16_gflops = peak.bf16_gflops;
  l.int8_gops = peak.int8_gops;
  l.amx_bf16_gflops = peak.amx_bf16_gflops;
  l.amx_int8_gops = peak.amx_int8_gops;
  if (!peak.fp32_gflops) l.unavailable["fp32_gflops"] = peak.fp32_unavailable;
  if (!peak.bf16_gflops) l.unavailable["bf16_gflops"] = peak.bf16_unavailable;
  if (!peak.int8_gops) l.unavailable["int8_gops"] = peak.int8_unavailable;
  for (const char* key : {"tf32_gflops", "fp16_gflops", "fp8_gflops"})
    l.unavailable[key] = "a GPU's tensor-core type: the CPU runs it as FP32 (fp16 weights) or not at all";
  const std::string no_amx = peak.amx.empty() ? "this CPU has no AMX tiles of this type" : peak.amx;
  if (!peak.amx_bf16_gflops) l.unavailable["amx_bf16_gflops"] = no_amx;
  if (!peak.amx_int8_gops) l.unavailable["amx_int8_gops"] = no_amx;
  l.amx = peak.amx;
  l.method = "read: " + read_method() + "; triad: " + triad_method() + "; peaks: " + peak_method();
  l.measure_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  l.contention = probe.verdict();
  return l;
}

nlohmann::json to_json(const MachineLimits& l) {
  nlohmann::json j = {{"version", l.version}, {"device", l.device}, {"threads", l.threads}};
  for (const auto& [key, member] : kFigures) {
    const auto& v = l.*member;
    j[std::string(key)] = v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  }
  j["unavailable"] = l.unavailable;
  j["amx"] = l.amx;
  j["method"] = l.method;
  j["machine"] = l.machine;
  j["measured_at"] = l.measured_at;
  j["measure_seconds"] = l.measure_seconds;
  j["contention"] = l.contention;
  return j;
}

MachineLimits machine_limits_from_json(const nlohmann::json& j) {
  if (!j.is_object()) fail("machine limits: found {}; expected a JSON object", j.type_name());
  const auto need = [&j](const char* key, bool (nlohmann::json::*is)() const noexcept,
                         const char* what) -> const nlohmann::json& {
    if (!j.contains(key)) fail("machine limits: key '{}' is missing; expected {}", key, what);
    const auto& v = j.at(key);
    if (!(v.*is)()) fail("machine limits: '{}' is {}; expected {}", key, v.dump(), what);
    return v;
  };
  using J = nlohmann::json;
  MachineLimits l;
  l.version = need("version", &J::is_number_integer, "a version number").get<int>();
  l.device = need("device", &J::is_string, "\"cpu\" or \"cuda:N\"").get<std::string>();
  l.threads = need("threads", &J::is_number_integer, "a thread count").get<int>();
  if (l.device == "cpu" && l.threads < 1) fail("machine limits: 'threads' is {}; expected at least 1", l.threads);
  for (const auto& [name, member] : kFigures) {
    const std::string key(name);
    if (!j.contains(key) && added_after_v2(key) && l.version <= 2) continue;
    if (!j.contains(key)) fail("machine limits: key '{}' is missing; expected a positive number or null", key);
    const auto& v = j.at(key);
    if (v.is_null()) continue;
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0.0)
      fail("machine limits: '{}' is {}; expected a positive number or null", key, v.dump());
    l.*member = v.get<double>();
  }
  l.unavailable = need("unavailable", &J::is_object, "an object of reasons");
  l.amx = need("amx", &J::is_string, "a string").get<std::string>();
  l.method = need("method", &J::is_string, "a string").get<std::string>();
  l.machine = need("machine", &J::is_string, "a string").get<std::string>();
  l.measured_at = need("measured_at", &J::is_string, "an ISO 8601 time").get<std::string>();
  l.measure_seconds = need("measure_seconds", &J::is_number, "seconds").get<double>();
  if (j.contains("contention"))  // absent in what earlier versions wrote
    l.contention = need("contention", &J::is_string, "a string (\"\" when uncontended)").get<std::string>();
  return l;
}

}  // namespace qjoule::limits
