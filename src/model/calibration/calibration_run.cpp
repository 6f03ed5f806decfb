#include "model/calibration/calibration_run.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "qjoule/error.h"

namespace qjoule::model::detail {
namespace {

std::string duration_text(double seconds) {
  if (seconds < 90.0) return fmt::format("{:.0f} s", seconds);
  return fmt::format("{:.0f} min {:.0f} s", std::floor(seconds / 60.0), std::fmod(seconds, 60.0));
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

void check_calibration_inputs(const std::filesystem::path& dir, bool prequantized,
                              const std::vector<std::vector<int32_t>>& sequences) {
  if (prequantized)
    fail(
        "{}: a pre-quantized checkpoint; calibration (GPTQ, AWQ) starts from FP32 / BF16 / FP16 weights, expected such "
        "a checkpoint",
        dir.string());
  if (sequences.empty()) fail("{}: no calibration sequences; expected at least one", dir.string());
}

CalibrationRun::CalibrationRun(CalibrationOptions options)
    : options_(std::move(options)), started_(std::chrono::steady_clock::now()) {
  out_.damp = options_.damp;
  out_.bf16_products = options_.bf16_products;
}

std::unique_ptr<kernels::Linear> CalibrationRun::make_linear(const LinearParams& p, const quant::FormatSpec& spec,
                                                             const std::string& group,
                                                             std::function<void(LinearParams&)> load) {
  auto& stats = statistics_[group];
  const bool records = stats == nullptr;  // the group's first calibrated Linear sums for all
  if (records) stats = std::make_shared<InputStatistics>();
  auto linear = std::make_unique<CalibratingLinear>(p, std::move(load), spec, stats, records, options_.bf16_products);
  linears_[p.name] = linear.get();
  return linear;
}

std::map<std::string, CalibratingLinear*> CalibrationRun::find(const std::vector<std::string>& names) const {
  std::map<std::string, CalibratingLinear*> found;
  for (const auto& name : names) {
    if (const auto it = linears_.find(name); it != linears_.end()) found.emplace(name, it->second);
  }
  return found;
}

void CalibrationRun::calibrate_block(int64_t i, int64_t blocks, const std::map<std::string, CalibratingLinear*>& here,
                                     const std::string& last, std::vector<std::vector<float>>& states, int64_t hidden,
                                     const std::function<void(float* x, int64_t tokens)>& forward,
                                     const std::function<void(CalibratedInt4&)>& quantize_awq) {
  const auto block_started = std::chrono::steady_clock::now();
  std::set<std::string_view> methods;
  for (const auto& [name, l] : here) methods.insert(quant::calibration_method(l->spec()));
  methods_.insert(methods.begin(), methods.end());
  if (!here.empty()) {
    for (const auto& [name, l] : here) l->begin();
    if (const auto it = here.find(last); it != here.end())
      it->second->drop_outputs_while_recording();  // the FP32 pass's stream is dropped after it
    for (const auto& x : states) {                 // FP32 block: the inputs each Linear sums (outputs dropped)
      std::vector<float> scratch = x;
      forward(scratch.data(), static_cast<int64_t>(scratch.size()) / hidden);
    }
    quantize_awq(out_);
    for (const auto& [name, l] : here) {
      if (!l->spec().int4_gptq) continue;
      if (l->has_calibration_input()) {
        l->quantize_gptq(options_.damp, out_);
      } else {  // an expert no calibration token was routed to: no Hessian to fit
        l->finish_round_to_nearest(out_);
        out_.round_to_nearest.insert(name);
      }
    }
  }
  for (auto& x : states) forward(x.data(), static_cast<int64_t>(x.size()) / hidden);
  if (options_.progress) {
    const double elapsed = seconds_since(started_);
    options_.progress(fmt::format("block {}/{} calibrated ({} Linears, {}) in {:.1f} s; about {} left", i + 1, blocks,
                                  here.size(), fmt::join(methods, " + "), seconds_since(block_started),
                                  duration_text(elapsed / double(i + 1) * double(blocks - i - 1))));
  }
}

CalibratedInt4 CalibrationRun::finish(const std::vector<std::vector<int32_t>>& sequences) {
  out_.sequences = static_cast<int64_t>(sequences.size());
  out_.tokens = 0;
  out_.tokens_per_sequence = 0;
  for (const auto& s : sequences) {
    out_.tokens += static_cast<int64_t>(s.size());
    out_.tokens_per_sequence = std::max(out_.tokens_per_sequence, static_cast<int64_t>(s.size()));
  }
  out_.method = fmt::format("{}", fmt::join(methods_, " + "));
  out_.seconds = seconds_since(started_);
  return std::move(out_);
}

}  // namespace qjoule::model::detail
