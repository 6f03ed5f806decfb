// The repacked FP4 layout (fp4_repacked.h): packing, unpacking and the FP32 twin on it.
#include "kernels/cpu/weight_only/repacked/fp4_repacked.h"

#include <cstring>

#include "kernels/cpu/weight_only/fp4_scales.h"
#include "qjoule/quant/element_math.h"

namespace qjoule::kernels::detail {
namespace {

// Element k of the panel's row `lane`: where its code sits, and its block's scale byte.
template <class Packed>
struct Fp4Element {
  RepackedNibble at;
  int64_t scale_byte;  // offset in the panel
};
template <class Packed>
Fp4Element<Packed> element_at(const RepackedFp4<Packed>& r, int64_t lane, int64_t k) {
  using Block = typename RepackedFp4<Packed>::Block;
  const int64_t b = k / kRepackedBlock;
  const int e = static_cast<int>(k % kRepackedBlock);
  return {repacked_nibble_at(b, lane, e),
          r.scales_offset() + (b * RepackedFp4<Packed>::kScalesPerBlock32 + e / Block::kSize) * kRepackedRows + lane};
}

template <class Packed>
Packed empty_like(const RepackedFp4<Packed>& r) {
  Packed w;
  w.rows = r.rows;
  w.cols = r.cols;
  if constexpr (RepackedFp4<Packed>::kNv) w.tensor_scale = r.tensor_scale;
  return w;
}

}  // namespace

template <class Packed>
RepackedFp4<Packed> repack_fp4(const Packed& w) {
  using Block = typename RepackedFp4<Packed>::Block;
  RepackedFp4<Packed> r;
  r.rows = w.rows;
  r.cols = w.cols;
  r.tensor_scale = fp4_tensor_scale(w);
  r.data.assign(static_cast<std::size_t>(r.panels() * r.panel_stride()), 0);
  for_each_panel_row(r.data.data(), w.rows, r.panel_stride(), [&](uint8_t* panel, int64_t lane, int64_t o) {
    const Block* row = w.row(o);
    for (int64_t j = 0; j < w.blocks_per_row(); ++j) {
      for (int e = 0; e < Block::kSize; ++e) {
        const auto el = element_at(r, lane, j * Block::kSize + e);
        const int u = element::nibble_of_bytes(row[j].qs, e);
        put_repacked_code(panel, el.at, u);
        if (e == 0) panel[el.scale_byte] = fp4_scale_code(row[j]);
      }
    }
  });
  return r;
}

template <class Packed>
Packed unpack_fp4_repacked(const RepackedFp4<Packed>& r) {
  using Block = typename RepackedFp4<Packed>::Block;
  Packed w = empty_like(r);
  w.blocks.assign(static_cast<std::size_t>(w.rows * w.blocks_per_row()), Block{});
  for (int64_t o = 0; o < w.rows; ++o) {
    const uint8_t* panel = r.panel(o / kRepackedRows);
    const int64_t lane = o % kRepackedRows;
    Block* row = w.blocks.data() + o * w.blocks_per_row();
    for (int64_t j = 0; j < w.blocks_per_row(); ++j) {
      for (int e = 0; e < Block::kSize; e += 2) {
        const auto hi = element_at(r, lane, j * Block::kSize + e), lo = element_at(r, lane, j * Block::kSize + e + 1);
        row[j].qs[e / 2] = static_cast<uint8_t>(repacked_code(panel, hi.at) << 4 | repacked_code(panel, lo.at));
        if (e == 0) {
          if constexpr (RepackedFp4<Packed>::kNv) {
            row[j].scale_e4m3 = panel[hi.scale_byte];
          } else {
            row[j].scale_e8m0 = panel[hi.scale_byte];
          }
        }
      }
    }
  }
  return w;
}

template <class Packed>
void gemm_fp4_f32_repacked_ref(const RepackedFp4<Packed>& w, const float* bias, const float* x, int64_t m, float* y) {
  const int64_t N = w.rows, K = w.padded_cols();
  const float* table = fp4_scale_table(Packed{});
#pragma omp parallel for schedule(static)  // the x16 kernel's fallback for a row with a NaN / Inf
  for (int64_t o = 0; o < N; ++o) {
    const uint8_t* panel = w.panel(o / kRepackedRows);
    const int64_t lane = o % kRepackedRows;
    for (int64_t i = 0; i < m; ++i) {
      float acc = 0.0f;
      for (int64_t k = 0; k < w.cols; ++k) {
        const auto el = element_at(w, lane, k);
        const float weight = quant::kE2M1Table[static_cast<std::size_t>(repacked_code(panel, el.at))] *
                             (table[panel[el.scale_byte]] * w.tensor_scale);
        acc += x[i * K + k] * weight;
      }
      y[i * N + o] = acc + (bias != nullptr ? bias[o] : 0.0f);
    }
  }
}

#define QJOULE_FP4_REPACKED(PACKED)                                                                                \
  template RepackedFp4<PACKED> repack_fp4<PACKED>(const PACKED&);                                                  \
  template PACKED unpack_fp4_repacked<PACKED>(const RepackedFp4<PACKED>&);                                         \
  template void gemm_fp4_f32_repacked_ref<PACKED>(const RepackedFp4<PACKED>&, const float*, const float*, int64_t, \
                                                  float*);
QJOULE_FP4_REPACKED(quant::Mxfp4Matrix)
QJOULE_FP4_REPACKED(quant::Nvfp4Matrix)
#undef QJOULE_FP4_REPACKED

}  // namespace qjoule::kernels::detail
