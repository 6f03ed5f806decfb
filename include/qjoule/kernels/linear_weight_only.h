// Weight-only low-precision linear layers with qjoule's own CPU kernels: FP16 storage, INT8 (w8), INT4
// group-wise, bitsandbytes NF4 and the FP4 formats MXFP4 / NVFP4 (layouts: qjoule/quant/formats.h). Weights stay
// packed in memory; kernels decode them in registers, a few values at a time, and compute in FP32 (or, for
// int4 with int8_activations, with integer dot products on INT8 activation blocks).
//
// How the AVX2 and scalar kernels run (multi-threaded with OpenMP over output features; the AVX-512
// kernels are described at the ISA dispatch below):
//  * m <= 7 rows (decode / GEMV): each weight row is decoded in registers, 64 values at a time, and
//    multiplied into up to 4 activation rows at once; nothing is written back. (4-bit formats decode
//    64 nibbles in the order shifts pull them out of 32-bit lanes; the activations are permuted the
//    same way once per call, since a dot product does not depend on the order of its terms.)
//  * larger m: a tile of 48 output rows × 512 inputs is decoded into a thread-local FP32 buffer
//    (96 KiB, L2-resident) and reused by every activation row of the task (up to 256 rows) through a
//    4×3 register-blocked FMA micro-kernel. The weights stay 4/8/16-bit in memory; only that tile is
//    ever FP32, so this is not fake quantization.
//  * The scalar path (no SIMD intrinsics) decodes one weight row at a time into a row buffer and
//    reuses it across all activation rows.
// kernel_path() names the ISA and kernel that run: "qjoule:avx2:nf4_f32", "qjoule:scalar:int4_s8", ...
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "qjoule/kernels/linear.h"
#include "qjoule/quant/formats.h"

