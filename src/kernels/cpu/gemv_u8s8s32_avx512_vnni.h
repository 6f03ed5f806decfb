// qjoule's integer GEMV for decode-sized products (m <= 4 activation rows) on CPUs with AVX512_VNNI:
//   c[i, j] = Σ_t a[i, t] · b[j, t]    a: u8 [m, k], b: s8 [n, k] row-major, c: s32 [m, n], exact.
// Each weight row is streamed once, 64 bytes at a time (one row at a time: one sequential stream per
// thread; one vpdpbusd per 64 weights and activation row, int32 lanes, no saturation), and reduced at the row's end; the threads split the
// output rows. With oneDNN 2.6 at m = 1, TinyLlama-shaped int8 decode read 40–49% of the triad bandwidth
// (bench_decode, Zen 4); this kernel aims at the bandwidth. Tested bit-exact against the plain
// integer reference and oneDNN (test_gemm_u8s8s32).
#pragma once

#include <cstdint>

namespace qjoule::kernels {

constexpr int64_t kGemvU8S8S32MaxRows = 4;

// AVX512F + AVX512BW + AVX512_VNNI (vpdpbusd on zmm), checked once.
bool cpu_supports_avx512_vnni();

// m in [1, kGemvU8S8S32MaxRows]; needs cpu_supports_avx512_vnni(). Multi-threaded with OpenMP.
void gemv_u8s8s32_avx512_vnni(const uint8_t* a, int64_t m, const int8_t* b, int64_t n, int64_t k, int32_t* c);

}  // namespace qjoule::kernels
