#include "qjoule/energy/measurement.h"

#include <algorithm>

#include <fmt/format.h>

namespace qjoule::energy {

std::vector<std::string> Validity::flags() const {
  std::vector<std::string> out;
  if (short_window) out.emplace_back("short_window");
  if (low_coverage) out.emplace_back("low_coverage");
  if (counter_wrapped) out.emplace_back("counter_wrapped");
  if (counter_reset) out.emplace_back("counter_reset");
  if (read_errors) out.emplace_back("read_errors");
  if (end_extrapolated) out.emplace_back("end_extrapolated");
  return out;
}

namespace {

nlohmann::json number_or_null(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json to_json(const SensorInfo& info) {
  nlohmann::json j;
  j["id"] = info.id;
  j["source"] = info.source;
  j["description"] = info.description;
  j["scope"] = std::string(scope_name(info.scope));
  j["has_counter"] = info.has_counter;
  j["counter_unit_j"] = info.has_counter ? nlohmann::json(info.counter_unit_j) : nlohmann::json(nullptr);
  j["counter_range_j"] = info.has_counter && info.counter_range > 0
                             ? nlohmann::json(static_cast<double>(info.counter_range) * info.counter_unit_j)
                             : nlohmann::json(nullptr);
  j["has_power"] = info.has_power;
  j["power_method"] = info.has_power ? nlohmann::json(info.power_method) : nlohmann::json(nullptr);
  j["power_resolution_w"] =
      info.has_power && info.power_resolution_w > 0 ? nlohmann::json(info.power_resolution_w) : nlohmann::json(nullptr);
  j["nominal_update_period_s"] =
      info.nominal_update_period_s > 0 ? nlohmann::json(info.nominal_update_period_s) : nlohmann::json(nullptr);
  j["counts_in_total"] = info.counts_in_total;
  j["nested_in"] = info.nested_in.empty() ? nlohmann::json(nullptr) : nlohmann::json(info.nested_in);
  j["notes"] = info.notes;
  return j;
}

nlohmann::json to_json(const Measurement& m) {
  nlohmann::json j;
  j["name"] = m.name;
  j["duration_s"] = m.duration_s;
  j["status"] = m.measured() ? "measured" : "unavailable";
  j["synchronized_with"] = m.synchronized_with;
  j["idle_subtracted"] = m.idle_subtracted;

  nlohmann::json sensors = nlohmann::json::array();
  for (const SensorEnergy& e : m.sensors) {
    nlohmann::json s;
    s["id"] = e.sensor_id;
    s["description"] = e.description;
    s["scope"] = std::string(scope_name(e.scope));
    s["counts_in_total"] = e.counts_in_total;
    s["nested_in"] = e.nested_in.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.nested_in);
    s["energy_j"] = number_or_null(e.energy_j);
    s["energy_source"] = e.energy_source.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.energy_source);
    s["counter_energy_j"] = number_or_null(e.counter_energy_j);
    s["integrated_energy_j"] = number_or_null(e.integrated_energy_j);
    s["relative_difference"] = number_or_null(e.relative_difference);
    s["idle_power_w"] = number_or_null(e.idle_power_w);
    s["net_energy_j"] = number_or_null(e.net_energy_j);
    s["mean_power_w"] = number_or_null(e.mean_power_w);
    s["peak_power_w"] = number_or_null(e.peak_power_w);
    s["peak_power_method"] = e.peak_power_w ? nlohmann::json(e.peak_power_method) : nlohmann::json(nullptr);
    s["samples"] = e.samples;
    s["coverage"] = e.coverage;
    s["counter_wraps"] = e.counter_wraps;
    s["read_errors"] = e.read_errors;
    s["update_period_s"] = number_or_null(e.update_period_s);
    s["valid"] = e.validity.valid();
    s["flags"] = e.validity.flags();
    nlohmann::json unavailable = nlohmann::json::object();
    if (!e.energy_j) unavailable["energy_j"] = e.energy_unavailable;
    if (!e.counter_energy_j) unavailable["counter_energy_j"] = e.counter_unavailable;
    if (!e.integrated_energy_j) unavailable["integrated_energy_j"] = e.integrated_unavailable;
    if (!e.net_energy_j) unavailable["net_energy_j"] = e.net_unavailable;
    if (!e.peak_power_w) unavailable["peak_power_w"] = e.peak_unavailable;
    s["unavailable"] = unavailable;
    s["notes"] = e.notes;
    if (e.state_start || e.state_end) {
      s["device_state"] = {{"start", e.state_start ? to_json(*e.state_start) : nlohmann::json(nullptr)},
                           {"end", e.state_end ? to_json(*e.state_end) : nlohmann::json(nullptr)}};
    }
    sensors.push_back(std::move(s));
  }
  j["sensors"] = sensors;

