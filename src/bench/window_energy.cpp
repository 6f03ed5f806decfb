#include "bench/window_energy.h"

#include <string>

#include <fmt/format.h>

namespace qjoule::bench::detail {

WindowEnergy window_energy(const energy::Measurement& m, const energy::EnergyTotal& total, bool allow_estimate) {
  WindowEnergy e;
  if (total.energy_j) {
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

}  // namespace qjoule::bench::detail
