// The one place that documents every low-precision weight (and activation) format qjoule holds in
// memory: its layout, how values are encoded and decoded, and its bits per weight. Quantizers live in
// the quantize_*.h headers beside this one; kernels (src/kernels/cpu) read exactly these structs.
//
// Conventions shared by every format
// ----------------------------------
// * A weight matrix W is [rows = out_features, cols = in_features], row-major as Hugging Face stores
//   nn.Linear weights. Blocks and groups run along `cols` (the input dimension, the dot-product axis)
//   and never straddle rows. A row's blocks are contiguous; row r starts at block r * blocks_per_row,
//   blocks_per_row = ceil(cols / block_size).
// * Any width (cols need not be a multiple of the block size): the LAST block of a row may hold fewer
//   weights, t = cols − (blocks_per_row − 1) · block_size. It is stored as a whole block; its scale
//   (absmax, zero point) is computed from its t weights only, and its remaining block_size − t codes
//   are padding that decodes to exactly 0 (int4 sym: u = 8; int4 asym: u = z; nf4: code 7). This is
//   the same as quantizing the row zero-padded to padded_cols = blocks_per_row · block_size, since
//   zeros change neither max|w| nor the asym range (which always contains 0). Kernels run on the
//   padded width with the activations zero-padded to it (0 · 0 = 0: the padding adds nothing).
//   The padding is held in memory, so it counts in bytes() and model_bytes; bits per weight over the
//   real weights is 8 · sizeof(block) · blocks_per_row / cols (int4 G128 at cols 320: 3 blocks of
//   66 bytes = 4.95 bpw; at 960: 4.40; at 2880: 4.22; cols a multiple of G: 4.125).
// * Rounding to integers is round-half-to-even (std::nearbyint in the default rounding mode, which
//   is also what _mm256_cvtps_epi32 does), and every integer code is clamped to its range.
// * Nibble order (every 4-bit format, INT4 and NF4 alike): two consecutive elements q[2i], q[2i+1]
//   share byte i, the FIRST element in the HIGH nibble, as bitsandbytes packs them:
//       byte[i] = (q[2i] << 4) | q[2i + 1]
// * FP16 fields are IEEE binary16 bit patterns (uint16_t), converted with round-to-nearest-even
//   (qjoule/quant/fp16_convert.h; bit-identical to F16C's vcvtps2ph / vcvtph2ps).
// * Quantizers reject NaN and ±Inf with a one-line error naming the tensor and the [row, col] index.
// * A scale of 0 (an all-zero row, group or block) decodes to exact zeros: codes are chosen so that
//   code × 0 is 0 and nothing divides by the scale.
// * "bits per weight" (bpw) below counts every byte held per weight: codes + scales + zero points
//   (+ padding, where a struct has any), i.e. 8 · sizeof(block) / weights_per_block.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "qjoule/io/huge_pages.h"
#include "qjoule/quant/element_math.h"

