#include "energy/perf_power_sensor.h"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "energy/text_file.h"

namespace qjoule::energy {

namespace fs = std::filesystem;

PerfPowerSensor::PerfPowerSensor(SensorInfo info, int fd) : info_(std::move(info)), fd_(fd) {}

PerfPowerSensor::~PerfPowerSensor() {
  if (fd_ >= 0) ::close(fd_);
}

std::size_t PerfPowerSensor::read(std::int64_t now_ns, std::span<SensorReading> out) noexcept {
  if (out.empty()) return 0;
  SensorReading& reading = out[0];
  reading = SensorReading{};
  reading.time_ns = now_ns;
  std::uint64_t value = 0;
  const ssize_t n = ::read(fd_, &value, sizeof value);
  if (n != static_cast<ssize_t>(sizeof value)) {
    reading.ok = false;
    reading.error_code = n < 0 ? errno : EIO;
    return 1;
  }
  reading.counter = value;
  reading.has_counter = true;
  return 1;
}

std::string PerfPowerSensor::describe_error(int error_code) const {
  return fmt::format("reading perf event {}: {}", info_.id, errno_text(error_code));
}

namespace {

struct EventKind {
  const char* event;  // file name under events/
  const char* label;  // sensor id part
  SensorScope scope;
  bool nested;  // part of the package
};

constexpr EventKind kEvents[] = {
    {"energy-pkg", "package", SensorScope::cpu_package, false}, {"energy-cores", "core", SensorScope::cpu_core, true},
    {"energy-gpu", "uncore", SensorScope::cpu_uncore, true},    {"energy-ram", "dram", SensorScope::dram, false},
    {"energy-psys", "psys", SensorScope::platform, false},
};

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    const auto dash = item.find('-');
    const auto first = parse_u64(item.substr(0, dash));
    const auto last = dash == std::string::npos ? first : parse_u64(item.substr(dash + 1));
    if (!first || !last) continue;
    for (auto cpu = *first; cpu <= *last; ++cpu) cpus.push_back(static_cast<int>(cpu));
  }
  return cpus;
}

std::optional<std::uint64_t> parse_event_config(const std::string& text) {
  // "event=0x02" (possibly with further ",key=value" terms, which RAPL events do not use)
  const auto pos = text.find("event=");
  if (pos == std::string::npos) return std::nullopt;
  std::string value = text.substr(pos + 6);
  value = value.substr(0, value.find(','));
  try {
    return std::stoull(std::string(trim(value)), nullptr, 0);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string perf_denied_advice() {
  const auto paranoid = read_trimmed_line("/proc/sys/kernel/perf_event_paranoid").value_or("?");
  return fmt::format(
      "system-wide perf events need kernel.perf_event_paranoid <= 0 (it is {}) or CAP_PERFMON: "
      "`sudo sysctl kernel.perf_event_paranoid=0`, or run qjoule as root",
      paranoid);
}

}  // namespace

PerfPowerDiscovery discover_perf_power(const std::string& root) {
  PerfPowerDiscovery found;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    found.absent.push_back({"rapl-perf", fmt::format("{} does not exist: the kernel has no perf `power` PMU here "
                                                     "(no RAPL, or a virtual machine)",
                                                     root)});
    return found;
  }
  const auto type = parse_u64(read_trimmed_line(root + "/type").value_or(""));
  if (!type) {
    found.absent.push_back({"rapl-perf", fmt::format("cannot read the PMU type from {}/type", root)});
    return found;
  }
  std::vector<int> cpus = parse_cpu_list(read_trimmed_line(root + "/cpumask").value_or("0"));
  if (cpus.empty()) cpus.push_back(0);

  for (const EventKind& kind : kEvents) {
    const std::string event_path = fmt::format("{}/events/{}", root, kind.event);
    const auto event_text = read_trimmed_line(event_path);
    if (!event_text) continue;  // this CPU does not have the domain
    const auto config = parse_event_config(*event_text);
    const auto scale = parse_double(read_trimmed_line(event_path + ".scale").value_or(""));
    if (!config || !scale || *scale <= 0) {
      found.absent.push_back({fmt::format("rapl-perf:{}", kind.label),
                              fmt::format("cannot parse {} (`{}`) or its .scale", event_path, *event_text)});
      continue;
    }
    for (std::size_t package = 0; package < cpus.size(); ++package) {
      const std::string id = kind.scope == SensorScope::platform ? std::string("rapl-perf:psys")
                                                                 : fmt::format("rapl-perf:{}-{}", kind.label, package);
      if (kind.scope == SensorScope::platform && package > 0) break;
      perf_event_attr attr;
      std::memset(&attr, 0, sizeof attr);
      attr.type = static_cast<std::uint32_t>(*type);
      attr.size = sizeof attr;
      attr.config = *config;
      const long fd = ::syscall(SYS_perf_event_open, &attr, -1, cpus[package], -1, PERF_FLAG_FD_CLOEXEC);
      if (fd < 0) {
        const int error = errno;
        std::string reason = fmt::format("perf_event_open(power/{}/ on CPU {}) failed: {}", kind.event, cpus[package],
                                         errno_text(error));
        if (error == EACCES || error == EPERM) reason += "; " + perf_denied_advice();
        found.absent.push_back({id, reason});
        continue;
      }
      SensorInfo info;
      info.id = id;
      info.source = "rapl-perf";
      info.scope = kind.scope;
      info.has_counter = true;
      info.counter_unit_j = *scale;
      info.counter_range = 0;  // the kernel accumulates into 64 bits
      info.nominal_update_period_s = 1e-3;
      const std::string package_id = fmt::format("rapl-perf:package-{}", package);
      info.description = fmt::format("RAPL {} via perf PMU (CPU {})", kind.event, cpus[package]);
      if (kind.nested) {
        info.counts_in_total = false;
        info.nested_in = package_id;
      }
      if (kind.scope == SensorScope::platform) {
        info.counts_in_total = false;
        info.notes.push_back("psys covers the whole SoC platform, packages included: reported, not added to the total");
      }
      found.sensors.push_back(std::make_unique<PerfPowerSensor>(std::move(info), static_cast<int>(fd)));
    }
  }
  if (found.sensors.empty() && found.absent.empty()) {
    found.absent.push_back({"rapl-perf", fmt::format("{}/events has no energy-* events", root)});
  }
  return found;
}

}  // namespace qjoule::energy
