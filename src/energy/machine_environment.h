// Why a sensor may be missing on this machine: a virtual machine (hypervisors do not pass RAPL or
// GPUs through by default) or a container (runtimes mask /sys/devices/virtual/powercap).
#pragma once

#include <string>

namespace qjoule::energy {

struct MachineEnvironment {
  bool virtual_machine = false;  // the CPU reports the `hypervisor` flag
  bool container = false;        // /.dockerenv or /run/.containerenv exists
};

MachineEnvironment detect_machine_environment();

// A short clause for absence reasons, e.g. "running in a virtual machine (the CPU reports the
// `hypervisor` flag), and hypervisors do not pass RAPL through"; "" when nothing is known.
std::string rapl_environment_hint(const MachineEnvironment& environment);

}  // namespace qjoule::energy