namespace qjoule::quant {

// ================================================================================================
// fp16 — FP16 weight storage (`--precision fp16`).
//   W[r, c] is held as one binary16 value; decode is exact (every FP16 is an FP32). |w| must round
//   to at most 65504 (FP16's largest finite value): larger weights stop with an error naming the
//   tensor and index. Subnormal FP16 values are kept (not flushed). 16 bpw.
// ================================================================================================
constexpr double kFp16BitsPerWeight = 16.0;

struct Fp16Matrix {
  int64_t rows = 0, cols = 0;
  io::HugePageVector<uint16_t> bits;            // [rows * cols] FP16 bit patterns, row-major
  int64_t padded_cols() const { return cols; }  // no blocks along cols: kernels run on cols itself
  std::size_t bytes() const { return bits.size() * sizeof(uint16_t); }
};

// ================================================================================================
// int8 / w8 — INT8 per-output-channel symmetric (W8A8's weights, and `w8` weight-only; same storage).
//   One FP32 scale per row: scale[r] = max_c |W[r, c]| / 127 (one ulp lower in the rare case where
//   127 · scale would overflow FP32); q = clamp(round(W / scale), -127, 127) (-128 is never produced,
//   so the range is symmetric); decode W ≈ q · scale[r]. An all-zero row has scale 0 and q = 0.
//   bpw = 8 + 32 / cols (8.0417 at cols = 768).
//
//   W8A8 on CPUs without VNNI (kernel path suffix ":w7bit"): oneDNN's AVX2 u8×s8 GEMM multiplies
//   with vpmaddubsw, which adds two u8·s8 products into an int16 and saturates when both are near
//   255 · 127. qjoule checks the GEMM at start-up on that worst case; where it saturates, `int8`
//   weights use the range [-63, 63] instead (scale = max|w| / 63, 7 bits of the 8 stored) so every
//   pair sum fits in int16 and the result is exact. Storage is unchanged; the label says so. With
//   AVX512_VNNI / AVX_VNNI (vpdpbusd accumulates straight into int32) the full [-127, 127] is used.
//   The activations are u8 = s8 + 128; the −128·Σ_k W[n, k] compensation is precomputed per row.
// ================================================================================================
constexpr int kInt8MaxCode = 127;
constexpr int kInt8MaxCodeWithoutVnni = 63;  // see ":w7bit" above
constexpr double int8_bits_per_weight(int64_t cols) { return 8.0 + 32.0 / static_cast<double>(cols); }

struct Int8Matrix {
  int64_t rows = 0, cols = 0;
  io::HugePageVector<int8_t> q;                 // [rows * cols] codes, row-major
  std::vector<float> scales;                    // [rows] FP32 per-row scales
  int64_t padded_cols() const { return cols; }  // no blocks along cols
  std::size_t bytes() const { return q.size() * sizeof(int8_t) + scales.size() * sizeof(float); }
};

// ================================================================================================
// int4 — INT4 group-wise along the input dimension, G = 32, 64 or 128 weights per group
//   (`--group-size`, default 128). Each group has one FP16 scale `d`; codes are 4-bit nibbles
//   (nibble order above) holding an unsigned value u in [0, 15]; decode W ≈ (u − z) · d.
//
//   sym  (`--int4-scheme sym`): the range is [-7, 7] — symmetric, so ±max of a group encode
//        exactly as ±7·d: d = fp16(max|w| / 7), q = clamp(round(w / d), -7, 7), stored u = q + 8
//        (u = 0, i.e. q = -8, is never produced). z = 8 is implicit, not stored.
//        bpw = 4 + 16 / G  (G = 32: 4.5, G = 64: 4.25, G = 128: 4.125).
//   asym (`--int4-scheme asym`): the group range [lo, hi] = [min(0, min w), max(0, max w)] (it always
//        contains 0, so 0 encodes exactly) maps onto [0, 15]: d = fp16((hi − lo) / 15),
//        z = clamp(round(−lo / d), 0, 15) — a 4-bit integer zero point, stored in its own byte
//        followed by one reserved zero byte (keeps `qs` 2-byte aligned) —, u = clamp(round(w / d) + z,
//        0, 15). bpw = 4 + 32 / G  (G = 32: 5.0, G = 64: 4.5, G = 128: 4.25).
//   The scale is quantized to FP16 BEFORE the codes are chosen, so codes are optimal for the scale
//   actually stored. A group whose scale would exceed FP16's range (|w| beyond 7·65504 for sym)
//   stops with an error naming the tensor; a scale that underflows to 0 encodes the group as zeros.
// ================================================================================================
template <int G>
struct BlockInt4Sym {
  static constexpr int kSize = G;
  uint16_t d;         // FP16 scale
  uint8_t qs[G / 2];  // u = q + 8, two per byte, first element in the high nibble
};
static_assert(sizeof(BlockInt4Sym<32>) == 18 && sizeof(BlockInt4Sym<64>) == 34 && sizeof(BlockInt4Sym<128>) == 66,
              "BlockInt4Sym: 2-byte FP16 scale + G/2 bytes of nibbles");

template <int G>
struct BlockInt4Asym {
  static constexpr int kSize = G;
  uint16_t d;         // FP16 scale
  uint8_t zero;       // zero point z in [0, 15] (low nibble; high nibble 0)
  uint8_t reserved;   // 0
  uint8_t qs[G / 2];  // u in [0, 15], two per byte, first element in the high nibble
};
static_assert(sizeof(BlockInt4Asym<32>) == 20 && sizeof(BlockInt4Asym<64>) == 36 && sizeof(BlockInt4Asym<128>) == 68,
              "BlockInt4Asym: FP16 scale + zero byte + reserved byte + G/2 bytes");

constexpr int kInt4SymZero = 8;  // implicit zero point of the symmetric scheme
constexpr int kInt4SymMaxCode = 7;
constexpr int kInt4AsymMaxCode = 15;

template <class Block>
constexpr double bits_per_weight() {
  return 8.0 * sizeof(Block) / Block::kSize;
}

// ================================================================================================
// nf4 — bitsandbytes' NormalFloat-4 (`--precision nf4`), blocks of 64 weights along the input dim.
//   absmax = max |w| of the block (FP32); each weight becomes the index of the nearest entry of
//   kNf4Table to w / absmax (bitsandbytes' rule: w · (1 / absmax) compared against the midpoints
//   between adjacent sorted table values, see quantize_nf4_code). Decode W = kNf4Table[code] · absmax.
//   Codes use the nibble order above, exactly as bitsandbytes' quantize_4bit(quant_type="nf4")
//   packs them; where cols is a multiple of 64, qjoule's blocks are bitsandbytes' blocks over the
//   flattened tensor (bitsandbytes' blocks straddle rows otherwise; qjoule's never do: a row's last
//   block may be partial, see "Any width" above). bpw = 4 + 32 / 64 = 4.5 (cols a multiple of 64).
//   Deviations, both only where bitsandbytes would compute 0 · inf = NaN: an all-zero block
//   (absmax 0) gets code 7 (the 0.0 entry), and a subnormal absmax (1 / absmax overflows) divides
//   instead of multiplying by the reciprocal.
//
// nf4 + double quantization (`--double-quant`, bitsandbytes' compress_statistics=True):
//   the per-block absmax values a_b (b = flattened block index r · cols/64 + c/64) are shifted by
//   their mean (`absmax_mean`: summed in double, rounded to FP32 — torch's FP32 reduction may differ in
//   the last bit) and quantized to 8 bits with bitsandbytes' dynamic map
//   (create_dynamic_map(signed=True), 256 entries, dynamic_map_signed()) in blocks of 256 consecutive
//   absmax values: s = max_b |a_b − mean| over the 256 (FP32, `absmax_scales`), code_b = nearest map
//   entry to (a_b − mean) · (1 / s) (bitsandbytes' binary search, quantize_dynamic8_code). Decode
//   a_b ≈ map[code_b] · s + mean, then W = kNf4Table[code] · a_b. The last group of 256 may be
//   partial. bpw = 8 · 33 / 64 + 32 / (64 · 256) + 32 / (rows · cols) ≈ 4.127.
// ================================================================================================
constexpr int kNf4BlockSize = 64;
constexpr int kNf4DoubleQuantGroup = 256;  // absmax values per FP32 scale in double quantization
constexpr uint8_t kNf4ZeroCode = 7;        // kNf4Table[7] == 0.0f

// bitsandbytes' published NF4 table (functional.py get_4bit_type("nf4") / kernels.cu dDequantizeNF4).
inline constexpr std::array<float, 16> kNf4Table = {-1.0f,
                                                    -0.6961928009986877f,
                                                    -0.5250730514526367f,
                                                    -0.39491748809814453f,
                                                    -0.28444138169288635f,
                                                    -0.18477343022823334f,
                                                    -0.09105003625154495f,
                                                    0.0f,
                                                    0.07958029955625534f,
                                                    0.16093020141124725f,
                                                    0.24611230194568634f,
                                                    0.33791524171829224f,
                                                    0.44070982933044434f,
                                                    0.5626170039176941f,
                                                    0.7229568362236023f,
                                                    1.0f};

struct BlockNf4 {
  static constexpr int kSize = kNf4BlockSize;
  float absmax;    // FP32 max |w| of the block
  uint8_t qs[32];  // 64 codes, two per byte, first element in the high nibble
};
static_assert(sizeof(BlockNf4) == 36, "BlockNf4: FP32 absmax + 32 bytes of nibbles (4.5 bpw)");

struct BlockNf4Dq {
  static constexpr int kSize = kNf4BlockSize;
  uint8_t absmax_code;  // index into dynamic_map_signed() (double-quantized absmax)
  uint8_t qs[32];       // 64 codes, two per byte, first element in the high nibble
};
static_assert(sizeof(BlockNf4Dq) == 33, "BlockNf4Dq: 8-bit absmax code + 32 bytes of nibbles");

constexpr double kNf4BitsPerWeight = 8.0 * sizeof(BlockNf4) / kNf4BlockSize;  // 4.5
constexpr double kNf4DqBitsPerWeight =                                        // + per-tensor mean
    8.0 * sizeof(BlockNf4Dq) / kNf4BlockSize + 32.0 / (kNf4BlockSize * kNf4DoubleQuantGroup);

// bitsandbytes' create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): 256 sorted
// values in [-0.99296875, 1]; entry 127 is 0.0 and entry 255 is 1.0. Computed once, in FP32, the way
// torch evaluates that Python function (float32 linspace, means and products).
const std::array<float, 256>& dynamic_map_signed();
constexpr uint8_t kDynamicMapZeroCode = 127;

// ================================================================================================
// Containers: a row-major matrix of blocks (int4 and nf4), and nf4 with double quantization.
// ================================================================================================
template <class Block>
struct BlockMatrix {
  int64_t rows = 0, cols = 0;        // any cols > 0; a row's last block may be partial ("Any width" above)
  io::HugePageVector<Block> blocks;  // [rows * blocks_per_row()]; row r starts at r * blocks_per_row()
  int64_t blocks_per_row() const { return (cols + Block::kSize - 1) / Block::kSize; }
  int64_t padded_cols() const { return blocks_per_row() * Block::kSize; }  // the width kernels run on
  const Block* row(int64_t r) const { return blocks.data() + r * blocks_per_row(); }
  std::size_t bytes() const { return blocks.size() * sizeof(Block); }
};

using Nf4Matrix = BlockMatrix<BlockNf4>;

struct Nf4DqMatrix {
  int64_t rows = 0, cols = 0;             // any cols > 0, as BlockMatrix
  io::HugePageVector<BlockNf4Dq> blocks;  // as BlockMatrix; flattened block index b = r * blocks_per_row() + c/64
  std::vector<float> absmax_scales;       // [ceil(blocks / 256)] FP32 scale of each group of 256 absmax codes
  float absmax_mean = 0.0f;               // FP32 mean of all absmax values, added back when decoding
  int64_t blocks_per_row() const { return (cols + kNf4BlockSize - 1) / kNf4BlockSize; }
  int64_t padded_cols() const { return blocks_per_row() * kNf4BlockSize; }
  const BlockNf4Dq* row(int64_t r) const { return blocks.data() + r * blocks_per_row(); }
  // Decoded absmax of flattened block b: map[code_b] · scale[b / 256] + mean.
  float absmax(int64_t b) const {
    return element::nf4_dq_absmax(dynamic_map_signed()[blocks[static_cast<std::size_t>(b)].absmax_code],
                                  absmax_scales[static_cast<std::size_t>(b / kNf4DoubleQuantGroup)], absmax_mean);
  }
  std::size_t bytes() const {
    return blocks.size() * sizeof(BlockNf4Dq) + absmax_scales.size() * sizeof(float) + sizeof(float);
  }
};

// ================================================================================================
// mxfp4 / nvfp4 — the FP4 formats: E2M1 elements with a block scale (quantizers: quantize_fp4.h).
//   E2M1 (OCP MX v1.0 §5.3.3): 1 sign bit, 2 exponent bits (bias 1), 1 mantissa bit; code bits
//   s ee m; no infinities or NaN. |values|: 0, 0.5, 1, 1.5, 2, 3, 4, 6 (kE2M1Table, codes 0..7; codes
//   8..15 are their negatives, 8 being −0). Encoding a real x: round to nearest on that grid, ties to
//   the even mantissa (0.25 → 0, 0.75 → 1, 1.25 → 1, 1.75 → 2, 2.5 → 2, 3.5 → 4, 5 → 4), saturating
//   at ±6; +0 and −0 both encode as code 0. Nibble order as every 4-bit format here (first element in
//   the HIGH nibble); gpt-oss's `*_blocks` tensors hold the first element in the LOW nibble.
//
// mxfp4 (OCP Microscaling, MXFP4): blocks of 32 weights along the input dim, one E8M0 scale each:
//   X = 2^(e − 127), e in 0..254 (255 is NaN, never written). Scale as the OCP spec's conversion
//   (§6.3): e − 127 = floor(log2(max|w|)) − 2 (2 = E2M1's largest exponent), clamped to [−127, 127];
//   a block of zeros takes e = 0 (codes 0). Codes = E2M1(w / X) as above. Decode W = E2M1[code] · X.
//   17 bytes per 32 weights: 4.25 bpw.
//
// nvfp4 (NVIDIA's NVFP4): blocks of 16 weights, one FP8 E4M3 scale each (OCP FP8 "E4M3FN": bias 7,
//   no infinities, largest 448, subnormals kept; round to nearest even, saturating at 448), and one
//   FP32 scale per tensor: s_t = amax(W) / (6 · 448) (1 for an all-zero tensor). A Linear qjoule runs
//   fused (Q | K | V, gate | up: decoder_lm's build_fused) is one tensor: its parts share one s_t. Block scale
//   s_b = E4M3(amax_block / 6 / s_t); codes = E2M1(w / (s_b · s_t)) (codes 0 where s_b is 0). Decode
//   W = E2M1[code] · s_b · s_t. 9 bytes per 16 weights + 4 bytes per tensor: 4.5 bpw.
// ================================================================================================
constexpr int kMxfp4BlockSize = 32;
constexpr int kNvfp4BlockSize = 16;
constexpr int kE2M1MaxExponent = 2;  // 6 = 1.5 · 2^2
constexpr float kE2M1Max = 6.0f;
constexpr float kE4M3Max = 448.0f;
inline constexpr std::array<float, 16> kE2M1Table = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                                     -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

struct BlockMxfp4 {
  static constexpr int kSize = kMxfp4BlockSize;
  uint8_t scale_e8m0;  // X = 2^(scale_e8m0 − 127)
  uint8_t qs[16];      // E2M1 codes, nibble order above
};
static_assert(sizeof(BlockMxfp4) == 17, "BlockMxfp4: E8M0 scale + 16 bytes of nibbles (4.25 bpw)");

struct BlockNvfp4 {
  static constexpr int kSize = kNvfp4BlockSize;
  uint8_t scale_e4m3;  // s_b as an FP8 E4M3FN bit pattern
  uint8_t qs[8];       // E2M1 codes, nibble order above
};
static_assert(sizeof(BlockNvfp4) == 9, "BlockNvfp4: E4M3 scale + 8 bytes of nibbles (4.5 bpw)");

constexpr double kMxfp4BitsPerWeight = 8.0 * sizeof(BlockMxfp4) / kMxfp4BlockSize;  // 4.25
constexpr double kNvfp4BitsPerWeight = 8.0 * sizeof(BlockNvfp4) / kNvfp4BlockSize;  // 4.5 (+ the tensor's FP32)

using Mxfp4Matrix = BlockMatrix<BlockMxfp4>;

struct Nvfp4Matrix : BlockMatrix<BlockNvfp4> {
  float tensor_scale = 1.0f;  // s_t
  std::size_t bytes() const { return BlockMatrix<BlockNvfp4>::bytes() + sizeof(float); }
};

// ================================================================================================
// q8 activation blocks — the INT8 activations of the `int4` W4A8 path (kernel path "..._s8").
//   Activations are quantized at run time, per token row, in blocks of 32 along the input dim:
//   d = max|x| / 127 (FP32), q = clamp(round(x · (1 / d)), -127, 127) (q = 0 when d = 0), and
//   `sum` = Σ q (used to apply the weights' zero point: Σ (u − z)·q = Σ u·q − z·Σ q). 40 bytes per
//   32 activations (10 bits per activation). Non-finite activations stop with an error naming the
//   layer. Never stored with the model; only the working buffer of one forward call.
// ================================================================================================
constexpr int kQ8ActBlockSize = 32;

struct BlockQ8Act {
  static constexpr int kSize = kQ8ActBlockSize;
  float d;        // FP32 scale
  int32_t sum;    // Σ qs
  int8_t qs[32];  // codes in [-127, 127]
};
static_assert(sizeof(BlockQ8Act) == 40, "BlockQ8Act: FP32 scale + int32 sum + 32 int8 codes");

}  // namespace qjoule::quant
