// FP4 weights (mxfp4, nvfp4) × FP32 activations on AVX512_VNNI over weights repacked at load into 16-row
// panels ("qjoule:avx512_vnni:mxfp4_x16_repacked" / "...:nvfp4_x16_repacked", every m; layout:
// fp4_repacked.h, threads: repacked_panels_avx512_vnni.h). Twice an E2M1 value is an integer (0, ±1, ±2, ±3,
// ±4, ±6, ±8, ±12), so a code becomes the byte t = 2·E2M1 + 12 (0..24) by one table lookup, and the block's
// dot product is exact in int32 as int4's is with its zero point 12:
//   Σ 2·E2M1·q = Σ (t − 12)·q = 256·(Σ t·h − 12·Σ h) + (Σ t·l − 12·Σ l)
// with the activations made 16-bit integers per 32-block as the x16 kernels make them (quantize_block_x16.h:
// q = 256·h + l, within 2^-16 of the block's largest value). Then one conversion and one FMA by the block's
// scale (MXFP4: 2^(e − 127); NVFP4: s_b / 256, both exact) and one FMA by the activations' factor (MXFP4:
// s / 2; NVFP4: 128 · s_t · s, the tensor's scale folded into the activations' where the row-wise kernels
// fold it into the block's: one FP32 rounding elsewhere, within the same budget). NVFP4's 16-blocks are the
// registers 0-1 and 2-3 of a 32-block, each summed and scaled apart. The lookup is one vpshufb a nibble
// (measured on a Zen 4: vpermb, which spares the low nibble's AND, was no faster). A row holding a NaN or Inf
// is multiplied by the FP32 twin (gemm_fp4_f32_repacked_ref), as IEEE arithmetic has it.
#include <array>
#include <vector>

#include "kernels/cpu/weight_only/avx512/fp4_scale_lanes_avx512.h"
#include "kernels/cpu/weight_only/avx512_vnni/repacked_panels_avx512_vnni.h"
#include "kernels/cpu/weight_only/quantize_block_x16.h"
#include "kernels/cpu/weight_only/repacked/fp4_repacked.h"

namespace qjoule::kernels::detail {
namespace {

constexpr int kCodeZero = 12;  // t = 2·E2M1 + 12 >= 0: vpdpbusd's unsigned operand

// t for every index whose low four bits are the code: vpshufb's table in each 128-bit lane.
struct CodeBytesTable {
  alignas(64) std::array<int8_t, 64> t{};
  constexpr CodeBytesTable() {
    for (int i = 0; i < 64; ++i)
      t[static_cast<std::size_t>(i)] = static_cast<int8_t>(2.0f * quant::kE2M1Table[static_cast<std::size_t>(i % 16)] +
                                                           static_cast<float>(kCodeZero));
  }
};
constexpr CodeBytesTable kCodeBytes{};

// 32 activations as 16-bit integers in two limbs, in their own order, with the zero point's term −12·Σq
// over each 16-half (NVFP4's blocks) and over the whole block (MXFP4's): |Σq| <= 32 · 32767.
struct Fp4X16Block {
  int8_t h[32];
  uint8_t l[32];
  int32_t zero_terms[3];  // elements 0..15, 16..31, 0..31
  float factor;           // the block's scale s times the matrix's factor (fp4_activation_factor)
};

// What multiplies a block's s besides the block scale as block_scales decodes it: 1/2 (the codes are 2·E2M1),
// and for NVFP4 256 (block_scales gives s_b / 256) times the tensor's scale.
template <class Packed>
float fp4_activation_factor(const RepackedFp4<Packed>& w) {
  return RepackedFp4<Packed>::kNv ? 128.0f * w.tensor_scale : 0.5f;
}

QJOULE_TARGET_REPACKED_VNNI bool quantize_row_fp4_x16(const float* x, int64_t nb32, float factor, Fp4X16Block* out) {
  __mmask16 bad = 0;
  for (int64_t b = 0; b < nb32; ++b) {
    const BlockX16 block = quantize_block_x16(x + b * kRepackedBlock);
    bad |= block.bad;
    Fp4X16Block& o = out[b];
    store_x16_limbs(block.q0, o.h, o.l);
    store_x16_limbs(block.q1, o.h + 16, o.l + 16);
    o.zero_terms[0] = -kCodeZero * _mm512_reduce_add_epi32(block.q0);
    o.zero_terms[1] = -kCodeZero * _mm512_reduce_add_epi32(block.q1);
    o.zero_terms[2] = o.zero_terms[0] + o.zero_terms[1];
    o.factor = factor * block.s;
  }
  return bad == 0;
}

// The bytes t of a register's low (elements 8j + t) and high (8j + 4 + t) nibbles.
struct CodeBytes {
  __m512i table, low4;
  QJOULE_TARGET_REPACKED_VNNI CodeBytes()
      : table(_mm512_load_si512(kCodeBytes.t.data())), low4(_mm512_set1_epi8(0x0F)) {}
  QJOULE_TARGET_REPACKED_VNNI void operator()(__m512i codes, __m512i& lo, __m512i& hi) const {
    lo = _mm512_shuffle_epi8(table, _mm512_and_si512(codes, low4));
    hi = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(codes, 4), low4));
  }
};

