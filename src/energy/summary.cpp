#include "qjoule/energy/summary.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace qjoule::energy {

std::string format_joules(double joules) {
  const double a = std::fabs(joules);
  if (a >= 1e6) return fmt::format("{:.3f} MJ", joules / 1e6);
  if (a >= 1e3) return fmt::format("{:.3f} kJ", joules / 1e3);
  if (a >= 1.0 || a == 0.0) return fmt::format("{:.3f} J", joules);
  if (a >= 1e-3) return fmt::format("{:.1f} mJ", joules * 1e3);
  return fmt::format("{:.1f} uJ", joules * 1e6);
}

std::string format_seconds(double seconds) {
  if (seconds >= 1.0) return fmt::format("{:.3f} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.1f} ms", seconds * 1e3);
  return fmt::format("{:.0f} us", seconds * 1e6);
}

std::string format_watts(double watts) {
  const double a = std::fabs(watts);
  if (a >= 100.0) return fmt::format("{:.1f} W", watts);
  if (a >= 1.0 || a == 0.0) return fmt::format("{:.2f} W", watts);
  return fmt::format("{:.1f} mW", watts * 1e3);
}

namespace {

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

std::string or_dash(const std::optional<double>& value, std::string (*format)(double)) {
  return value ? format(*value) : std::string("-");
}

}  // namespace

std::string format_absences(const std::vector<SensorAbsence>& absent) {
  std::size_t width = 0;
  for (const SensorAbsence& a : absent) width = std::max(width, a.source.size());
  std::string out;
  for (const SensorAbsence& a : absent) {
    out += fmt::format("  {:<{}}  unavailable: {}\n", a.source, width, a.reason);
  }
  return out;
}

std::string format_measurement(const Measurement& m, const std::optional<IdleBaseline>& idle) {
  std::string out;
  if (!m.measured()) {
    out += fmt::format("energy: unavailable: no energy sensor on this machine (window `{}`, {})\n", m.name,
                       format_seconds(m.duration_s));
    out += format_absences(m.unavailable);
  } else {
    std::size_t width = 6;
    for (const SensorEnergy& e : m.sensors) width = std::max(width, e.sensor_id.size());
    const bool net = m.idle_subtracted;
    out += fmt::format("energy in `{}` ({}):\n", m.name, format_seconds(m.duration_s));
    out += fmt::format("  {:<{}}  {:>11}  {:>11}  {:>9}  {:>9}  {:>7}  {:>6}  {}\n", "sensor", width, "energy",
                       net ? "net" : "", "mean", "peak", "samples", "cover", "validity");
    for (const SensorEnergy& e : m.sensors) {
      std::string validity = e.validity.valid() ? "ok" : "INVALID";
      const auto flags = e.validity.flags();
      if (!flags.empty()) validity += " (" + join(flags, ", ") + ")";
      if (!e.nested_in.empty())
        validity += fmt::format(" [part of {}]", e.nested_in);
      else if (!e.counts_in_total)
        validity += " [not in total]";
      out +=
          fmt::format("  {:<{}}  {:>11}  {:>11}  {:>9}  {:>9}  {:>7}  {:>5.1f}%  {}\n", e.sensor_id, width,
                      or_dash(e.energy_j, format_joules), net ? or_dash(e.net_energy_j, format_joules) : std::string(),
                      or_dash(e.mean_power_w, format_watts), or_dash(e.peak_power_w, format_watts), e.samples,
                      e.coverage * 100.0, validity);
    }
    if (m.total.energy_j) {
      out += fmt::format("  {:<{}}  {:>11}  {:>11}  {:>9}  {:>9}  {:>7}  {:>6}  {}\n", "total", width,
                         format_joules(*m.total.energy_j),
                         net ? or_dash(m.total.net_energy_j, format_joules) : std::string(),
                         m.duration_s > 0 ? format_watts(*m.total.energy_j / m.duration_s) : "-", "", "", "",
                         fmt::format("{} ({})", m.total.valid ? "ok" : "INVALID", join(m.total.sensor_ids, " + ")));
    } else {
      out += fmt::format("  total: unavailable: {}\n", m.total.unavailable);
    }
    for (const std::string& w : clock_limit_warnings(m)) out += "  warning: " + w + "\n";
    for (const SensorEnergy& e : m.sensors) {
      if (e.counter_energy_j && e.integrated_energy_j) {
        out += fmt::format("  {}: counter {} vs power integral {}", e.sensor_id, format_joules(*e.counter_energy_j),
                           format_joules(*e.integrated_energy_j));
        out += e.relative_difference ? fmt::format(" ({:+.1f}%)\n", *e.relative_difference * 100.0) : std::string("\n");
      }
    }
    if (idle) {
      std::vector<std::string> parts;
      for (const auto& entry : idle->sensors) {
        parts.push_back(entry.power_w ? fmt::format("{} {}", entry.sensor_id, format_watts(*entry.power_w))
                                      : fmt::format("{} unavailable", entry.sensor_id));
      }
      std::vector<std::string> idle_flags;
      for (const SensorEnergy& e : idle->window.sensors) {
        if (!e.validity.valid())
          idle_flags.push_back(fmt::format("{}: {}", e.sensor_id, join(e.validity.flags(), ", ")));
      }
      out += fmt::format("idle baseline over {}: {}{}\n", format_seconds(idle->duration_s), join(parts, ", "),
                         idle_flags.empty() ? "" : " (INVALID: " + join(idle_flags, "; ") + ")");
    } else {
      out += "idle baseline: not measured (net energy unavailable; --idle S measures it)\n";
    }
    if (m.sampler) {
      const SamplerWindowStats& s = *m.sampler;
      out += fmt::format("sampler: every {}, {} of {} deadlines sampled, {} missed, {} late, {} boundary samples\n",
                         format_seconds(s.period_s), s.ticks_taken, s.ticks_expected, s.ticks_missed, s.ticks_late,
                         s.forced_samples);
    }
    if (!m.unavailable.empty()) {
      out += "not measured:\n";
      out += format_absences(m.unavailable);
    }
  }
  if (m.estimate) {
    out += fmt::format("estimate: {} (estimated, not measured: {})\n", format_joules(m.estimate->energy_j),
                       m.estimate->method);
  } else if (!m.estimate_unavailable.empty()) {
    out += fmt::format("estimate: unavailable: {}\n", m.estimate_unavailable);
  }
  return out;
}

