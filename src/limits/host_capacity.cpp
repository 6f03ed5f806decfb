#include "qjoule/limits/host_capacity.h"

#include <algorithm>

#include <fmt/format.h>

#include "qjoule/limits/cpu_peak.h"
#include "qjoule/limits/memory_bandwidth.h"
#include "test_knob.h"

namespace qjoule::limits {
namespace {

// QJOULE_TEST_HOST_CAPACITY=X: the probes read X × the peak (a test of a run's warning must know what
// its host delivered).
std::optional<double> forced_capacity() {
  return number_knob(
      "QJOULE_TEST_HOST_CAPACITY", [](double x) { return x > 0.0; }, "the share of the peak the host delivers, > 0");
}

std::optional<double> lower(const std::optional<double>& a, const std::optional<double>& b) {
  if (a && b) return std::min(*a, *b);
  return a ? a : b;
}

std::optional<double> higher(const std::optional<double>& a, const std::optional<double>& b) {
  if (a && b) return std::max(*a, *b);
  return a ? a : b;
}

// QJOULE_TEST_HOST_READ_GBPS=X: the read probes read X GB/s (not measured: a test knows what they read).
std::optional<double> read_now(int threads) {
  if (const auto forced = number_knob(
          "QJOULE_TEST_HOST_READ_GBPS", [](double x) { return x > 0.0; }, "a read bandwidth in GB/s, > 0"))
    return forced;
  return read_rate_now(threads);
}

std::string gflops_or_dash(const std::optional<double>& v) { return v ? fmt::format("{:.0f}", *v) : "-"; }

}  // namespace

std::optional<double> read_beside(const HostCapacity& h) {
  return higher(h.read_gb_per_s_before, h.read_gb_per_s_after);
}

std::optional<double> delivered_fraction(const HostCapacity& h) {
  std::optional<double> share;
  const auto probe = lower(h.fp32_gflops_before, h.fp32_gflops_after);
  if (probe && h.fp32_peak_gflops && *h.fp32_peak_gflops > 0.0) share = *probe / *h.fp32_peak_gflops;
  if (h.threads > 0) share = lower(share, 1.0 - h.contending_cores / h.threads);
  if (!share) return std::nullopt;
  return std::clamp(*share, 0.0, 1.0);
}

std::string busy_host_line(const HostCapacity& h) {
  const auto share = delivered_fraction(h);
  if (!share || *share >= kBusyHostFraction) return "";
  const std::string probes =
      h.fp32_peak_gflops ? fmt::format("FMA probes {} / {} GFLOP/s of {:.0f}; ", gflops_or_dash(h.fp32_gflops_before),
                                       gflops_or_dash(h.fp32_gflops_after), *h.fp32_peak_gflops)
                         : std::string();
  return fmt::format(
      "the host delivered {:.0f}% of its measured FP32 peak around this run ({}other processes took "
      "{:.2f} cores)",
      *share * 100, probes, h.contending_cores);
}

std::string low_peak_line(const HostCapacity& h) {
  const auto probe = higher(h.fp32_gflops_before, h.fp32_gflops_after);
  if (!probe || !h.fp32_peak_gflops || !(*h.fp32_peak_gflops > 0.0) || *probe <= kLowPeakMultiple * *h.fp32_peak_gflops)
    return "";
  return fmt::format(
      "the FMA probes around this run read up to {:.0f} GFLOP/s, {:.2f}x the limits' fp32 peak of {:.0f}: the limits "
      "were measured on a busier host, and this run's % roof figures read high",
      *probe, *probe / *h.fp32_peak_gflops, *h.fp32_peak_gflops);
}

nlohmann::json to_json(const HostCapacity& h) {
  const auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"threads", h.threads},
          {"fp32_gflops_before", opt(h.fp32_gflops_before)},
          {"fp32_gflops_after", opt(h.fp32_gflops_after)},
          {"fp32_peak_gflops", opt(h.fp32_peak_gflops)},
          {"contending_cores", h.contending_cores},
          {"delivered_fraction", opt(delivered_fraction(h))},
          {"busy", busy_host_line(h)},
          {"read_gb_per_s_before", opt(h.read_gb_per_s_before)},
          {"read_gb_per_s_after", opt(h.read_gb_per_s_after)},
          {"method",
           "right before and right after the timed windows: the fp32 peak's FMA loop on the run's threads, median "
           "of 5 trials of ~2 ms, and for a decoder " +
               read_now_method() +
               "; over the windows: other processes' and the hypervisor's CPU time (/proc/stat) beyond the cores the "
               "run left free; delivered_fraction = min(lower probe / fp32 peak, 1 - contending_cores / threads)"}};
}

HostCapacityProbe::HostCapacityProbe(int threads, bool read_bandwidth)
    : threads_(threads),
      read_bandwidth_(read_bandwidth),
      before_read_(read_bandwidth ? read_now(threads) : std::nullopt),
      before_gflops_(fp32_rate_now(threads)),
      before_times_(read_cpu_times()) {}

HostCapacity HostCapacityProbe::finish() const {
  HostCapacity h;
  h.threads = threads_;
  const auto after_times = read_cpu_times();
  h.fp32_gflops_after = fp32_rate_now(threads_);
  h.fp32_gflops_before = before_gflops_;
  if (read_bandwidth_) {
    h.read_gb_per_s_before = before_read_;
    h.read_gb_per_s_after = read_now(threads_);
  }
  if (before_times_ && after_times) h.contending_cores = contending_cores(*before_times_, *after_times, threads_);
  return h;
}

HostCapacity compared_with(HostCapacity h, std::optional<double> fp32_peak_gflops) {
  h.fp32_peak_gflops = fp32_peak_gflops;
  if (const auto forced = forced_contended_cores()) h.contending_cores = *forced;
  if (const auto forced = forced_capacity(); forced && fp32_peak_gflops)
    h.fp32_gflops_before = h.fp32_gflops_after = *forced * *fp32_peak_gflops;
  return h;
}

}  // namespace qjoule::limits
