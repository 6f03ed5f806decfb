// Which ISA the weight-only kernels dispatch to, and the switch that forces the scalar path.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "qjoule/kernels/linear_weight_only.h"

namespace qjoule::kernels {
namespace {

std::atomic<bool> g_force_scalar{false};

bool env_forces_scalar() {
  const char* v = std::getenv("QJOULE_FORCE_SCALAR");
  return v != nullptr && std::strcmp(v, "") != 0 && std::strcmp(v, "0") != 0;
}

}  // namespace

bool cpu_supports_avx2_fma_f16c() {
  static const bool supported = [] {
    __builtin_cpu_init();
    // libgcc's checks include the OS's XSAVE support for the YMM state.
    return __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0 &&
           __builtin_cpu_supports("f16c") != 0;
  }();
  return supported;
}

void set_force_scalar_kernels(bool force) { g_force_scalar.store(force); }

WeightOnlyIsa weight_only_isa() {
  if (g_force_scalar.load() || env_forces_scalar()) return WeightOnlyIsa::scalar;
  return cpu_supports_avx2_fma_f16c() ? WeightOnlyIsa::avx2 : WeightOnlyIsa::scalar;
}

std::string_view isa_name(WeightOnlyIsa isa) { return isa == WeightOnlyIsa::avx2 ? "avx2" : "scalar"; }

}  // namespace qjoule::kernels
