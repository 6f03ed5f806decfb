// The repacked NF4 layout (nf4_repacked.h): packing, unpacking and the FP32 twin on it.
#include "kernels/cpu/weight_only/repacked/nf4_repacked.h"

#include <cmath>
#include <cstring>

#include "qjoule/quant/element_math.h"

namespace qjoule::kernels::detail {
namespace {

constexpr int64_t kBlock = quant::kNf4BlockSize;

float absmax_at(const RepackedNf4& r, const uint8_t* panel, int64_t g, int64_t lane) {
  float a = 0.0f;
  std::memcpy(&a, panel + r.absmax_offset() + (g * kRepackedRows + lane) * 4, sizeof(a));
  return a;
}

// Element e (0..63) of 64-block g: its 32-block and its place in it.
RepackedNibble nibble_of(int64_t g, int64_t lane, int e) {
  return repacked_nibble_at(2 * g + e / kRepackedBlock, lane, e % kRepackedBlock);
}

}  // namespace

bool nf4_absmax_finite(const quant::Nf4Matrix& w) {
  for (const quant::BlockNf4& block : w.blocks) {
    if (!std::isfinite(block.absmax)) return false;
  }
  return true;
}

RepackedNf4 repack_nf4(const quant::Nf4Matrix& w) {
  RepackedNf4 r;
  r.rows = w.rows;
  r.cols = w.cols;
  r.data.assign(static_cast<std::size_t>(r.panels() * r.panel_stride()), 0);
  for_each_panel_row(r.data.data(), w.rows, r.panel_stride(), [&](uint8_t* panel, int64_t lane, int64_t o) {
    const quant::BlockNf4* row = w.row(o);
    for (int64_t g = 0; g < r.blocks64(); ++g) {
      std::memcpy(panel + r.absmax_offset() + (g * kRepackedRows + lane) * 4, &row[g].absmax, sizeof(float));
      for (int e = 0; e < kBlock; ++e)
        put_repacked_code(panel, nibble_of(g, lane, e), element::nibble_of_bytes(row[g].qs, e));
    }
  });
  return r;
}

quant::Nf4Matrix unpack_nf4_repacked(const RepackedNf4& r) {
  quant::Nf4Matrix w;
  w.rows = r.rows;
  w.cols = r.cols;
  w.blocks.assign(static_cast<std::size_t>(r.rows * r.blocks64()), quant::BlockNf4{});
  for (int64_t o = 0; o < r.rows; ++o) {
    const uint8_t* panel = r.panel(o / kRepackedRows);
    const int64_t lane = o % kRepackedRows;
    quant::BlockNf4* row = w.blocks.data() + o * r.blocks64();
    for (int64_t g = 0; g < r.blocks64(); ++g) {
      row[g].absmax = absmax_at(r, panel, g, lane);
      for (int e = 0; e < kBlock; e += 2) {
        row[g].qs[e / 2] = static_cast<uint8_t>(repacked_code(panel, nibble_of(g, lane, e)) << 4 |
                                                repacked_code(panel, nibble_of(g, lane, e + 1)));
      }
    }
  }
  return w;
}

void gemm_nf4_f32_repacked_ref(const RepackedNf4& w, const float* bias, const float* x, int64_t m, float* y) {
  const int64_t N = w.rows, K = w.padded_cols();
#pragma omp parallel for schedule(static)  // the x16 kernel's fallback for a row with a NaN / Inf
  for (int64_t o = 0; o < N; ++o) {
    const uint8_t* panel = w.panel(o / kRepackedRows);
    const int64_t lane = o % kRepackedRows;
    for (int64_t i = 0; i < m; ++i) {
      float acc = 0.0f;
      for (int64_t k = 0; k < w.cols; ++k) {
        const int64_t g = k / kBlock;
        const int code = repacked_code(panel, nibble_of(g, lane, static_cast<int>(k % kBlock)));
        acc += x[i * K + k] * (quant::kNf4Table[static_cast<std::size_t>(code)] * absmax_at(w, panel, g, lane));
      }
      y[i * N + o] = acc + (bias != nullptr ? bias[o] : 0.0f);
    }
  }
}

}  // namespace qjoule::kernels::detail
