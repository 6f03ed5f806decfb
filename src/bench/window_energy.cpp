#include "bench/window_energy.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

namespace qjoule::bench::detail {

std::string short_window_reason(const energy::Measurement& m, const std::vector<std::string>& sensor_ids) {
  for (const energy::SensorEnergy& e : m.sensors) {
    if (!e.validity.short_window || std::find(sensor_ids.begin(), sensor_ids.end(), e.sensor_id) == sensor_ids.end())
      continue;
    return fmt::format(
        "the window `{}` lasted {:.3g} s, under {:g} updates of {} (one every {:.3g} s): too short for its counter "
        "(a longer --min-time, or no --iters, gives it time)",
        m.name, m.duration_s, energy::kMinUpdatePeriodsPerWindow, e.sensor_id, e.update_period_s.value_or(0.0));
  }
  return "";
}

WindowEnergy window_energy(const energy::Measurement& m, const energy::EnergyTotal& total, bool allow_estimate) {
  WindowEnergy e;
  if (std::string too_short = short_window_reason(m, total.sensor_ids); !too_short.empty()) {
    e.unavailable = std::move(too_short);
  } else if (total.energy_j) {
    e.energy_j = total.energy_j;
    e.basis_j = m.idle_subtracted && total.net_energy_j ? total.net_energy_j : total.energy_j;
  } else if (m.estimate && allow_estimate) {
    e.energy_j = e.basis_j = m.estimate->energy_j;
  } else {
    // Every reason: the total's, each present sensor's, each absent source's.
    e.unavailable = total.unavailable.empty() ? "no energy sensor" : total.unavailable;
    for (const auto& s : m.sensors) {
      e.unavailable += fmt::format("; {}: {}", s.sensor_id,
                                   s.energy_unavailable.empty()
                                       ? (s.counts_in_total ? "measured" : "measured, not part of the total")
                                       : s.energy_unavailable);
    }
    for (const auto& a : m.unavailable) {
      const std::string absence = fmt::format("{}: {}", a.source, a.reason);
      // With no sensor at all, the total's reason already lists every absent source.
      if (e.unavailable.find(absence) == std::string::npos) e.unavailable += "; " + absence;
    }
    // The estimate asked for (--energy-estimate) and why it could not be made for this window.
    if (allow_estimate && !m.estimate_unavailable.empty()) e.unavailable += "; estimate: " + m.estimate_unavailable;
  }
  return e;
}

WindowEnergy window_energy(const energy::Measurement& m) { return window_energy(m, m.total, true); }

energy::EnergyTotal total_over(const energy::Measurement& m,
                               const std::function<bool(const energy::SensorEnergy&)>& take,
                               const std::string& none_reason) {
  energy::EnergyTotal t;
  double sum = 0.0, net_sum = 0.0;
  bool all_net = true, all_valid = true;
  for (const auto& e : m.sensors) {
    if (!e.counts_in_total || !e.energy_j || !take(e)) continue;
    sum += *e.energy_j;
    t.sensor_ids.push_back(e.sensor_id);
    all_valid = all_valid && e.validity.valid();
    if (e.net_energy_j) {
      net_sum += *e.net_energy_j;
    } else {
      all_net = false;
    }
  }
  if (t.sensor_ids.empty()) {
    t.unavailable = none_reason;
    return t;
  }
  t.energy_j = sum;
  if (all_net) t.net_energy_j = net_sum;
  t.valid = all_valid;
  return t;
}

void fill_record_energy(RunRecord& r, const energy::Measurement& m, const energy::EnergyTotal& total,
                        bool allow_estimate, double sequences, double tokens) {
  r.energy_window = energy::to_json(m);
  const WindowEnergy e = window_energy(m, total, allow_estimate);
  const std::optional<double> energy_for_per_inference = e.basis_j;
  if (total.energy_j && e.energy_j) {
    r.energy_j = total.energy_j;
    r.energy_net_j = total.net_energy_j;
    std::string ids;
    for (const auto& id : total.sensor_ids) ids += (ids.empty() ? "" : " + ") + id;
    r.energy_method = fmt::format(
        "measured: {}{}{}", ids, m.idle_subtracted && total.net_energy_j ? " (per inference: net of idle)" : " (gross)",
        total.valid ? "" : "; flagged, see energy_window");
    r.energy_mean_power_w = *total.energy_j / m.duration_s;
    std::optional<double> peak;
    int counted = 0;
    for (const auto& s : m.sensors) {
      if (!s.counts_in_total ||
          std::find(total.sensor_ids.begin(), total.sensor_ids.end(), s.sensor_id) == total.sensor_ids.end())
        continue;
      ++counted;
      peak = s.peak_power_w;
    }
    if (counted == 1) r.energy_peak_power_w = peak;
  } else if (!total.energy_j && m.estimate && allow_estimate) {
    r.energy_j = m.estimate->energy_j;
    r.energy_method = "estimated: " + m.estimate->method;
    r.energy_mean_power_w = m.estimate->energy_j / m.duration_s;
    r.notes.push_back("energy is an estimate (asked for with --energy-estimate), not a measurement");
  } else {
    r.energy_unavailable = e.unavailable;
  }
  if (energy_for_per_inference) {
    r.energy_j_per_inference = *energy_for_per_inference / sequences;
    r.energy_mj_per_token = *energy_for_per_inference * 1e3 / tokens;
  }
}

void fill_cpu_record_energy(RunRecord& r, const energy::Measurement& m, double sequences, double tokens) {
  const auto is_gpu = [](const energy::SensorEnergy& e) { return e.scope == energy::SensorScope::gpu; };
  if (std::none_of(m.sensors.begin(), m.sensors.end(), is_gpu))
    return fill_record_energy(r, m, m.total, true, sequences, tokens);
  const auto total = total_over(
      m, [&](const energy::SensorEnergy& e) { return !is_gpu(e); },
      "no CPU-side sensor had a value (GPU boards are not counted for a cpu run)");
  fill_record_energy(r, m, total, true, sequences, tokens);
  r.notes.push_back("GPU sensors were read (a sweep with cuda runs) but are not part of this cpu run's energy");
}

}  // namespace qjoule::bench::detail
