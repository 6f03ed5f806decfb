#include "qjoule/energy/estimate.h"

#include <cmath>

#include "energy/text_file.h"
#include "qjoule/error.h"

namespace qjoule::energy {

CpuTdpEstimate parse_energy_estimate(const std::string& spec) {
  const std::string prefix = "cpu-tdp=";
  if (spec.rfind(prefix, 0) != 0) {
    fail("--energy-estimate {}: expected cpu-tdp=WATTS (e.g. cpu-tdp=65), the only estimate qjoule makes", spec);
  }
  const auto watts = parse_double(spec.substr(prefix.size()));
  if (!watts || !std::isfinite(*watts) || *watts <= 0.0 || *watts > 10000.0) {
    fail("--energy-estimate {}: WATTS must be a positive number of watts (the CPU's TDP), got `{}`", spec,
         spec.substr(prefix.size()));
  }
  return CpuTdpEstimate{*watts};
}

}  // namespace qjoule::energy