namespace qjoule::kernels {

struct Int4Options {
  int group_size = 128;           // 32, 64 or 128 weights per group along in_features
  bool asymmetric = false;        // false: sym, q in [-7, 7]; true: asym, q in [0, 15] with a zero point
  bool int8_activations = false;  // true: activations quantized per block of 32 to INT8, integer dots ("int4_s8")
};

struct Nf4Options {
  bool double_quant = false;  // bitsandbytes' compress_statistics: absmax values quantized to 8 bits
};

// W: [out, in] FP32 row-major (Hugging Face layout), copied and packed; bias [out] may be nullptr
// (copied, FP32); tensor_name is used in error messages (NaN/Inf weights, a shape the format cannot
// hold, a weight outside FP16's range).
// format() "fp16"; kernel "f16w_f32": FP16 weights converted in the kernel (F16C), FP32 FMA compute.
std::unique_ptr<Linear> make_linear_fp16_weights(const float* W, const float* bias, int64_t out, int64_t in,
                                                 const std::string& tensor_name);
// format() "w8"; kernel "w8_f32": INT8 per-row weights dequantized in the kernel, FP32 compute.
std::unique_ptr<Linear> make_linear_w8(const float* W, const float* bias, int64_t out, int64_t in,
                                       const std::string& tensor_name);
// format() "int4"; kernel "int4_f32" or, with int8_activations, "int4_s8". Any `in`: a row's last group
// may be partial (formats.h, "Any width"; the kernels run on the padded width, activations zero-padded).
std::unique_ptr<Linear> make_linear_int4(const float* W, const float* bias, int64_t out, int64_t in,
                                         const Int4Options& options, const std::string& tensor_name);
// format() "nf4"; kernel "nf4_f32" (or "nf4dq_f32" with double quantization): codes decoded through
// the 16-entry table held in two registers; on AVX512_VNNI the weights are repacked at load for one x16 kernel
// at every m ("nf4_x16_repacked", "nf4dq_x16_repacked"). Any `in` (a row's last block may be partial, as int4).
std::unique_ptr<Linear> make_linear_nf4(const float* W, const float* bias, int64_t out, int64_t in,
                                        const Nf4Options& options, const std::string& tensor_name);
// format() "mxfp4" / "nvfp4"; kernel "mxfp4_f32" / "nvfp4_f32": E2M1 codes decoded through their 16-entry
// table, as nf4's, times each block's scale (E8M0; NVFP4: E4M3 times the tensor's FP32 scale). Any `in`.
std::unique_ptr<Linear> make_linear_mxfp4(const float* W, const float* bias, int64_t out, int64_t in,
                                          const std::string& tensor_name);
std::unique_ptr<Linear> make_linear_nvfp4(const float* W, const float* bias, int64_t out, int64_t in,
                                          const std::string& tensor_name);

// Built from weights already in qjoule's layout (the codes of a pre-quantized checkpoint, repacked
// without passing through FP32): the same kernels, labels and bytes as the factories above give the
// same codes. int4: the block's G and scheme (int8_activations: a8's kernels); nf4: with or without double
// quantization.
template <class Block>
std::unique_ptr<Linear> make_linear_int4_packed(quant::BlockMatrix<Block> packed, const float* bias,
                                                const std::string& tensor_name, bool int8_activations = false);
std::unique_ptr<Linear> make_linear_nf4_packed(quant::Nf4Matrix packed, const float* bias,
                                               const std::string& tensor_name);
std::unique_ptr<Linear> make_linear_nf4_packed(quant::Nf4DqMatrix packed, const float* bias,
                                               const std::string& tensor_name);
// mxfp4 / nvfp4: a NaN block scale (E8M0 0xFF, E4M3 0x7F / 0xFF), a negative E4M3 scale or a tensor scale
// not finite and > 0 is one line naming the tensor and the block.
std::unique_ptr<Linear> make_linear_mxfp4_packed(quant::Mxfp4Matrix packed, const float* bias,
                                                 const std::string& tensor_name);
std::unique_ptr<Linear> make_linear_nvfp4_packed(quant::Nvfp4Matrix packed, const float* bias,
                                                 const std::string& tensor_name);

// ---- ISA dispatch -------------------------------------------------------------------------------
// Levels, each a superset of the one before:
//   avx2         AVX2 + FMA + F16C: the kernels described above.
//   avx512       + AVX512F/BW/VL/DQ: w8, int4 (FP32 activations) and nf4 run an AVX-512 GEMV for m <= 4
//                rows (decode: packed rows streamed once, unpacked in registers, FP32 FMAs), the AVX2
//                kernels for larger m. Path "qjoule:avx512:int4_f32,m>4:qjoule:avx2:int4_f32".
//   avx512_bf16  + AVX512_BF16 and oneDNN's native BF16 matmul: the 4-bit GEMVs multiply BF16-rounded
//                activations with vdpbf16ps (FP32 accumulation; w8 stays FP32), and larger m dequantize
//                weight rows once per call into a BF16 panel multiplied on oneDNN's BF16 matmul (compute
//                BF16 × BF16 → FP32), or, on CPUs where that is not faster than FP32 (no AMX; measured
//                once per process), into an FP32 panel on its FP32 matmul. Path "qjoule:avx512_bf16:
//                int4_bf16,m>4:bf16_panel+onednn:brg:avx512_core_bf16:bf16bf16f32" or "...,m>4:
//                f32_panel+onednn:brg:avx512_core:f32".
// The 4-bit formats (int4 with FP32 activations, nf4, nf4:dq) at the avx512 levels on a CPU with
// AVX512_VNNI decode (m <= 4) on 16-bit integer activations instead ("qjoule:avx512_vnni:int4_x16,m>4:
// <the level's prefill>" where measured faster; x16_decode_available below). int4:a8 at the avx512 levels runs on AVX512_VNNI where the CPU has it, every m ("qjoule:avx512_vnni:
// int4_s8": vpdpbusd on the stored nibbles), and on AVX2 otherwise. fp16 has no AVX-512 GEMV: at the
// avx512 levels it runs, and is labelled, avx2; its prefill (m > 4) there converts FP16 rows into FP32 panels for oneDNN's FP32 matmul
// ("qjoule:avx2:f16w_f32,m>4:f32_panel+onednn:brg:avx512_core:f32").
enum class WeightOnlyIsa { scalar = 0, avx2 = 1, avx512 = 2, avx512_bf16 = 3 };
// The ISA that weight-only linears built from now on use (fixed per layer at construction, kernel and
// label together): the widest level this CPU runs, at most the limit (set_weight_only_isa_limit;
// default avx512_bf16), and scalar whenever set_force_scalar_kernels(true) or the environment
// variable QJOULE_FORCE_SCALAR=1 (read at each construction) asks for it.
WeightOnlyIsa weight_only_isa();
void set_force_scalar_kernels(bool force);            // true: limit scalar; false: no limit
void set_weight_only_isa_limit(WeightOnlyIsa limit);  // e.g. avx2, to compare kernels on one CPU
std::string_view isa_name(WeightOnlyIsa isa);         // "scalar", "avx2", "avx512", "avx512_bf16"
// The FP4 formats' AVX-512 kernels pick a chunk's code bytes out of its blocks with one vpermt2b where the CPU
// has AVX512_VBMI (the same bytes, so the same results bit for bit); false: as on CPUs without it, for tests
// and benchmarks. Fixed per call.
void set_fp4_codes_by_vbmi(bool allowed);
bool fp4_codes_by_vbmi();
bool cpu_supports_avx2_fma_f16c();
bool cpu_supports_avx512_weight_only();
// "qjoule:<isa>:<kernel>"; at the avx512 levels the prefill path follows ",m>4:". bf16_decode: the
// format's avx512_bf16 GEMV multiplies in BF16 (4-bit formats: "qjoule:avx512_bf16:int4_bf16,m>4:...").
std::string weight_only_kernel_path(WeightOnlyIsa isa, const std::string& kernel, bool bf16_decode = false);
// The path of int4:a8 (int4 with INT8 activations) built for `isa` on this CPU: at the avx512 levels with
// AVX512_VNNI "qjoule:avx512_vnni:int4_s8_repacked" (weights repacked at load into 16-row panels) or, with
// `repacked` false (QJOULE_WEIGHT_ONLY_LAYOUT=rows, or a matrix with a NaN / Inf scale),
// "qjoule:avx512_vnni:int4_s8" on the rows as stored; where int4_s8_avx_vnni_on(isa) "qjoule:avx_vnni:int4_s8";
// else "qjoule:avx2:int4_s8" / "qjoule:scalar:int4_s8".
std::string int4_s8_kernel_path(WeightOnlyIsa isa, bool repacked = true);
// Whether int4:a8 built for `isa` runs the AVX2 kernel's AVX-VNNI form (one VEX vpdpbusd a 32-block): the avx2
// level or above, a CPU with AVX-VNNI, and no AVX512_VNNI kernel taking it first.
bool int4_s8_avx_vnni_on(WeightOnlyIsa isa);
// Whether layers whose kernel has a repacked form repack their weights at load: QJOULE_WEIGHT_ONLY_LAYOUT
// (repacked, the default, or rows).
bool weight_only_repacking_on();
// Whether a 4-bit layer with FP32 activations built for `isa` repacks its weights for the x16 kernel (int4,
// mxfp4, nvfp4): x16_decode_available(isa), repacking on, and QJOULE_WEIGHT_ONLY_DECODE not float.
bool repacked_x16_on(WeightOnlyIsa isa);
// Whether such a repacked layer built for `isa` multiplies its prefill (m > 4) on the panels of the rows'
// prefill, decoded from the repacked layout, on oneDNN's matmul: at the avx512_bf16 level with AVX512_VNNI, where
// the panels' matmul runs on AMX tiles (avx512::panel_kernel_path() names them); elsewhere the x16 kernel at
// every m (on a Zen 4 without AMX it took 0.69-0.92 of the BF16 panels' time at 32 rows, 0.92-1.18 at 128).
// QJOULE_REPACKED_PREFILL=panels|x16 decides instead. A rule, not a timing: the same model gives the same numbers
// in every process on a CPU.
bool repacked_prefill_on_panels(WeightOnlyIsa isa);
// The path of int4 with FP32 activations built for `isa` on this CPU: where x16_decode_available(isa), the
// weights repacked (`repacked`) and the x16 GEMV not refused (`x16`: QJOULE_WEIGHT_ONLY_DECODE is not
// float), "qjoule:avx512_vnni:int4_x16_repacked": 16-bit integer activations per 32-block, decode and, unless
// `prefill_panels` (then ",m>4:" and the panels' path follow), prefill; otherwise
// four_bit_kernel_path(isa, "int4_f32", x16).
std::string int4_kernel_path(WeightOnlyIsa isa, bool x16, bool repacked = true, bool prefill_panels = false);
// The same for the 4-bit formats with such a kernel, `format` "int4", "nf4", "nf4dq", "mxfp4" or "nvfp4":
// "qjoule:avx512_vnni:<format>_x16_repacked[,m>4:<panels>]", otherwise four_bit_kernel_path(isa,
// "<format>_f32", x16).
std::string repacked_x16_kernel_path(WeightOnlyIsa isa, const std::string& format, bool x16, bool repacked = true,
                                     bool prefill_panels = false);
// Whether 4-bit weight-only layers (int4 with FP32 activations, nf4, nf4:dq, mxfp4, nvfp4) built for `isa` can
// decode (m <= 4) on AVX512_VNNI with the activations as 16-bit integers per 32-block ("qjoule:avx512_vnni:
// int4_x16", "...:nf4_x16", "...:nf4dq_x16", "...:mxfp4_x16", "...:nvfp4_x16"): the avx512 levels on a CPU
// with AVX512_VNNI. Whether a layout does is measured once per process (the faster GEMV by 3%;
// src/kernels/cpu/weight_only/decode_gemv_choice.h), or said by QJOULE_WEIGHT_ONLY_DECODE=x16|float (another
// value: a one-line error).
bool x16_decode_available(WeightOnlyIsa isa);
// At the avx2 level (CPUs without AVX-512, or the level capped) the same formats and w8 can decode (m <= 4) on AVX2
// with the activations as 16-bit integers per 32-block, vpmaddwd in place of vpdpbusd ("qjoule:avx2:int4_x16,m>4:
// qjoule:avx2:int4_f32", "...:nf4_x16", "...:nf4dq_x16", "...:mxfp4_x16", "...:nvfp4_x16", "...:w8_x16"), chosen
// the same way. any_x16_decode_available: either.
bool x16_avx2_decode_available(WeightOnlyIsa isa);
bool any_x16_decode_available(WeightOnlyIsa isa);
// The path a 4-bit layer built for `isa` reports; kernel: "int4_f32", "nf4_f32", "nf4dq_f32", "mxfp4_f32" or
// "nvfp4_f32";
// x16_decode: its layout decodes on x16 (ignored where x16_decode_available(isa) is false).
std::string four_bit_kernel_path(WeightOnlyIsa isa, const std::string& kernel, bool x16_decode);
// w8 decodes (m <= 4) on 16-bit integer activations per 32-block at the avx512 levels ("qjoule:avx512:
// w8_x16,m>4:<the level's prefill>": vpmovsxbw + vpmaddwd, AVX512BW, no VNNI) and at the avx2 level
// ("qjoule:avx2:w8_x16,m>4:qjoule:avx2:w8_f32"), where measured faster or said as for the 4-bit formats;
// x16_decode is ignored below the avx2 level.
bool w8_x16_decode_available(WeightOnlyIsa isa);
std::string w8_kernel_path(WeightOnlyIsa isa, bool x16_decode);

// ---- Scalar references (the twins every kernel is tested against) ---------------------------------
// Same arguments as the factories plus x [m, in] and y [m, out]: quantize W with the qjoule::quant
// reference quantizers, dequantize each row with the reference dequantizer and accumulate the dot
// product in double. For int4 with int8_activations the activations are quantized with
// quant::quantize_row_q8_act_ref and each 32-block's integer dot product is exact; the blocks are
// combined in double.
void linear_fp16_weights_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                             const std::string& tensor_name, float* y);
void linear_w8_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                   const std::string& tensor_name, float* y);
void linear_int4_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                     const Int4Options& options, const std::string& tensor_name, float* y);
void linear_nf4_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                    const Nf4Options& options, const std::string& tensor_name, float* y);
void linear_mxfp4_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                      const std::string& tensor_name, float* y);
void linear_nvfp4_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                      const std::string& tensor_name, float* y);

}  // namespace qjoule::kernels