std::string format_sensor(const SensorInfo& info, const SensorStats* stats) {
  std::string out = fmt::format("  {}  {} [{}, {}]\n", info.id, info.description, scope_name(info.scope), info.source);
  if (info.has_counter) {
    std::string range =
        info.counter_range > 0
            ? fmt::format("wraps at {}", format_joules(static_cast<double>(info.counter_range) * info.counter_unit_j))
            : std::string("64-bit, no wrap");
    out += fmt::format("      energy counter: resolution {}, {}\n", format_joules(info.counter_unit_j), range);
  } else {
    out += "      energy counter: none\n";
  }
  if (info.has_power) {
    out +=
        fmt::format("      power: {}{}\n", info.power_method,
                    info.power_resolution_w > 0 ? fmt::format(", resolution {}", format_watts(info.power_resolution_w))
                                                : std::string());
  } else {
    out += "      power: none (derived from the counter)\n";
  }
  std::string period = info.nominal_update_period_s > 0
                           ? fmt::format("nominal {}", format_seconds(info.nominal_update_period_s))
                           : std::string("nominal unknown");
  if (stats != nullptr) {
    if (stats->observed_update_period_s) {
      period += fmt::format(", observed {}{}", stats->update_period_is_upper_bound ? "<= " : "",
                            format_seconds(*stats->observed_update_period_s));
    } else {
      period += ", not observed (too few changes)";
    }
  }
  out += fmt::format("      update period: {}\n", period);
  if (stats != nullptr) {
    if (stats->last_power_w) out += fmt::format("      power now: {}\n", format_watts(*stats->last_power_w));
    if (stats->read_errors > 0) {
      out += fmt::format("      read errors: {} (first: {})\n", stats->read_errors, stats->first_error);
    }
  }
  if (!info.nested_in.empty()) {
    out += fmt::format("      part of {}: reported, not added to totals\n", info.nested_in);
  }
  for (const std::string& note : info.notes) out += fmt::format("      note: {}\n", note);
  return out;
}

}  // namespace qjoule::energy
