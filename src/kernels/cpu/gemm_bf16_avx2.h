// qjoule's AVX2+FMA matrix product with BF16 weights: C[m, n] = A[m, k] · Wᵀ + bias, where W is held
// packed as BF16 and widened to FP32 in registers, A holds FP32 values already rounded to BF16
// (so every product is BF16×BF16, exact in FP32), and accumulation is FP32 FMA.
//
// Packed layout: W is cut into panels of 16 output columns (the last one zero-padded). For each
// panel p and input index k there are 8 uint32 lanes; lane l holds column 16p+l in its low half and
// column 16p+8+l in its high half. One 256-bit load then gives both 8-column halves with a shift
// (low halves → FP32) and a mask (high halves → FP32).
//
// Blocking: micro-tile 6 rows × 16 columns (12 accumulator registers), k in blocks of 256 (a panel
// slice is 8 KiB), tiles of 48 rows × 128 columns distributed over OpenMP threads.
#pragma once

#include <cstdint>
#include <vector>

namespace qjoule::kernels {

struct PackedBf16Weights {
  int64_t n = 0, k = 0, panels = 0;
  std::vector<uint32_t> lanes;  // panels · k · 8
  std::vector<float> bias;      // panels · 16, zero-padded (zeros when the layer has no bias)
};

// W: [n, k] FP32 row-major, rounded to BF16 while packing; bias [n] or nullptr.
PackedBf16Weights pack_bf16_weights(const float* W, const float* bias, int64_t n, int64_t k);

// Requires a CPU with AVX2 and FMA (the caller checks cpu_has_avx2_fma()).
void gemm_bf16_avx2(const float* a_bf16_rounded, int64_t m, const PackedBf16Weights& w, float* c);

bool cpu_has_avx2_fma();

}  // namespace qjoule::kernels
