// The 4-bit formats on the GPU as the kernels of linear_weight_only_cuda.cu read them: the planes of
// a matrix (Planar), each format's scale, offset and decoded nibble, the NF4 and FP4 tables in constant
// memory.
// Device code, included by linear_weight_only_cuda.cu alone (its __constant__ tables are that file's).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "qjoule/quant/element_math.h"

namespace qjoule::kernels::cuda_detail {
namespace {

// The NF4 table and bitsandbytes' dynamic map, copied to each device once (ensure_tables) from the
// host's quant::kNf4Table and quant::dynamic_map_signed(); kernels copy them to shared memory.
__constant__ float c_nf4_table[16];
__constant__ float c_dynamic_map[256];
// The FP4 formats' values and block scales, from quant::kE2M1Table, quant::e8m0_value and quant::e4m3_value
// (the CPU kernels read the same 256-entry scale tables: kernels/cpu/weight_only/fp4_scales.h).
__constant__ float c_e2m1_table[16];
__constant__ float c_e8m0_map[256];
__constant__ float c_e4m3_map[256];

// The device layout of a 4-bit matrix [out, in] with groups of G weights along `in` (to_planar): the
// same codes and scales as formats.h's blocks, in planes, so that each row's codes are one run of
// in / 2 bytes that 128-bit loads read (a block of 18 or 33 bytes allows 1- or 2-byte loads only):
//   codes   [out, in / 2]  the blocks' qs bytes of each row, in order (formats.h's nibble order)
//   scales  [out, in / G]  int4: the FP16 d; nf4: the FP32 absmax; nf4dq: the 8-bit absmax code;
//                          mxfp4: the E8M0 byte; nvfp4: the E4M3 byte
//   zeros   [out, in / G]  int4 asym: the zero point z (u8); absent otherwise
// A byte of the blocks that carries nothing (int4 asym's reserved byte) is not kept.
struct Planar {
  const uint8_t* codes;
  const void* scales;
  const uint8_t* zeros;
  const float* absmax_scales;  // nf4dq: one FP32 scale per 256 absmax codes (flattened group index)
  float absmax_mean;           // nf4dq
  int64_t groups_per_row;      // in / G
  float tensor_scale;          // nvfp4: s_t (1 otherwise)
};

// Each format: its group size, the bytes of one group's scale, and the decoded value of a nibble as
// v · scale, where v · scale is exactly the CPU reference dequantizer's FP32 product.
template <int G, bool kAsym>
struct Int4Format {
  static constexpr int kGroup = G;
  static constexpr bool kTable = false, kMap = false;
  __device__ static float scale(const Planar& p, int64_t o, int64_t g, const float* /*map*/) {
    return __half2float(
        __ushort_as_half(__ldg(static_cast<const unsigned short*>(p.scales) + o * p.groups_per_row + g)));
  }
  __device__ static float offset(const Planar& p, int64_t o, int64_t g) {
    return kAsym ? static_cast<float>(__ldg(p.zeros + o * p.groups_per_row + g)) : 8.0f;
  }
  __device__ static float value(int code, float zero, const float* /*table*/) {
    return static_cast<float>(code) - zero;
  }
  // 2^23 + z as an FP32 (exact: z ≤ 15), what values8 subtracts.
  __device__ static float word_offset(const Planar& p, int64_t o, int64_t g) { return 8388608.0f + offset(p, o, g); }
  // The 8 codes of a word (nibble order as `nibble`) minus the zero point, without I2F: each code is
  // put in the low mantissa bits of 2^23 (0x4B0000cc: exactly 2^23 + c) by one byte permute, then
  // offset = 2^23 + z is subtracted (exactly c − z, as value()).
  __device__ static void values8(uint32_t word, float offset, const float* /*table*/, float (&v)[8]) {
    const uint32_t low = word & 0x0F0F0F0Fu;          // byte j: element 2j + 1
    const uint32_t high = (word >> 4) & 0x0F0F0F0Fu;  // byte j: element 2j
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[2 * j] = __uint_as_float(__byte_perm(high, 0x4B000000u, 0x7440u | j)) - offset;
      v[2 * j + 1] = __uint_as_float(__byte_perm(low, 0x4B000000u, 0x7440u | j)) - offset;
    }
  }
};

// What the table formats (nf4, mxfp4, nvfp4) share: each code's value from a 16-entry table in shared memory
// (the format's table_source), no zero point.
struct TableValues {
  static constexpr bool kTable = true;
  __device__ static float offset(const Planar&, int64_t, int64_t) { return 0.0f; }
  __device__ static float value(int code, float /*zero*/, const float* table) { return table[code]; }
  __device__ static float word_offset(const Planar&, int64_t, int64_t) { return 0.0f; }
  __device__ static void values8(uint32_t word, float /*offset*/, const float* table, float (&v)[8]);
};

// What the NF4 formats share: 64-weight groups, values from the NF4 table.
struct Nf4Values : TableValues {
  static constexpr int kGroup = 64;
  __device__ static const float* table_source() { return c_nf4_table; }
};

struct Nf4Format : Nf4Values {
  static constexpr bool kMap = false;
  __device__ static const float* map_source() { return nullptr; }
  __device__ static float scale(const Planar& p, int64_t o, int64_t g, const float* /*map*/) {
    return __ldg(static_cast<const float*>(p.scales) + o * p.groups_per_row + g);
  }
};

struct Nf4DqFormat : Nf4Values {
  static constexpr bool kMap = true;
  __device__ static const float* map_source() { return c_dynamic_map; }
  __device__ static float scale(const Planar& p, int64_t o, int64_t g, const float* map) {
    const int64_t b = o * p.groups_per_row + g;  // flattened block index (formats.h)
    // Nf4DqMatrix::absmax: map[code] · scale[b / 256] + mean, two FP32 roundings as on the CPU.
    return element::nf4_dq_absmax(map[__ldg(static_cast<const uint8_t*>(p.scales) + b)],
                                  __ldg(p.absmax_scales + b / 256), p.absmax_mean);
  }
};

// What the FP4 formats share: values from the E2M1 table, and the block's scale byte decoded through a
// 256-entry table (shared memory) into exactly the FP32 value the CPU kernels multiply by (fp4_scales.h:
// table[byte] · s_t).
struct E2M1Values : TableValues {
  static constexpr bool kMap = true;
  __device__ static const float* table_source() { return c_e2m1_table; }
};

// mxfp4: 32-weight blocks, X = 2^(e − 127) (the tensor scale is 1: a product by 1 is exact).
struct Mxfp4Format : E2M1Values {
  static constexpr int kGroup = 32;
  __device__ static const float* map_source() { return c_e8m0_map; }
  __device__ static float scale(const Planar& p, int64_t o, int64_t g, const float* map) {
    return map[__ldg(static_cast<const uint8_t*>(p.scales) + o * p.groups_per_row + g)];
  }
};

// nvfp4: 16-weight blocks, s_b (E4M3) · s_t in one FP32 product, as the CPU kernels fold it.
struct Nvfp4Format : E2M1Values {
  static constexpr int kGroup = 16;
  __device__ static const float* map_source() { return c_e4m3_map; }
  __device__ static float scale(const Planar& p, int64_t o, int64_t g, const float* map) {
    return map[__ldg(static_cast<const uint8_t*>(p.scales) + o * p.groups_per_row + g)] * p.tensor_scale;
  }
};

// Element 2j of a little-endian word of codes sits in the high nibble of byte j, element 2j + 1 in its
// low nibble (formats.h's nibble order, element::nibble_of_word as the CPU tests it).
__device__ inline int nibble(uint32_t word, int e) { return element::nibble_of_word(word, e); }

// The table's values of a word's 8 codes (shared memory).
__device__ inline void TableValues::values8(uint32_t word, float, const float* table, float (&v)[8]) {
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = table[nibble(word, e)];
}

// The format's 16-value table (F::table_source) and 256-entry map (F::map_source) into shared memory.
template <class F>
__device__ inline void load_tables(float* table, float* map) {
  if constexpr (F::kTable) {
    const float* source = F::table_source();
    for (int i = threadIdx.x; i < 16; i += blockDim.x) table[i] = source[i];
  }
  if constexpr (F::kMap) {
    const float* source = F::map_source();
    for (int i = threadIdx.x; i < 256; i += blockDim.x) map[i] = source[i];
  }
  __syncthreads();
}

}  // namespace
}  // namespace qjoule::kernels::cuda_detail
