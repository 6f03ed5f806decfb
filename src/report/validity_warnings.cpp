#include "qjoule/report/validity_warnings.h"

#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace qjoule::report {
namespace {

std::string runs_text(std::size_t n) { return n == 1 ? "1 run" : fmt::format("{} runs", n); }

// The flags of one energy_window sensor (opaque JSON written by the energy module), as text.
std::vector<std::string> flags_of(const nlohmann::json& sensor) {
  std::vector<std::string> flags;
  const auto found = sensor.find("flags");
  if (found != sensor.end() && found->is_array())
    for (const auto& flag : *found) flags.push_back(flag.is_string() ? flag.get<std::string>() : flag.dump());
  return flags;
}

// The flagged sensors and doubtful totals of one window; `run` names the run (and the phase).
void flagged_in_window(const nlohmann::json& window, const std::string& run, std::vector<std::string>& items) {
  if (!window.is_object()) return;
  const auto sensors = window.find("sensors");
  if (sensors != window.end() && sensors->is_array()) {
    for (const auto& sensor : *sensors) {
      if (!sensor.is_object()) continue;
      const auto valid = sensor.find("valid");
      const bool invalid = valid != sensor.end() && valid->is_boolean() && !valid->get<bool>();
      const auto flags = flags_of(sensor);
      if (!invalid && flags.empty()) continue;
      const auto id = sensor.find("id");
      items.push_back(fmt::format("{}: sensor {} {}{}", run,
                                  id != sensor.end() && id->is_string() ? id->get<std::string>() : "(unnamed)",
                                  invalid ? "INVALID" : "valid, noted",
                                  flags.empty() ? "" : fmt::format(" (flags: {})", fmt::join(flags, ", "))));
    }
  }
  const auto total = window.find("total");
  if (total != window.end() && total->is_object()) {
    // A total with no energy is already listed as unavailable; only a number can be doubtful.
    const auto valid = total->find("valid");
    const auto energy = total->find("energy_j");
    if (valid != total->end() && valid->is_boolean() && !valid->get<bool>() && energy != total->end() &&
        energy->is_number())
      items.push_back(fmt::format("{}: total energy INVALID (a sensor in it is flagged)", run));
  }
}

std::vector<std::string> flagged_windows(const std::vector<bench::RunRecord>& records) {
  std::vector<std::string> items;
  for (const auto& r : records) {
    // A decoder run has two windows: energy_window is its prefill's, decode_energy_window its decode's.
    const bool decoder = r.decode_energy_window.is_object();
    flagged_in_window(r.energy_window, decoder ? r.run_name + " (prefill)" : r.run_name, items);
    if (decoder) flagged_in_window(r.decode_energy_window, r.run_name + " (decode)", items);
  }
  return items;
}

}  // namespace

std::vector<ValidityWarning> validity_warnings(const std::vector<bench::RunRecord>& records) {
  std::vector<ValidityWarning> out;

  std::vector<std::string> reasons;  // in order of first appearance
  std::map<std::string, std::vector<std::string>> runs_by_reason;
  std::size_t unavailable = 0;
  std::vector<std::string> estimated, emulated, failed;
  for (const auto& r : records) {
    if (r.status != "ok") {
      failed.push_back(fmt::format("{}: {}", r.run_name, r.error.empty() ? "(no error recorded)" : r.error));
      continue;
    }
    if (!r.energy_j_per_inference) {
      const std::string reason = r.energy_unavailable.empty() ? "no reason recorded" : r.energy_unavailable;
      if (runs_by_reason.find(reason) == runs_by_reason.end()) reasons.push_back(reason);
      runs_by_reason[reason].push_back(r.run_name);
      ++unavailable;
    } else if (r.energy_method.rfind("estimated", 0) == 0) {
      estimated.push_back(fmt::format("{}: {}", r.run_name, r.energy_method));
    }
    if (r.not_representative) emulated.push_back(r.run_name);
  }

  if (unavailable > 0) {
    ValidityWarning w{"energy-unavailable", fmt::format("Energy unavailable ({})", runs_text(unavailable)), {}};
    for (const auto& reason : reasons)
      w.items.push_back(fmt::format("{} — {}", reason, fmt::join(runs_by_reason[reason], ", ")));
    out.push_back(std::move(w));
  }
  if (!estimated.empty())
    out.push_back({"energy-estimated", fmt::format("Energy estimated, not measured ({})", runs_text(estimated.size())),
                   estimated});
  if (!emulated.empty())
    out.push_back(
        {"emulated",
         fmt::format("Emulated formats: latency and energy not representative ({})", runs_text(emulated.size())),
         emulated});
  if (!failed.empty()) out.push_back({"failed", fmt::format("Failed runs ({})", runs_text(failed.size())), failed});
  auto flagged = flagged_windows(records);
  if (!flagged.empty())
    out.push_back(
        {"energy-flagged", fmt::format("Flagged energy windows ({} flagged)", flagged.size()), std::move(flagged)});
  return out;
}

}  // namespace qjoule::report
