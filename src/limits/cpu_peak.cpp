#include "qjoule/limits/cpu_peak.h"

#include <omp.h>

#include "amx_tiles.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <vector>

namespace qjoule::limits {
namespace {

constexpr long kSteps = 4'000'000;  // ~0.1 s of work per thread at ~3 GHz (12 FMA or 18 int ops a step)

// The loops are inline assembly so that no compiler can spill, hoist or fold them: each step issues
// independent instructions whose only loop-carried dependency is the accumulator itself, and the
// register file holds everything.
#define QJ_FMA(i) "vfmadd231ps %%ymm15, %%ymm14, %%ymm" #i "\n\t"
int fp32_fma_loop(long steps) {
  __asm__ volatile(
      "vxorps %%ymm0, %%ymm0, %%ymm0\n\t"
      "vmovaps %%ymm0, %%ymm1\n\t vmovaps %%ymm0, %%ymm2\n\t vmovaps %%ymm0, %%ymm3\n\t"
      "vmovaps %%ymm0, %%ymm4\n\t vmovaps %%ymm0, %%ymm5\n\t vmovaps %%ymm0, %%ymm6\n\t"
      "vmovaps %%ymm0, %%ymm7\n\t vmovaps %%ymm0, %%ymm8\n\t vmovaps %%ymm0, %%ymm9\n\t"
      "vmovaps %%ymm0, %%ymm10\n\t vmovaps %%ymm0, %%ymm11\n\t"
      "vmovaps %%ymm0, %%ymm14\n\t vmovaps %%ymm0, %%ymm15\n\t"
      "1:\n\t"
      QJ_FMA(0) QJ_FMA(1) QJ_FMA(2) QJ_FMA(3) QJ_FMA(4) QJ_FMA(5)
      QJ_FMA(6) QJ_FMA(7) QJ_FMA(8) QJ_FMA(9) QJ_FMA(10) QJ_FMA(11)
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(steps)
      :
      : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
        "xmm14", "xmm15");
  return static_cast<int>(steps);
}
#undef QJ_FMA

#define QJ_MADD(t, acc)                     \
  "vpmaddubsw %%ymm15, %%ymm14, %%ymm" #t   \
  "\n\t"                                    \
  "vpmaddwd %%ymm13, %%ymm" #t ", %%ymm" #t \
  "\n\t"                                    \
  "vpaddd %%ymm" #t ", %%ymm" #acc ", %%ymm" #acc "\n\t"
int int8_madd_loop(long steps) {
  __asm__ volatile(
      "vpcmpeqw %%ymm13, %%ymm13, %%ymm13\n\t"
      "vpsrlw $15, %%ymm13, %%ymm13\n\t"  // int16 ones for vpmaddwd
      "vmovdqa %%ymm13, %%ymm14\n\t vmovdqa %%ymm13, %%ymm15\n\t"
      "vpxor %%ymm6, %%ymm6, %%ymm6\n\t vmovdqa %%ymm6, %%ymm7\n\t vmovdqa %%ymm6, %%ymm8\n\t"
      "vmovdqa %%ymm6, %%ymm9\n\t vmovdqa %%ymm6, %%ymm10\n\t vmovdqa %%ymm6, %%ymm11\n\t"
      "1:\n\t"
      QJ_MADD(0, 6) QJ_MADD(1, 7) QJ_MADD(2, 8) QJ_MADD(3, 9) QJ_MADD(4, 10) QJ_MADD(5, 11)
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(steps)
      :
      : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
        "xmm13", "xmm14", "xmm15");
  return static_cast<int>(steps);
}
#undef QJ_MADD

// AVX-512: the same loops on zmm registers (32 FLOP per FMA), and VNNI's vpdpbusd (64 u8×s8
// multiply-adds into int32 = 128 OP per instruction), which is what oneDNN's int8 GEMM runs there.
#define QJ_FMA512(i) "vfmadd231ps %%zmm15, %%zmm14, %%zmm" #i "\n\t"
int fp32_fma512_loop(long steps) {
  __asm__ volatile(
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
      "vmovaps %%zmm0, %%zmm1\n\t vmovaps %%zmm0, %%zmm2\n\t vmovaps %%zmm0, %%zmm3\n\t"
      "vmovaps %%zmm0, %%zmm4\n\t vmovaps %%zmm0, %%zmm5\n\t vmovaps %%zmm0, %%zmm6\n\t"
      "vmovaps %%zmm0, %%zmm7\n\t vmovaps %%zmm0, %%zmm8\n\t vmovaps %%zmm0, %%zmm9\n\t"
      "vmovaps %%zmm0, %%zmm10\n\t vmovaps %%zmm0, %%zmm11\n\t"
      "vmovaps %%zmm0, %%zmm14\n\t vmovaps %%zmm0, %%zmm15\n\t"
      "1:\n\t"
      QJ_FMA512(0) QJ_FMA512(1) QJ_FMA512(2) QJ_FMA512(3) QJ_FMA512(4) QJ_FMA512(5)
      QJ_FMA512(6) QJ_FMA512(7) QJ_FMA512(8) QJ_FMA512(9) QJ_FMA512(10) QJ_FMA512(11)
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(steps)
      :
      : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
        "xmm14", "xmm15");
  return static_cast<int>(steps);
}
#undef QJ_FMA512

#define QJ_DPBUSD(i) "vpdpbusd %%zmm15, %%zmm14, %%zmm" #i "\n\t"
int int8_vnni512_loop(long steps) {
  __asm__ volatile(
      "vpternlogd $0xff, %%zmm14, %%zmm14, %%zmm14\n\t"
      "vmovdqa32 %%zmm14, %%zmm15\n\t"
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
      "vmovdqa32 %%zmm0, %%zmm1\n\t vmovdqa32 %%zmm0, %%zmm2\n\t vmovdqa32 %%zmm0, %%zmm3\n\t"
      "vmovdqa32 %%zmm0, %%zmm4\n\t vmovdqa32 %%zmm0, %%zmm5\n\t vmovdqa32 %%zmm0, %%zmm6\n\t"
      "vmovdqa32 %%zmm0, %%zmm7\n\t vmovdqa32 %%zmm0, %%zmm8\n\t vmovdqa32 %%zmm0, %%zmm9\n\t"
      "vmovdqa32 %%zmm0, %%zmm10\n\t vmovdqa32 %%zmm0, %%zmm11\n\t"
      "1:\n\t"
      QJ_DPBUSD(0) QJ_DPBUSD(1) QJ_DPBUSD(2) QJ_DPBUSD(3) QJ_DPBUSD(4) QJ_DPBUSD(5)
      QJ_DPBUSD(6) QJ_DPBUSD(7) QJ_DPBUSD(8) QJ_DPBUSD(9) QJ_DPBUSD(10) QJ_DPBUSD(11)
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(steps)
      :
      : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
        "xmm14", "xmm15");
  return static_cast<int>(steps);
}
#undef QJ_DPBUSD

#define QJ_DPBF16(i) "vdpbf16ps %%zmm15, %%zmm14, %%zmm" #i "\n\t"
int bf16_dp512_loop(long steps) {
  __asm__ volatile(
      "vpxord %%zmm14, %%zmm14, %%zmm14\n\t"
      "vmovdqa32 %%zmm14, %%zmm15\n\t"
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
      "vmovaps %%zmm0, %%zmm1\n\t vmovaps %%zmm0, %%zmm2\n\t vmovaps %%zmm0, %%zmm3\n\t"
      "vmovaps %%zmm0, %%zmm4\n\t vmovaps %%zmm0, %%zmm5\n\t vmovaps %%zmm0, %%zmm6\n\t"
      "vmovaps %%zmm0, %%zmm7\n\t vmovaps %%zmm0, %%zmm8\n\t vmovaps %%zmm0, %%zmm9\n\t"
      "vmovaps %%zmm0, %%zmm10\n\t vmovaps %%zmm0, %%zmm11\n\t"
      "1:\n\t"
      QJ_DPBF16(0) QJ_DPBF16(1) QJ_DPBF16(2) QJ_DPBF16(3) QJ_DPBF16(4) QJ_DPBF16(5)
      QJ_DPBF16(6) QJ_DPBF16(7) QJ_DPBF16(8) QJ_DPBF16(9) QJ_DPBF16(10) QJ_DPBF16(11)
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(steps)
      :
      : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
        "xmm14", "xmm15");
  return static_cast<int>(steps);
}
#undef QJ_DPBF16

bool has_avx512() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"); }
bool has_avx512_vnni() { return has_avx512() && __builtin_cpu_supports("avx512vnni"); }
bool has_avx512_bf16() { return has_avx512() && __builtin_cpu_supports("avx512bf16"); }
bool has_fma_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

// `trials` rates of `loop` on `threads` threads, `trial_steps` steps each, after `warmup_steps` on the
// calling thread (clock ramp, the wide units' power state), in ops per second.
template <class Loop>
std::vector<double> trial_rates(int threads, double ops_per_step, Loop loop, long warmup_steps, long trial_steps,
                                int trials) {
  loop(warmup_steps);
  std::vector<double> rates;
  for (int trial = 0; trial < trials; ++trial) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
    loop(trial_steps);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(ops_per_step * double(trial_steps) * threads / seconds);
  }
  return rates;
}

// A peak is a maximum, so the best of several short trials is the right estimate: a trial that an
// other process interrupted can only read low.
template <class Loop>
double ops_per_second(int threads, double ops_per_step, Loop loop, long steps = kSteps) {
  const auto rates = trial_rates(threads, ops_per_step, loop, steps / 10, steps / 4, 7);
  return *std::max_element(rates.begin(), rates.end());
}

// The FP32 FMA loop of the widest ISA here and its FLOP per step; nullopt without AVX-512 or AVX2+FMA.
struct Fp32Loop {
  int (*loop)(long);
  double flop_per_step;
};
std::optional<Fp32Loop> fp32_loop() {
  if (has_avx512()) return Fp32Loop{fp32_fma512_loop, 12.0 * 32.0};
  if (has_fma_avx2()) return Fp32Loop{fp32_fma_loop, 12.0 * 16.0};
  return std::nullopt;
}

// An AMX step is 4 tile products of 16 cycles each or more: ~20 ms a trial at 2 GHz.
constexpr long kAmxSteps = 2'400'000;

void measure_amx(int threads, CpuPeak& peak) {
  if (!amx::has_tile()) return;
  if (const std::string refused = amx::request_tile_permission(); !refused.empty()) {
    peak.amx = "AMX tiles present, their peak not measured: " + refused +
               " (the bf16 / int8 roofs are AVX-512's; oneDNN cannot use AMX either)";
    return;
  }
  if (amx::has_bf16())
    peak.amx_bf16_gflops = ops_per_second(threads, amx::kBf16OpsPerStep, amx::bf16_loop, kAmxSteps) / 1e9;
  if (amx::has_int8())
    peak.amx_int8_gops = ops_per_second(threads, amx::kInt8OpsPerStep, amx::int8_loop, kAmxSteps) / 1e9;
}

}  // namespace

