// The repacked NF4 layout (nf4_repacked.h), plain and nf4:dq: packing, unpacking and the FP32 twin on it.
#include "kernels/cpu/weight_only/repacked/nf4_repacked.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "qjoule/quant/element_math.h"

namespace qjoule::kernels::detail {
namespace {

constexpr int64_t kBlock = quant::kNf4BlockSize;

// Element e (0..63) of 64-block g: its 32-block and its place in it.
RepackedNibble nibble_of(int64_t g, int64_t lane, int e) {
  return repacked_nibble_at(2 * g + e / kRepackedBlock, lane, e % kRepackedBlock);
}

// The panels of w's rows with their codes in place; put_absmax(panel, lane, row, g) writes a block's absmax.
template <class Matrix, class PutAbsmax>
void repack_codes(const Matrix& w, RepackedNf4& r, const PutAbsmax& put_absmax) {
  for_each_panel_row(r.data.data(), w.rows, r.panel_stride(), [&](uint8_t* panel, int64_t lane, int64_t o) {
    const auto* row = w.row(o);
    for (int64_t g = 0; g < r.blocks64(); ++g) {
      put_absmax(panel, lane, row[g], g);
      for (int e = 0; e < kBlock; ++e)
        put_repacked_code(panel, nibble_of(g, lane, e), element::nibble_of_bytes(row[g].qs, e));
    }
  });
}

// Row o's blocks of w (its codes, in formats.h's order) from the panels; put_absmax(block, panel, lane, g) sets
// the block's absmax.
template <class Block, class PutAbsmax>
void unpack_codes(const RepackedNf4& r, int64_t o, Block* row, const PutAbsmax& put_absmax) {
  const uint8_t* panel = r.panel(o / kRepackedRows);
  const int64_t lane = o % kRepackedRows;
  for (int64_t g = 0; g < r.blocks64(); ++g) {
    put_absmax(row[g], panel, lane, g);
    for (int e = 0; e < kBlock; e += 2) {
      row[g].qs[e / 2] = static_cast<uint8_t>(repacked_code(panel, nibble_of(g, lane, e)) << 4 |
                                              repacked_code(panel, nibble_of(g, lane, e + 1)));
    }
  }
}

}  // namespace

float RepackedNf4::absmax_of(int64_t p, int64_t lane, int64_t g) const {
  const uint8_t* at = panel(p) + absmax_offset();
  if (double_quant) {
    const int64_t b = (p * kRepackedRows + lane) * blocks64() + g;
    return element::nf4_dq_absmax(quant::dynamic_map_signed()[at[g * kRepackedRows + lane]],
                                  absmax_scales[static_cast<std::size_t>(b / quant::kNf4DoubleQuantGroup)],
                                  absmax_mean);
  }
  float a = 0.0f;
  std::memcpy(&a, at + (g * kRepackedRows + lane) * 4, sizeof(a));
  return a;
}

bool nf4_absmax_finite(const quant::Nf4Matrix& w) {
  for (const quant::BlockNf4& block : w.blocks) {
    if (!std::isfinite(block.absmax)) return false;
  }
  return true;
}

bool nf4dq_repackable(const quant::Nf4DqMatrix& w) {
  const int64_t panels = (w.rows + kRepackedRows - 1) / kRepackedRows;
  if (panels * kRepackedRows * w.blocks_per_row() > std::numeric_limits<int32_t>::max()) return false;
  for (int64_t b = 0; b < static_cast<int64_t>(w.blocks.size()); ++b) {
    if (!std::isfinite(w.absmax(b))) return false;
  }
  return true;
}

RepackedNf4 repack_nf4(const quant::Nf4Matrix& w) {
  RepackedNf4 r;
  r.rows = w.rows;
  r.cols = w.cols;
  r.data.assign(static_cast<std::size_t>(r.panels() * r.panel_stride()), 0);
  repack_codes(w, r, [&](uint8_t* panel, int64_t lane, const quant::BlockNf4& block, int64_t g) {
    std::memcpy(panel + r.absmax_offset() + (g * kRepackedRows + lane) * 4, &block.absmax, sizeof(float));
  });
  return r;
}

RepackedNf4 repack_nf4(const quant::Nf4DqMatrix& w) {
  RepackedNf4 r;
  r.rows = w.rows;
  r.cols = w.cols;
  r.double_quant = true;
  r.absmax_scales = w.absmax_scales;
  r.absmax_mean = w.absmax_mean;
  r.data.assign(static_cast<std::size_t>(r.panels() * r.panel_stride()), 0);
  for (int64_t p = 0; p < r.panels(); ++p)  // the padding rows' absmax: the map's 0
    std::memset(r.data.data() + p * r.panel_stride() + r.absmax_offset(), quant::kDynamicMapZeroCode,
                static_cast<std::size_t>(r.absmax_bytes()));
  repack_codes(w, r, [&](uint8_t* panel, int64_t lane, const quant::BlockNf4Dq& block, int64_t g) {
    panel[r.absmax_offset() + g * kRepackedRows + lane] = block.absmax_code;
  });
  return r;
}

quant::Nf4Matrix unpack_nf4_repacked(const RepackedNf4& r) {
  quant::Nf4Matrix w;
  w.rows = r.rows;
  w.cols = r.cols;
  w.blocks.assign(static_cast<std::size_t>(r.rows * r.blocks64()), quant::BlockNf4{});
  for (int64_t o = 0; o < r.rows; ++o) {
    unpack_codes(r, o, w.blocks.data() + o * r.blocks64(),
                 [&](quant::BlockNf4& block, const uint8_t*, int64_t lane, int64_t g) {
                   block.absmax = r.absmax_of(o / kRepackedRows, lane, g);
                 });
  }
  return w;
}

quant::Nf4DqMatrix unpack_nf4dq_repacked(const RepackedNf4& r) {
  quant::Nf4DqMatrix w;
  w.rows = r.rows;
  w.cols = r.cols;
  w.absmax_scales = r.absmax_scales;
  w.absmax_mean = r.absmax_mean;
  w.blocks.assign(static_cast<std::size_t>(r.rows * r.blocks64()), quant::BlockNf4Dq{});
  for (int64_t o = 0; o < r.rows; ++o) {
    unpack_codes(r, o, w.blocks.data() + o * r.blocks64(),
                 [&](quant::BlockNf4Dq& block, const uint8_t* panel, int64_t lane, int64_t g) {
                   block.absmax_code = r.absmax_codes(panel, g)[lane];
                 });
  }
  return w;
}

void gemm_nf4_f32_repacked_ref(const RepackedNf4& w, const float* bias, const float* x, int64_t m, float* y) {
  const int64_t N = w.rows, K = w.padded_cols();
#pragma omp parallel for schedule(static)  // the x16 kernel's fallback for a row with a NaN / Inf
  for (int64_t o = 0; o < N; ++o) {
    const int64_t p = o / kRepackedRows, lane = o % kRepackedRows;
    const uint8_t* panel = w.panel(p);
    for (int64_t i = 0; i < m; ++i) {
      float acc = 0.0f;
      for (int64_t k = 0; k < w.cols; ++k) {
        const int64_t g = k / kBlock;
        const int code = repacked_code(panel, nibble_of(g, lane, static_cast<int>(k % kBlock)));
        acc += x[i * K + k] * (quant::kNf4Table[static_cast<std::size_t>(code)] * w.absmax_of(p, lane, g));
      }
      y[i * N + o] = acc + (bias != nullptr ? bias[o] : 0.0f);
    }
  }
}

}  // namespace qjoule::kernels::detail