// The block scales of the panel's 16 rows for block s of 32-block b: MXFP4 2^(e − 127), NVFP4 s_b / 256.
template <class Packed>
QJOULE_TARGET_REPACKED_VNNI __m512 block_scales(const RepackedFp4<Packed>& w, const uint8_t* panel, int64_t b, int s) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w.scale_bytes(panel, b, s)));
  if constexpr (RepackedFp4<Packed>::kNv) {
    return e4m3_lanes_over_256(bytes);
  } else {
    return e8m0_lanes(_mm512_cvtepu8_epi32(bytes));
  }
}

// The panel's block scales, decoded once for the activation rows that meet it in turn (prefill).
template <class Packed>
QJOULE_TARGET_REPACKED_VNNI void decode_panel_scales(const RepackedFp4<Packed>& w, int64_t p, float* out) {
  constexpr int S = RepackedFp4<Packed>::kScalesPerBlock32;
  for (int64_t b = 0; b < w.blocks32(); ++b)
    for (int s = 0; s < S; ++s) _mm512_storeu_ps(out + (b * S + s) * kRepackedRows, block_scales(w, w.panel(p), b, s));
}

// The panel's code bytes t (CodeBytes: low and high nibbles of each register, [nb32][4][2]), looked up once
// for the activation rows that meet it in turn (prefill).
struct alignas(64) Zmm {
  uint8_t bytes[64];
};
template <class Packed>
QJOULE_TARGET_REPACKED_VNNI void decode_panel_code_bytes(const RepackedFp4<Packed>& w, int64_t p, Zmm* out) {
  const CodeBytes code_bytes;
  const uint8_t* panel = w.panel(p);
  for (int64_t r = 0; r < w.blocks32() * 4; ++r) {
    __m512i lo, hi;
    code_bytes(_mm512_loadu_si512(panel + 64 * r), lo, hi);
    _mm512_store_si512(out[2 * r].bytes, lo);
    _mm512_store_si512(out[2 * r + 1].bytes, hi);
  }
}

// y[i, 16p .. 16p + 16 · PR) for MR activation rows, PR panels side by side (repacked_panels_avx512_vnni.h);
// `scales` and `bytes`: the one panel's decode_panel_scales and decode_panel_code_bytes (PR = 1), or nullptr
// to decode them here. Per 32-block, a row's FP32 term is Σ_s total_s · scale_s (NVFP4's two halves), then
// times the row's factor in one FMA.
template <class Packed, int MR, int PR>
QJOULE_TARGET_REPACKED_VNNI void fp4_panel_rows(const RepackedFp4<Packed>& w, int64_t p0, const Fp4X16Block* xa,
                                                const float* bias, float* y, const float* scales, const Zmm* bytes) {
  constexpr int S = RepackedFp4<Packed>::kScalesPerBlock32, kRegs = 4 / S;
  const int64_t N = w.rows, nb32 = w.blocks32();
  const uint8_t* panels[PR];
  for (int q = 0; q < PR; ++q) panels[q] = w.panel(p0 + q);
  const CodeBytes code_bytes;
  __m512 acc[PR][MR];
  for (int q = 0; q < PR; ++q)
    for (int i = 0; i < MR; ++i) acc[q][i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb32; ++b) {
    __m512 term[PR][MR];
    for (int s = 0; s < S; ++s) {
      __m512i th[PR][MR], tl[PR][MR];
      for (int i = 0; i < MR; ++i) {
        const __m512i zero_term = _mm512_set1_epi32(xa[i * nb32 + b].zero_terms[S == 1 ? 2 : s]);
        for (int q = 0; q < PR; ++q) {
          th[q][i] = _mm512_setzero_si512();
          tl[q][i] = zero_term;
        }
      }
      for (int j = s * kRegs; j < (s + 1) * kRegs; ++j) {
        __m512i lo[PR], hi[PR];
        for (int q = 0; q < PR; ++q) {
          if (bytes != nullptr) {
            lo[q] = _mm512_load_si512(bytes[2 * (4 * b + j)].bytes);
            hi[q] = _mm512_load_si512(bytes[2 * (4 * b + j) + 1].bytes);
            continue;
          }
          __m512i codes = _mm512_loadu_si512(panels[q] + b * kRepackedBlockBytes + 64 * j);
          asm volatile("" : "+v"(codes));  // one load a register, not one per use
          code_bytes(codes, lo[q], hi[q]);
        }
        for (int i = 0; i < MR; ++i) {
          const Fp4X16Block& a = xa[i * nb32 + b];
          const __m512i h_lo = repacked::broadcast4(a.h + 8 * j), h_hi = repacked::broadcast4(a.h + 8 * j + 4);
          const __m512i l_lo = repacked::broadcast4(a.l + 8 * j), l_hi = repacked::broadcast4(a.l + 8 * j + 4);
          for (int q = 0; q < PR; ++q) {
            th[q][i] = _mm512_dpbusd_epi32(th[q][i], lo[q], h_lo);
            th[q][i] = _mm512_dpbusd_epi32(th[q][i], hi[q], h_hi);
            tl[q][i] = _mm512_dpbusd_epi32(tl[q][i], l_lo, lo[q]);
            tl[q][i] = _mm512_dpbusd_epi32(tl[q][i], l_hi, hi[q]);
          }
        }
      }
      for (int q = 0; q < PR; ++q) {
        const __m512 dw = scales != nullptr ? _mm512_loadu_ps(scales + (b * S + s) * kRepackedRows)
                                            : block_scales(w, panels[q], b, s);
        for (int i = 0; i < MR; ++i) {
          const __m512 total = _mm512_cvtepi32_ps(_mm512_add_epi32(tl[q][i], _mm512_slli_epi32(th[q][i], 8)));
          term[q][i] = s == 0 ? _mm512_mul_ps(total, dw) : _mm512_fmadd_ps(total, dw, term[q][i]);
        }
      }
    }
    for (int i = 0; i < MR; ++i) {
      const __m512 factor = _mm512_set1_ps(xa[i * nb32 + b].factor);
      for (int q = 0; q < PR; ++q) acc[q][i] = _mm512_fmadd_ps(term[q][i], factor, acc[q][i]);
    }
  }
  repacked::store_panel_outputs<MR, PR>(acc, p0, N, bias, y);
}

