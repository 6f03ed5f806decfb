// AWQ (Lin et al., 2023), activation-aware weight quantization, on qjoule's own int4 blocks
// (formats.h, "int4"): the two searches AWQ makes per layer, each minimising the layer's output error
// on calibration inputs, written from Σ x xᵀ (H, its lower triangle, as quant/gptq.h sums it):
// the error of weights V standing for W is tr((W − V) H (W − V)ᵀ), exactly what the outputs on those
// inputs lose (summed over tokens), so no activations need keeping.
//
// - Scales: the Linears reading the same input (Q, K, V; gate, up; or one alone) share per-input-channel
//   scales s = mean|x|^α (clamped to 1e-4, divided by √(max s · min s)), α on a grid i / grid,
//   i = 0 .. grid − 1; each Linear is quantized as W · diag(s) and its error measured as
//   Q(W · diag(s)) · diag(1/s) against W (on up to search_rows rows of it); the α of the least summed
//   error wins (α = 0 is s = 1, plain round-to-nearest, so the chosen scales never do worse than it on
//   the rows measured). The caller folds
//   1/s into what makes the input (the norm before Q, K, V; V's rows before O; up's rows before down).
// - Clipping: each group of G weights of a row clipped to ± max|w| · (1 − i / grid),
//   i = 0 .. max_shrink · grid, the one of least error on that group's inputs (H's diagonal block) kept;
//   then a row keeps its clipping only where its whole error (all of H) is below round-to-nearest's.
//
// The codes are then round-to-nearest's of the scaled, clipped weights (quantize_matrix_int4), so every
// int4 kernel, export and the GPU path run them unchanged. Linear algebra from OpenBLAS (ssymm, sgemm).
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "qjoule/quant/formats.h"

namespace qjoule::quant {

struct AwqOptions {
  int grid = 20;            // α = i / grid for the scales; clipping ratios 1 − i / grid
  double max_shrink = 0.5;  // clipping down to (1 − max_shrink) · max|w| at most
  // The scales' error is measured on at most this many rows of each Linear, evenly strided (the error
  // is a sum over rows; a 1.1B model's gate and up have 5,632 rows each, and the search costs
  // rows · cols² a point of the grid: down's 5,632 columns made it a third of AWQ's time at 512 rows);
  // the chosen scales then apply to every row.
  int64_t search_rows = 256;
};

// Round-to-nearest's round trip for Block (BlockInt4Sym<G> / BlockInt4Asym<G>): every row of
// w [rows, cols] quantized by the reference quantizer and decoded into out [rows, cols].
template <class Block>
void int4_round_trip(const float* w, int64_t rows, int64_t cols, float* out, std::string_view tensor);

// tr((W − V) H (W − V)ᵀ) for w, v [rows, cols] row-major and H [cols, cols] (lower triangle read).
double output_error(const float* w, const float* v, int64_t rows, int64_t cols, const std::vector<float>& H);

// A Linear of a scale group: its weights [rows, cols] and the round trip of its own format.
struct AwqMember {
  const float* w = nullptr;
  int64_t rows = 0;
  std::function<void(const float* w, int64_t rows, int64_t cols, float* out)> round_trip;
  // Its own Σ x xᵀ [cols, cols] where the members read the same input on different tokens (a mixture's
  // experts, each on the tokens routed to it); nullptr: the group's H.
  const std::vector<float>* H = nullptr;
};

struct AwqScales {
  std::vector<float> scales;  // [cols]: multiply the Linears' columns, divide their input
  double alpha = 0.0;
  double error = 0.0;      // the summed output error with these scales
  double rtn_error = 0.0;  // ... with none (α = 0)
};

// The scales of the group `members` (each [rows_i, cols]) from mean_abs [cols] (mean |x| of each input
// channel over the calibration tokens) and H [cols, cols] (or each member's own).
AwqScales search_awq_scales(const std::vector<AwqMember>& members, int64_t cols, const std::vector<float>& mean_abs,
                            const std::vector<float>& H, const AwqOptions& options = {});

// Clips w [rows, cols] in place, group by group of Block::kSize columns (the last may be partial), to the
// ratio of least output error; `tensor` names it in errors.
template <class Block>
void clip_awq(float* w, int64_t rows, int64_t cols, const std::vector<float>& H, const AwqOptions& options,
              std::string_view tensor);

}  // namespace qjoule::quant