const CpuPeak& measured_peak(int threads) {
  static std::mutex mutex;
  static std::map<int, CpuPeak> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(threads);
  if (it != cache.end()) return it->second;
  CpuPeak peak;
  if (const auto fp32 = fp32_loop()) {
    peak.fp32_gflops = ops_per_second(threads, fp32->flop_per_step, fp32->loop) / 1e9;
  } else {
    peak.fp32_unavailable = "this CPU has neither AVX-512 nor AVX2 with FMA";
  }
  if (has_avx512_bf16()) {
    peak.bf16_gflops = ops_per_second(threads, 12.0 * 64.0, bf16_dp512_loop) / 1e9;
  } else {
    peak.bf16_unavailable = "this CPU has no AVX512_BF16 (BF16 products run as FP32 there)";
  }
  if (has_avx512_vnni()) {
    peak.int8_gops = ops_per_second(threads, 12.0 * 128.0, int8_vnni512_loop) / 1e9;
  } else if (has_fma_avx2()) {
    peak.int8_gops = ops_per_second(threads, 6.0 * 64.0, int8_madd_loop) / 1e9;
  } else {
    peak.int8_unavailable = "this CPU has neither AVX512_VNNI nor AVX2";
  }
  measure_amx(threads, peak);
  return cache.emplace(threads, peak).first->second;
}