// Decode (m <= 4): the shared loops, panels side by side. Prefill: a thread takes one panel at a time, decodes
// its scales and looks its code bytes up once (in its L2: K / 32 · 512 bytes), and meets every activation row
// with them, four rows at a time.
template <class Packed>
void run_fp4_panels(const RepackedFp4<Packed>& w, const Fp4X16Block* xa, int64_t m, const float* bias, float* y) {
  const int64_t N = w.rows, nb32 = w.blocks32();
  if (m <= repacked::kMaxRowsAtOnce) {
    repacked::for_panels(N, w.panels(), nb32, xa, m, y,
                         [&](int64_t mr, int64_t p, int64_t count, const Fp4X16Block* xr, float* yr) {
                           repacked::dispatch_panel_rows(mr, p, count, [&]<int MR, int PR>(int64_t p0) {
                             fp4_panel_rows<Packed, MR, PR>(w, p0, xr, bias, yr, nullptr, nullptr);
                           });
                         });
    return;
  }
#pragma omp parallel
  {
    thread_local std::vector<float> scales;
    thread_local std::vector<Zmm> bytes;
    scales.resize(static_cast<std::size_t>(nb32 * RepackedFp4<Packed>::kScalesPerBlock32 * kRepackedRows));
    bytes.resize(static_cast<std::size_t>(nb32 * 4 * 2));
#pragma omp for schedule(dynamic)
    for (int64_t p = 0; p < w.panels(); ++p) {
      decode_panel_scales(w, p, scales.data());
      decode_panel_code_bytes(w, p, bytes.data());
      for (int64_t i0 = 0; i0 < m; i0 += repacked::kMaxRowsAtOnce) {
        const Fp4X16Block* xr = xa + i0 * nb32;
        float* yr = y + i0 * N;
        switch (std::min(repacked::kMaxRowsAtOnce, m - i0)) {
          case 1: fp4_panel_rows<Packed, 1, 1>(w, p, xr, bias, yr, scales.data(), bytes.data()); break;
          case 2: fp4_panel_rows<Packed, 2, 1>(w, p, xr, bias, yr, scales.data(), bytes.data()); break;
          case 3: fp4_panel_rows<Packed, 3, 1>(w, p, xr, bias, yr, scales.data(), bytes.data()); break;
          default: fp4_panel_rows<Packed, 4, 1>(w, p, xr, bias, yr, scales.data(), bytes.data()); break;
        }
      }
    }
  }
}

}  // namespace

template <class Packed>
void gemm_fp4_x16_repacked_avx512_vnni(const RepackedFp4<Packed>& w, const float* bias, const float* x, int64_t m,
                                       float* y) {
  if (m <= 0 || w.rows <= 0) return;
  const int64_t nb32 = w.blocks32();
  const float factor = fp4_activation_factor(w);
  repacked::quantize_then_run_panels<Fp4X16Block>(
      x, m, nb32, [&](const float* row, Fp4X16Block* out) { return quantize_row_fp4_x16(row, nb32, factor, out); },
      [&](const Fp4X16Block* blocks) { run_fp4_panels<Packed>(w, blocks, m, bias, y); },
      [&] { gemm_fp4_f32_repacked_ref(w, bias, x, m, y); });
}

template void gemm_fp4_x16_repacked_avx512_vnni<quant::Mxfp4Matrix>(const RepackedFp4<quant::Mxfp4Matrix>&,
                                                                    const float*, const float*, int64_t, float*);
template void gemm_fp4_x16_repacked_avx512_vnni<quant::Nvfp4Matrix>(const RepackedFp4<quant::Nvfp4Matrix>&,
                                                                    const float*, const float*, int64_t, float*);

}  // namespace qjoule::kernels::detail
