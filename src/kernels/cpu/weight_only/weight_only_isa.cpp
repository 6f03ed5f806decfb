// Which ISA the weight-only kernels dispatch to, and the switches that cap it (scalar by function or by
// QJOULE_FORCE_SCALAR=1; any level by set_weight_only_isa_limit, for tests and benchmarks).
#include <atomic>

#include "kernels/cpu/gemv_u8s8s32_avx512_vnni.h"
#include "kernels/cpu/weight_only/avx512/weight_only_avx512.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "qjoule/kernels/kernel_overrides.h"
#include "qjoule/kernels/linear_weight_only.h"

namespace qjoule::kernels {
namespace {

std::atomic<int> g_limit{static_cast<int>(WeightOnlyIsa::avx512_bf16)};

bool env_forces_scalar() { return kernel_override(KernelOverride::force_scalar).value_or("0") == "1"; }

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

bool cpu_supports_avx512_weight_only() {
  static const bool supported = [] {
    __builtin_cpu_init();
    // libgcc's checks include the OS's XSAVE support for the ZMM and mask state.
    return cpu_supports_avx2_fma_f16c() && __builtin_cpu_supports("avx512f") != 0 &&
           __builtin_cpu_supports("avx512bw") != 0 && __builtin_cpu_supports("avx512vl") != 0 &&
           __builtin_cpu_supports("avx512dq") != 0;
  }();
  return supported;
}

void set_force_scalar_kernels(bool force) {
  g_limit.store(static_cast<int>(force ? WeightOnlyIsa::scalar : WeightOnlyIsa::avx512_bf16));
}

void set_weight_only_isa_limit(WeightOnlyIsa limit) { g_limit.store(static_cast<int>(limit)); }

namespace {
std::atomic<bool> g_fp4_vbmi{true};
}  // namespace

void set_fp4_codes_by_vbmi(bool allowed) { g_fp4_vbmi.store(allowed); }

bool fp4_codes_by_vbmi() {
  static const bool vbmi = cpu_supports_avx512_weight_only() && __builtin_cpu_supports("avx512vbmi") != 0;
  return vbmi && g_fp4_vbmi.load();
}

WeightOnlyIsa weight_only_isa() {
  if (env_forces_scalar()) return WeightOnlyIsa::scalar;
  const int limit = g_limit.load();
  if (limit >= static_cast<int>(WeightOnlyIsa::avx512_bf16) && cpu_supports_avx512_weight_only() &&
      avx512::bf16_panel_available()) {
    return WeightOnlyIsa::avx512_bf16;
  }
  if (limit >= static_cast<int>(WeightOnlyIsa::avx512) && cpu_supports_avx512_weight_only())
    return WeightOnlyIsa::avx512;
  if (limit >= static_cast<int>(WeightOnlyIsa::avx2) && cpu_supports_avx2_fma_f16c()) return WeightOnlyIsa::avx2;
  return WeightOnlyIsa::scalar;
}

std::string_view isa_name(WeightOnlyIsa isa) {
  switch (isa) {
    case WeightOnlyIsa::avx512_bf16: return "avx512_bf16";
    case WeightOnlyIsa::avx512: return "avx512";
    case WeightOnlyIsa::avx2: return "avx2";
    case WeightOnlyIsa::scalar: break;
  }
  return "scalar";
}

std::string weight_only_kernel_path(WeightOnlyIsa isa, const std::string& kernel, bool bf16_decode) {
  switch (isa) {
    case WeightOnlyIsa::scalar:
    case WeightOnlyIsa::avx2: break;
    case WeightOnlyIsa::avx512: return "qjoule:avx512:" + kernel + ",m>4:qjoule:avx2:" + kernel;
    case WeightOnlyIsa::avx512_bf16: {
      std::string decode = "qjoule:avx512:" + kernel;
      if (bf16_decode && kernel.ends_with("_f32")) {
        decode = "qjoule:avx512_bf16:" + kernel.substr(0, kernel.size() - 4) + "_bf16";
      }
      return decode + ",m>4:" + avx512::panel_kernel_path();
    }
  }
  return "qjoule:" + std::string(isa_name(isa)) + ":" + kernel;
}

bool weight_only_repacking_on() {
  return kernel_override(KernelOverride::weight_only_layout).value_or("repacked") == "repacked";
}

bool x16_decode_available(WeightOnlyIsa isa) { return isa >= WeightOnlyIsa::avx512 && cpu_supports_avx512_vnni(); }

bool x16_avx2_decode_available(WeightOnlyIsa isa) { return isa == WeightOnlyIsa::avx2; }

bool any_x16_decode_available(WeightOnlyIsa isa) { return x16_decode_available(isa) || x16_avx2_decode_available(isa); }

bool repacked_x16_on(WeightOnlyIsa isa) {
  return x16_decode_available(isa) && weight_only_repacking_on() &&
         kernel_override(KernelOverride::weight_only_decode).value_or("x16") == "x16";
}

std::string four_bit_kernel_path(WeightOnlyIsa isa, const std::string& kernel, bool x16_decode) {
  std::string path = weight_only_kernel_path(isa, kernel, true);
  if (x16_decode && x16_avx2_decode_available(isa) && kernel.ends_with("_f32")) {
    return "qjoule:avx2:" + kernel.substr(0, kernel.size() - 4) + "_x16,m>4:" + path;
  }
  if (!x16_decode || !x16_decode_available(isa) || !kernel.ends_with("_f32")) return path;
  return "qjoule:avx512_vnni:" + kernel.substr(0, kernel.size() - 4) + "_x16" + path.substr(path.find(",m>4:"));
}

bool repacked_prefill_on_panels(WeightOnlyIsa isa) {
  if (isa != WeightOnlyIsa::avx512_bf16 || !x16_decode_available(isa)) return false;
  if (const auto forced = kernel_override(KernelOverride::repacked_prefill)) return *forced == "panels";
  return avx512::panel_kernel_path().find("_amx") != std::string::npos;  // oneDNN's BF16 matmul on AMX tiles
}

std::string repacked_x16_kernel_path(WeightOnlyIsa isa, const std::string& format, bool x16, bool repacked,
                                     bool prefill_panels) {
  if (x16 && repacked && x16_decode_available(isa)) {
    const std::string decode = "qjoule:avx512_vnni:" + format + "_x16_repacked";
    return prefill_panels ? decode + ",m>4:" + avx512::panel_kernel_path() : decode;
  }
  return four_bit_kernel_path(isa, format + "_f32", x16);
}

std::string int4_kernel_path(WeightOnlyIsa isa, bool x16, bool repacked, bool prefill_panels) {
  return repacked_x16_kernel_path(isa, "int4", x16, repacked, prefill_panels);
}

bool w8_x16_decode_available(WeightOnlyIsa isa) { return isa >= WeightOnlyIsa::avx2; }

std::string w8_kernel_path(WeightOnlyIsa isa, bool x16_decode) {
  std::string path = weight_only_kernel_path(isa, "w8_f32", true);
  if (!x16_decode || !w8_x16_decode_available(isa)) return path;
  if (isa == WeightOnlyIsa::avx2) return "qjoule:avx2:w8_x16,m>4:" + path;
  return "qjoule:avx512:w8_x16" + path.substr(path.find(",m>4:"));
}

std::string int4_s8_kernel_path(WeightOnlyIsa isa, bool repacked) {
  if (isa >= WeightOnlyIsa::avx512 && cpu_supports_avx512_vnni()) {
    return repacked ? "qjoule:avx512_vnni:int4_s8_repacked" : "qjoule:avx512_vnni:int4_s8";
  }
  if (int4_s8_avx_vnni_on(isa)) return "qjoule:avx_vnni:int4_s8";
  return weight_only_kernel_path(isa > WeightOnlyIsa::avx2 ? WeightOnlyIsa::avx2 : isa, "int4_s8");
}

bool int4_s8_avx_vnni_on(WeightOnlyIsa isa) {
  return isa >= WeightOnlyIsa::avx2 && !(isa >= WeightOnlyIsa::avx512 && cpu_supports_avx512_vnni()) &&
         detail::cpu_supports_avx_vnni();
}

}  // namespace qjoule::kernels
