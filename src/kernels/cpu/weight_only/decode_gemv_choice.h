// Which decode GEMV (m <= 4) a weight-only layout runs on this CPU: the x16 one (16-bit integer activations; on
// AVX512_VNNI at the avx512 levels, on vpmaddwd at the avx2 level) or the FP32 / BF16 one. Chosen by measurement,
// once per process, level and layout, as the prefill's panel kind is: both GEMVs time a synthetic 512 × 2048 layer of the layout (in
// the caches: the GEMVs' own cost, which a memory-bound decode hides only while it stays below the
// reads), taking turns, and x16 runs where it is at least 3% faster. Measured on a Zen 4 (2 threads):
// int4 G = 32 x16 (30.5 vs 37.7 µs a call), int4 G = 128 BF16 (24.7 vs 28.9), nf4 even; on a Zen 3 (AVX2) x16 for
// every 4-bit layout and w8 (int4 G = 32 in the L3: 11.7 vs 5.8 GB/s a thread). The environment
// variable QJOULE_WEIGHT_ONLY_DECODE=x16|float decides instead (tests, benchmarks); another value is a
// one-line error.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "qjoule/kernels/linear_weight_only.h"

namespace qjoule::kernels::detail {

// The synthetic weights the layouts are timed on: 512 × 2048, spread evenly over ±0.05, the same every
// call (made for the measurement and freed with it: nothing stays in memory after a layer is built).
constexpr int64_t kDecodeTimingRows = 512, kDecodeTimingCols = 2048;
std::vector<float> decode_timing_weights();

// x16 or not for `layout` (e.g. "int4:g=32:sym", "nf4"): false where any_x16_decode_available(isa) is
// false; else what QJOULE_WEIGHT_ONLY_DECODE says, or measure_x16_faster() (called once per process, level and
// layout; its answer is kept).
bool choose_x16_decode(WeightOnlyIsa isa, const std::string& layout, const std::function<bool()>& measure_x16_faster);
// The same where `available` says whether this layer's level has an x16 GEMV (w8: w8_x16_decode_available) and
// `key` names the level and the layout ("avx2 w8").
bool choose_x16_decode(bool available, const std::string& key, const std::function<bool()>& measure_x16_faster);

// Times gemm_x16 and gemm_float on w, one activation row, taking turns; true when x16's best round is
// at least 3% faster than the float GEMV's.
template <class Packed, class Gemm>
bool x16_measured_faster(const Packed& w, Gemm gemm_x16, Gemm gemm_float) {
  std::vector<float> x(static_cast<std::size_t>(w.padded_cols())), y(static_cast<std::size_t>(w.rows));
  for (std::size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>((k * 7919) % 2001) / 1000.0f - 1.0f;
  const auto round_us = [&](Gemm gemm) {
    constexpr int kCalls = 16;
    const auto t0 = std::chrono::steady_clock::now();
    for (int c = 0; c < kCalls; ++c) gemm(w, nullptr, x.data(), 1, y.data());
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kCalls;
  };
  round_us(gemm_x16);  // warm-up: scratch, caches, the OpenMP threads
  round_us(gemm_float);
  double best_x16 = 1e300, best_float = 1e300;
  for (int r = 0; r < 7; ++r) {
    best_x16 = std::min(best_x16, round_us(gemm_x16));
    best_float = std::min(best_float, round_us(gemm_float));
  }
  return best_x16 <= 0.97 * best_float;
}

}  // namespace qjoule::kernels::detail
