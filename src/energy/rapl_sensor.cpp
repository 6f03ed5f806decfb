#include "energy/rapl_sensor.h"

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "energy/machine_environment.h"
#include "energy/text_file.h"

namespace qjoule::energy {

namespace fs = std::filesystem;

RaplSensor::RaplSensor(SensorInfo info, std::string energy_path)
    : info_(std::move(info)), energy_path_(std::move(energy_path)) {}

std::size_t RaplSensor::read(std::int64_t now_ns, std::span<SensorReading> out) noexcept {
  if (out.empty()) return 0;
  SensorReading& reading = out[0];
  reading = SensorReading{};
  reading.time_ns = now_ns;
  std::uint64_t value = 0;
  const int error = read_u64_file(energy_path_.c_str(), value);
  if (error != 0) {
    reading.ok = false;
    reading.error_code = error;
    return 1;
  }
  reading.counter = value;
  reading.has_counter = true;
  return 1;
}

std::string RaplSensor::describe_error(int error_code) const {
  return fmt::format("reading {}: {}", energy_path_, errno_text(error_code));
}

std::string rapl_permission_message(const std::string& energy_path, const std::string& root) {
  return fmt::format(
      "no permission to read {} (since Linux 5.10 energy_uj is readable by root only); grant read "
      "access with `sudo chmod a+r {}/intel-rapl:*/energy_uj` (until reboot; a udev rule makes it "
      "permanent) or run qjoule as root",
      energy_path, root);
}

namespace {

struct Zone {
  unsigned top = 0;
  std::optional<unsigned> sub;
  fs::path dir;
  std::string name;  // contents of `name`: package-0, core, uncore, dram, psys
};

// "intel-rapl:N" (a top-level zone) or "intel-rapl:N:M" (its sub-zone M).
bool parse_zone_name(std::string_view entry, Zone& zone) {
  constexpr std::string_view prefix = "intel-rapl:";
  if (entry.substr(0, prefix.size()) != prefix) return false;
  entry.remove_prefix(prefix.size());
  const auto colon = entry.find(':');
  const auto top = parse_u64(entry.substr(0, colon));
  if (!top || entry.substr(0, colon).find_first_not_of("0123456789") != std::string_view::npos) return false;
  zone.top = static_cast<unsigned>(*top);
  if (colon == std::string_view::npos) return true;
  const std::string_view rest = entry.substr(colon + 1);
  const auto sub = parse_u64(rest);
  if (!sub || rest.find_first_not_of("0123456789") != std::string_view::npos) return false;
  zone.sub = static_cast<unsigned>(*sub);
  return true;
}

SensorScope scope_for(const Zone& zone) {
  if (!zone.sub) {
    if (zone.name.rfind("package", 0) == 0) return SensorScope::cpu_package;
    if (zone.name == "psys") return SensorScope::platform;
    if (zone.name == "dram") return SensorScope::dram;
    return SensorScope::platform;
  }
  if (zone.name == "core") return SensorScope::cpu_core;
  if (zone.name == "uncore") return SensorScope::cpu_uncore;
  if (zone.name == "dram") return SensorScope::dram;
  return SensorScope::cpu_core;
}

}  // namespace

RaplDiscovery discover_rapl_sysfs(const std::string& root) {
  RaplDiscovery found;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    found.absent.push_back(
        {"rapl", fmt::format("{} does not exist: {}", root, rapl_environment_hint(detect_machine_environment()))});
    return found;
  }
  std::vector<Zone> zones;
  bool mmio_skipped = false;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    if (entry.rfind("intel-rapl-mmio", 0) == 0) {
      mmio_skipped = true;  // the MMIO interface repeats the package counter: never add it twice
      continue;
    }
    Zone zone;
    if (!parse_zone_name(entry, zone)) continue;
    zone.dir = it->path();
    zones.push_back(std::move(zone));
  }
  if (ec) {
    found.absent.push_back({"rapl", fmt::format("cannot list {}: {}", root, ec.message())});
    return found;
  }
  if (zones.empty()) {
    found.absent.push_back({"rapl", fmt::format("no RAPL zones (intel-rapl:N) under {}: {}", root,
                                                rapl_environment_hint(detect_machine_environment()))});
    return found;
  }
  // Each package before its sub-domains, packages in index order.
  const auto order = [](const Zone& z) { return std::pair(z.top, z.sub ? *z.sub + 1 : 0u); };
  std::sort(zones.begin(), zones.end(), [&](const Zone& a, const Zone& b) { return order(a) < order(b); });

  std::map<unsigned, std::string> top_names;  // zone index -> its name ("package-0")
  std::set<std::string> used_ids;
  std::vector<std::pair<SensorInfo, std::string>> readable;  // info, energy_uj path
  std::size_t denied = 0;
  for (Zone& zone : zones) {
    const std::string zone_label = zone.dir.filename().string();
    const std::string energy_path = (zone.dir / "energy_uj").string();
    zone.name = read_trimmed_line((zone.dir / "name").string()).value_or("");
    if (zone.name.empty()) zone.name = zone_label;
    if (!zone.sub) top_names[zone.top] = zone.name;
    const std::string parent_name = top_names.count(zone.top) ? top_names[zone.top] : fmt::format("zone-{}", zone.top);
    const std::string parent_id = fmt::format("rapl:{}", parent_name);
    std::string id = zone.sub ? fmt::format("{}/{}", parent_id, zone.name) : parent_id;
    if (used_ids.count(id)) id += fmt::format("@{}", zone_label);
    used_ids.insert(id);

    std::uint64_t probe = 0;
    const int error = read_u64_file(energy_path.c_str(), probe);
    if (error == EACCES || error == EPERM) {
      ++denied;
      found.absent.push_back({id, rapl_permission_message(energy_path, root)});
      continue;
    }
    if (error != 0) {
      found.absent.push_back({id, fmt::format("cannot read {}: {}", energy_path, errno_text(error))});
      continue;
    }

    SensorInfo info;
    info.id = id;
    info.source = "rapl-sysfs";
    info.scope = scope_for(zone);
    info.has_counter = true;
    info.counter_unit_j = 1e-6;
    info.nominal_update_period_s = 1e-3;  // RAPL refreshes its counters about every millisecond
    info.notes.push_back("sysfs reports microjoules; the hardware energy unit is coarser (typically 15.3 or 61 uJ)");
    const std::string range_path = (zone.dir / "max_energy_range_uj").string();
    std::uint64_t range = 0;
    if (read_u64_file(range_path.c_str(), range) == 0 && range > 0) {
      info.counter_range = range;
    } else {
      info.notes.push_back(fmt::format("{} is unreadable: a counter wrap would be taken for a reset", range_path));
    }
    const std::string where = fmt::format("powercap {}", zone_label);
    if (zone.sub && info.scope != SensorScope::dram) {
      // core, uncore and unknown sub-domains are parts of their package: never added twice.
      info.counts_in_total = false;
      info.nested_in = parent_id;
      info.description = fmt::format("{} of CPU {} ({})", zone.name, parent_name, where);
      if (zone.name != "core" && zone.name != "uncore") {
        info.notes.push_back(fmt::format("unknown RAPL sub-domain `{}`: treated as part of its package", zone.name));
      }
    } else if (info.scope == SensorScope::cpu_package) {
      info.description = fmt::format("CPU {} ({})", zone.name, where);
    } else if (info.scope == SensorScope::dram) {
      info.description =
          zone.sub ? fmt::format("DRAM of CPU {} ({})", parent_name, where) : fmt::format("DRAM ({})", where);
    } else {
      info.description = fmt::format("platform domain {} ({})", zone.name, where);
      info.counts_in_total = false;
      info.notes.push_back("psys covers the whole SoC platform, packages included: reported, not added to the total");
    }
    readable.emplace_back(std::move(info), energy_path);
  }
  if (mmio_skipped && !readable.empty()) {
    readable.front().first.notes.push_back("intel-rapl-mmio zones repeat the package counter and are skipped");
  }
  for (auto& [info, path] : readable) {
    found.sensors.push_back(std::make_unique<RaplSensor>(std::move(info), std::move(path)));
  }
  found.unreadable = found.sensors.empty() && denied > 0;
  return found;
}

}  // namespace qjoule::energy
