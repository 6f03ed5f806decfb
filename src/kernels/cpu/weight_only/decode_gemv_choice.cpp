#include "kernels/cpu/weight_only/decode_gemv_choice.h"

#include <map>
#include <mutex>

#include "qjoule/kernels/kernel_overrides.h"

namespace qjoule::kernels::detail {

std::vector<float> decode_timing_weights() {
  std::vector<float> w(static_cast<std::size_t>(kDecodeTimingRows * kDecodeTimingCols));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 2654435761u) % 2001) / 20000.0f - 0.05f;
  return w;
}

bool choose_x16_decode(WeightOnlyIsa isa, const std::string& layout, const std::function<bool()>& measure_x16_faster) {
  return choose_x16_decode(any_x16_decode_available(isa), std::string(isa_name(isa)) + " " + layout,
                           measure_x16_faster);
}

bool choose_x16_decode(bool available, const std::string& layout, const std::function<bool()>& measure_x16_faster) {
  if (!available) return false;
  if (const auto forced = kernel_override(KernelOverride::weight_only_decode)) return *forced == "x16";
  static std::mutex mutex;
  static std::map<std::string, bool> chosen;  // "<isa> <layout>" -> x16, measured once per process
  const std::lock_guard<std::mutex> lock(mutex);
  const auto it = chosen.find(layout);
  if (it != chosen.end()) return it->second;
  const bool x16 = measure_x16_faster();
  chosen.emplace(layout, x16);
  return x16;
}

}  // namespace qjoule::kernels::detail
