#include "energy/machine_environment.h"

#include <unistd.h>

#include <string_view>

#include "energy/text_file.h"

namespace qjoule::energy {

MachineEnvironment detect_machine_environment() {
  MachineEnvironment environment;
  const TextFile cpuinfo = read_text_file("/proc/cpuinfo");
  if (cpuinfo.ok) {
    std::string_view text = cpuinfo.text;
    // Only the first processor's flags line matters.
    const auto flags = text.find("\nflags");
    if (flags != std::string_view::npos) {
      const auto line_end = text.find('\n', flags + 1);
      const std::string_view line = text.substr(flags, line_end - flags);
      environment.virtual_machine = line.find(" hypervisor") != std::string_view::npos;
    }
  }
  environment.container = ::access("/.dockerenv", F_OK) == 0 || ::access("/run/.containerenv", F_OK) == 0;
  return environment;
}

std::string rapl_environment_hint(const MachineEnvironment& environment) {
  if (environment.virtual_machine) {
    return "running in a virtual machine (the CPU reports the `hypervisor` flag), and hypervisors "
           "do not pass RAPL through";
  }
  if (environment.container) {
    return "running in a container, and container runtimes mask /sys/devices/virtual/powercap "
           "(run with --privileged or bind-mount it)";
  }
  return "the kernel exposes no RAPL powercap zones (is the intel_rapl_msr module loaded? "
         "`sudo modprobe intel_rapl_msr`)";
}

}  // namespace qjoule::energy
