// The repacked int4 layout (int4_repacked.h): packing, unpacking and the scalar twin on it.
#include "kernels/cpu/weight_only/repacked/int4_repacked.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "qjoule/quant/fp16_convert.h"
#include "qjoule/quant/quantize_activations_q8.h"
#include "qjoule/quant/quantize_int4.h"

namespace qjoule::kernels::detail {
namespace {

inline int code_of(const uint8_t* panel, int64_t b, int64_t r, int e) {
  return repacked_code(panel, repacked_nibble_at(b, r, e));
}

template <class Block>
uint16_t scale_bits_of(const RepackedInt4<Block>& w, const uint8_t* panel, int64_t g, int64_t r) {
  uint16_t bits = 0;
  std::memcpy(&bits, panel + w.scales_offset() + (g * kRepackedRows + r) * 2, sizeof(bits));
  return bits;
}

// Group g's scale (as FP32) and zero point (sym: the implicit 8) of the panel's row `lane`.
struct GroupScale {
  float d;
  int z;
};
template <class Block>
GroupScale group_of(const RepackedInt4<Block>& w, const uint8_t* panel, int64_t g, int64_t lane) {
  GroupScale out{quant::fp16_bits_to_fp32(scale_bits_of(w, panel, g, lane)), quant::kInt4SymZero};
  if constexpr (RepackedInt4<Block>::kAsym) out.z = panel[w.zeros_offset() + g * 2 * kRepackedRows + lane];
  return out;
}

}  // namespace

template <class Block>
bool int4_scales_finite(const quant::BlockMatrix<Block>& w) {
  for (const Block& block : w.blocks) {
    if ((block.d & 0x7C00) == 0x7C00) return false;  // FP16 exponent all ones: Inf or NaN
  }
  return true;
}

template <class Block>
RepackedInt4<Block> repack_int4(const quant::BlockMatrix<Block>& w) {
  constexpr int S = RepackedInt4<Block>::kSubBlocks;
  RepackedInt4<Block> r;
  r.rows = w.rows;
  r.cols = w.cols;
  r.data.assign(static_cast<std::size_t>(r.panels() * r.panel_stride()), 0);
  for_each_panel_row(r.data.data(), w.rows, r.panel_stride(), [&](uint8_t* panel, int64_t lane, int64_t o) {
    const Block* row = w.row(o);
    for (int64_t g = 0; g < r.groups(); ++g) {
      std::memcpy(panel + r.scales_offset() + (g * kRepackedRows + lane) * 2, &row[g].d, sizeof(row[g].d));
      if constexpr (RepackedInt4<Block>::kAsym) {
        panel[r.zeros_offset() + g * 2 * kRepackedRows + lane] = row[g].zero;
        panel[r.zeros_offset() + g * 2 * kRepackedRows + kRepackedRows + lane] = row[g].reserved;
      }
      for (int s = 0; s < S; ++s) {
        for (int e = 0; e < kRepackedBlock; ++e) {
          const int u = quant::int4_nibble(row[g].qs, s * kRepackedBlock + e);
          put_repacked_code(panel, repacked_nibble_at(g * S + s, lane, e), u);
        }
      }
    }
  });
  return r;
}

template <class Block>
quant::BlockMatrix<Block> unpack_int4_repacked(const RepackedInt4<Block>& r) {
  constexpr int S = RepackedInt4<Block>::kSubBlocks;
  quant::BlockMatrix<Block> w;
  w.rows = r.rows;
  w.cols = r.cols;
  w.blocks.assign(static_cast<std::size_t>(w.rows * w.blocks_per_row()), Block{});
  for (int64_t o = 0; o < w.rows; ++o) {
    const uint8_t* panel = r.panel(o / kRepackedRows);
    const int64_t lane = o % kRepackedRows;
    Block* row = w.blocks.data() + o * w.blocks_per_row();
    for (int64_t g = 0; g < r.groups(); ++g) {
      row[g].d = scale_bits_of(r, panel, g, lane);
      if constexpr (RepackedInt4<Block>::kAsym) {
        row[g].zero = panel[r.zeros_offset() + g * 2 * kRepackedRows + lane];
        row[g].reserved = panel[r.zeros_offset() + g * 2 * kRepackedRows + kRepackedRows + lane];
      }
      for (int s = 0; s < S; ++s) {
        for (int e = 0; e < kRepackedBlock; e += 2) {
          const int hi = code_of(panel, g * S + s, lane, e), lo = code_of(panel, g * S + s, lane, e + 1);
          row[g].qs[(s * kRepackedBlock + e) / 2] = static_cast<uint8_t>(hi << 4 | lo);
        }
      }
    }
  }
  return w;
}

template <class Block>
void gemm_int4_s8_repacked_ref(const RepackedInt4<Block>& w, const float* bias, const float* x, int64_t m, float* y,
                               std::string_view layer) {
  constexpr int S = RepackedInt4<Block>::kSubBlocks;
  const int64_t N = w.rows, K = w.padded_cols(), nb32 = w.blocks32();
  if (m <= 0 || N <= 0) return;
  std::vector<quant::BlockQ8Act> xq(static_cast<std::size_t>(m * nb32));
  for (int64_t i = 0; i < m; ++i) quant::quantize_row_q8_act_ref(x + i * K, K, xq.data() + i * nb32, layer, i);
  for (int64_t o = 0; o < N; ++o) {
    const uint8_t* panel = w.panel(o / kRepackedRows);
    const int64_t lane = o % kRepackedRows;
    for (int64_t i = 0; i < m; ++i) {
      const quant::BlockQ8Act* xa = xq.data() + i * nb32;
      float acc = 0.0f;
      for (int64_t g = 0; g < w.groups(); ++g) {
        const auto [d, z] = group_of(w, panel, g, lane);
        for (int s = 0; s < S; ++s) {
          const quant::BlockQ8Act& a = xa[g * S + s];
          int32_t dot = 0;
          for (int e = 0; e < kRepackedBlock; ++e) dot += code_of(panel, g * S + s, lane, e) * a.qs[e];
          acc += static_cast<float>(dot - z * a.sum) * (d * a.d);
        }
      }
      y[i * N + o] = acc + (bias != nullptr ? bias[o] : 0.0f);
    }
  }
}

template <class Block>
void gemm_int4_f32_repacked_ref(const RepackedInt4<Block>& w, const float* bias, const float* x, int64_t m, float* y) {
  constexpr int S = RepackedInt4<Block>::kSubBlocks;
  const int64_t N = w.rows, K = w.padded_cols();
#pragma omp parallel for schedule(static)  // the x16 kernel's fallback for a row with a NaN / Inf
  for (int64_t o = 0; o < N; ++o) {
    const uint8_t* panel = w.panel(o / kRepackedRows);
    const int64_t lane = o % kRepackedRows;
    for (int64_t i = 0; i < m; ++i) {
      float acc = 0.0f;
      for (int64_t g = 0; g < w.groups(); ++g) {
        const auto [d, z] = group_of(w, panel, g, lane);
        for (int s = 0; s < S; ++s) {
          for (int e = 0; e < kRepackedBlock; ++e) {
            const float weight = static_cast<float>(code_of(panel, g * S + s, lane, e) - z) * d;
            acc += x[i * K + (g * S + s) * kRepackedBlock + e] * weight;
          }
        }
      }
      y[i * N + o] = acc + (bias != nullptr ? bias[o] : 0.0f);
    }
  }
}

#define QJOULE_INT4_REPACKED(BLOCK)                                                                                \
  template bool int4_scales_finite<BLOCK>(const quant::BlockMatrix<BLOCK>&);                                       \
  template RepackedInt4<BLOCK> repack_int4<BLOCK>(const quant::BlockMatrix<BLOCK>&);                               \
  template quant::BlockMatrix<BLOCK> unpack_int4_repacked<BLOCK>(const RepackedInt4<BLOCK>&);                      \
  template void gemm_int4_s8_repacked_ref<BLOCK>(const RepackedInt4<BLOCK>&, const float*, const float*, int64_t,  \
                                                 float*, std::string_view);                                        \
  template void gemm_int4_f32_repacked_ref<BLOCK>(const RepackedInt4<BLOCK>&, const float*, const float*, int64_t, \
                                                  float*);
QJOULE_INT4_REPACKED(quant::BlockInt4Sym<32>)
QJOULE_INT4_REPACKED(quant::BlockInt4Sym<64>)
QJOULE_INT4_REPACKED(quant::BlockInt4Sym<128>)
QJOULE_INT4_REPACKED(quant::BlockInt4Asym<32>)
QJOULE_INT4_REPACKED(quant::BlockInt4Asym<64>)
QJOULE_INT4_REPACKED(quant::BlockInt4Asym<128>)
#undef QJOULE_INT4_REPACKED

}  // namespace qjoule::kernels::detail