std::optional<double> fp32_rate_now(int threads) {
  // 5 trials of ~2 ms at ~3 GHz: the probe must not lengthen a run, only catch the state the host was in.
  const auto fp32 = fp32_loop();
  if (!fp32) return std::nullopt;
  auto rates = trial_rates(threads, fp32->flop_per_step, fp32->loop, 250'000, 1'000'000, 5);
  std::nth_element(rates.begin(), rates.begin() + 2, rates.end());
  return rates[2] / 1e9;
}

std::string peak_method() {
  const std::string fp32 = has_avx512() ? "fp32 = 12 chains of vfmadd231ps zmm (32 FLOP each)"
                                        : "fp32 = 12 chains of vfmadd231ps ymm (16 FLOP each)";
  const std::string int8 = has_avx512_vnni()
                               ? "int8 = 12 chains of vpdpbusd zmm (128 OP each, AVX512_VNNI)"
                               : "int8 = 6 chains of vpmaddubsw+vpmaddwd+vpaddd ymm (64 OP each, the AVX2 "
                                 "non-VNNI int8 GEMM sequence)";
  const std::string bf16 = has_avx512_bf16() ? "; bf16 = 12 chains of vdpbf16ps zmm (64 FLOP each)" : "";
  const std::string tiles = amx::has_tile() ? "; amx_bf16 / amx_int8 = 4 chains of tdpbf16ps / tdpbusd on 16 x 64-byte "
                                              "tiles (16,384 FLOP / 32,768 OP each)"
                                            : "";
  return "measured, best of 7 trials: " + fp32 + bf16 + "; " + int8 + tiles;
}

}  // namespace qjoule::limits