  nlohmann::json total;
  total["energy_j"] = number_or_null(m.total.energy_j);
  total["net_energy_j"] = number_or_null(m.total.net_energy_j);
  total["sensors"] = m.total.sensor_ids;
  total["valid"] = m.total.valid;
  total["unavailable"] = m.total.unavailable.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.total.unavailable);
  j["total"] = total;

  nlohmann::json unavailable = nlohmann::json::array();
  for (const SensorAbsence& a : m.unavailable) {
    unavailable.push_back({{"source", a.source}, {"reason", a.reason}});
  }
  j["unavailable_sensors"] = unavailable;

  if (m.estimate) {
    j["estimate"] = {{"energy_j", m.estimate->energy_j},
                     {"estimated", true},
                     {"method", m.estimate->method},
                     {"cpu_tdp_w", m.estimate->tdp_w},
                     {"cpu_utilisation", m.estimate->cpu_utilisation}};
  } else if (!m.estimate_unavailable.empty()) {
    j["estimate"] = {{"energy_j", nullptr}, {"estimated", true}, {"unavailable", m.estimate_unavailable}};
  } else {
    j["estimate"] = nullptr;
  }

  if (m.sampler) {
    j["sampler"] = {{"period_s", m.sampler->period_s},       {"ticks_expected", m.sampler->ticks_expected},
                    {"ticks_taken", m.sampler->ticks_taken}, {"ticks_missed", m.sampler->ticks_missed},
                    {"ticks_late", m.sampler->ticks_late},   {"forced_samples", m.sampler->forced_samples}};
  } else {
    j["sampler"] = nullptr;
  }
  return j;
}

nlohmann::json to_json(const DeviceState& state) {
  const auto value = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"sm_clock_mhz", value(state.sm_clock_mhz)},
          {"memory_clock_mhz", value(state.memory_clock_mhz)},
          {"temperature_c", value(state.temperature_c)},
          {"power_limit_w", value(state.power_limit_w)},
          {"persistence_mode", value(state.persistence_mode)},
          {"clocks_event_reasons", value(state.clocks_event_reasons)},
          {"clocks_event_reason_names", state.clocks_event_reason_names},
          {"unavailable", state.unavailable}};
}

std::vector<std::string> clock_limit_warnings(const Measurement& m, const std::vector<std::string>& ids) {
  // The reasons that say the clocks were held below what the work asked for (not idleness).
  const auto limiting = [](const std::optional<DeviceState>& state) {
    std::vector<std::string> names;
    if (!state) return names;
    for (const std::string& name : state->clocks_event_reason_names)
      if (name != "gpu_idle") names.push_back(name);
    return names;
  };
  std::vector<std::string> out;
  for (const SensorEnergy& e : m.sensors) {
    if (!ids.empty() && std::find(ids.begin(), ids.end(), e.sensor_id) == ids.end()) continue;
    const auto at_start = limiting(e.state_start), at_end = limiting(e.state_end);
    if (at_start.empty() && at_end.empty()) continue;
    const std::vector<std::string>& names = at_end.empty() ? at_start : at_end;
    const std::optional<DeviceState>& state = at_end.empty() ? e.state_start : e.state_end;
    std::string joined;
    for (const std::string& name : names) joined += (joined.empty() ? "" : ", ") + name;
    std::string details;
    const auto add = [&details](const std::string& part) { details += (details.empty() ? "" : ", ") + part; };
    if (state->sm_clock_mhz) add(fmt::format("SM {} MHz", *state->sm_clock_mhz));
    if (state->temperature_c) add(fmt::format("{} °C", *state->temperature_c));
    if (state->power_limit_w) add(fmt::format("power limit {:g} W", *state->power_limit_w));
    out.push_back(fmt::format("{}: clocks limited by {} at the window's {}{}", e.sensor_id, joined,
                              !at_start.empty() && !at_end.empty() ? "start and end"
                              : at_end.empty()                     ? "start"
                                                                   : "end",
                              details.empty() ? "" : " (" + details + ")"));
  }
  return out;
}

}  // namespace qjoule::energy
