// Nanoseconds a second: the energy module keeps its times as integer nanoseconds (energy/sampler.h).
#pragma once

namespace qjoule::energy {

inline constexpr double kNsPerS = 1e9;

}  // namespace qjoule::energy
