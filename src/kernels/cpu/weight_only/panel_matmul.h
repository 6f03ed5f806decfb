// oneDNN matmuls of an activation matrix by a *panel* of weight rows that a kernel has just decoded into
// scratch (weight_only_bf16_panel.cpp): the prefill of the weight-only formats (weight_only_avx512.h) and
// of the dense BF16 Linear. BF16 panels run oneDNN's native BF16 matmul, FP32 panels its FP32 matmul;
// panel_kind() says which one pays on this CPU.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace qjoule::kernels::avx512 {

constexpr int64_t kGemvMaxRowsForPanels = 4;    // products of more rows than this go through the panels
constexpr int64_t kF32PanelBytes = 1024 << 10;  // FP32 panel per thread, at most (K = 3072 wants more than 256 KiB)

constexpr int64_t kPanelBytes = 256 << 10;  // BF16 panel of dequantized weight rows per thread, at most
// From this many rows on, an FP32-panel product whose whole weight fits in kWholePanelMaxBytes decodes W
// once into one panel and multiplies it on oneDNN's threaded FP32 matmul: no narrow panels whose outputs
// go through scratch, and the decode (N·K) is small beside the product (m·N·K).
constexpr int64_t kWholePanelMinRows = 256;
constexpr int64_t kWholePanelMaxBytes = int64_t{16} << 20;

// The BF16 panel product (weight_only_bf16_panel.cpp): y[:, n0 .. n0 + n) = a · panelᵀ + bias[n0 ..),
// a: [m, k] BF16, panel: [n, k] BF16 (row-major, i.e. oneDNN's "ba"), y with row stride ldy (a
// narrower panel goes through a dense scratch: oneDNN's implementation depends on the stride). A shape
// whose oneDNN implementation is not the one panel_kernel_path() names is padded (PanelPadding below);
// one that no padding brings there is an error, never a wrong label.
void bf16_panel_matmul(const uint16_t* a, int64_t m, int64_t k, const uint16_t* panel, int64_t n, const float* bias,
                       float* y, int64_t ldy);
// The same product in FP32: a [m, k] FP32, panel [n, k] FP32, on oneDNN's FP32 matmul.
void f32_panel_matmul(const float* a, int64_t m, int64_t k, const float* panel, int64_t n, const float* bias, float* y,
                      int64_t ldy);

// oneDNN 2.6 runs some small shapes on another implementation than the one it picks for the rest (on
// AMX its "small shapes to VNNI" rule: a BF16 product of at most 32 rows and at most 256 outputs per
// row block, or of depth 16 or less, runs on the AVX-512 BF16 kernel). Such a product is multiplied on
// zero-padded operands: a with zero rows up to kPanelPadRows, a and the panel with zero columns up to
// kPanelPadDepth. The padding adds zeros to y's real rows, nothing else.
struct PanelPadding {
  int64_t m, k;  // rows and depth of the product oneDNN runs
};
inline constexpr int64_t kPanelPadRows = 33;
inline constexpr int64_t kPanelPadDepth = 32;
// The first of (m, k), (max(m, kPanelPadRows), k), (m, max(k, kPanelPadDepth)) and both padded on which
// `runs_on_path(rows, depth)` holds, or nullopt.
std::optional<PanelPadding> panel_padding(int64_t m, int64_t k,
                                          const std::function<bool(int64_t, int64_t)>& runs_on_path);
// The panel products on a given padding (tests: the padded path on a CPU whose oneDNN needs none).
void bf16_panel_matmul_padded(const uint16_t* a, int64_t m, int64_t k, const uint16_t* panel, int64_t n,
                              const float* bias, float* y, int64_t ldy, PanelPadding pad);
void f32_panel_matmul_padded(const float* a, int64_t m, int64_t k, const float* panel, int64_t n, const float* bias,
                             float* y, int64_t ldy, PanelPadding pad);
// True where oneDNN has a native (non-reference) BF16 matmul and the CPU has AVX512_BF16: the
// avx512_bf16 level.
bool bf16_panel_available();
// Which panel the avx512_bf16 level's prefill multiplies, decided once per process: BF16 where oneDNN's
// BF16 matmul is at least kBf16PanelMinSpeedup times its FP32 matmul on this CPU (AMX, or BF16 dot
// products twice as wide as FP32 FMAs), timed once on a [256 x 1024] x [1024 x 256] product in the
// calling thread; FP32 otherwise (AVX512_BF16 without AMX: oneDNN's BF16 brgemm ran at 0.55x its FP32
// one on a Sapphire Rapids-class Xeon, and dequantizing to FP32 panels made nf4 / int4 / w8 prefill
// 1.5x faster). QJOULE_WEIGHT_ONLY_PANEL=bf16|f32 decides instead (tests, benchmarks).
enum class PanelKind { bf16, f32 };
inline constexpr double kBf16PanelMinSpeedup = 1.15;
PanelKind panel_kind();
// "bf16_panel+onednn:brg:avx512_core_bf16:bf16bf16f32" or "f32_panel+onednn:brg:avx512_core:f32".
const std::string& panel_kernel_path();
// "f32_panel+onednn:brg:avx512_core:f32": the FP32 panels whatever panel_kind() says (fp16's prefill,
// whose arithmetic is FP32 anyway).
const std::string& f32_panel_kernel_path();

// Rows per panel of an [N, K] weight: whole 16-row blocks, at most `max_elements` weights a panel, and as
// many panels as a multiple of the thread count (a balanced static split).
int64_t panel_rows_for(int64_t N, int64_t K, int64_t max_elements);

// y[m, N] = a[m, K] · Wᵀ + bias on FP32 panels: the output rows are split into panels of whole 16-row
// blocks within kF32PanelBytes, as many as a multiple of the thread count; each OpenMP thread has
// `fill(o_begin, o_end, panel)` write W's rows [o_begin, o_end) in FP32 into its own scratch (which stays
// in its L2) and multiplies them right away (f32_panel_matmul). From kWholePanelMinRows rows on, where W
// fits kWholePanelMaxBytes, the threads fill one whole panel (the calling thread's scratch, kept) and
// oneDNN's threaded matmul multiplies it.
void f32_panel_gemm(const float* a, int64_t m, int64_t N, int64_t K, const float* bias, float* y,
                    const std::function<void(int64_t, int64_t, float*)>& fill);
// Frees the panels and buffers kept from one product to the next (each OpenMP thread's FP32 and BF16 panels,
// dense output, oneDNN scratchpad and padded operands, and the calling thread's whole panel of up to
// 16 MiB), so that a benchmark run does not start holding the previous run's (qjoule bench calls it
// before each run's peak memory is reset).
void release_panel_scratch();
// Whether a product multiplies one whole panel: m >= kWholePanelMinRows, and W within kWholePanelMaxBytes
// at `element_bytes` a weight (4: f32_panel_gemm's FP32 panel; 2: a BF16 panel, bf16_whole_panel_gemm).
constexpr bool whole_panel_applies(int64_t m, int64_t N, int64_t K, int64_t element_bytes = sizeof(float)) {
  return m >= kWholePanelMinRows && N * K * element_bytes <= kWholePanelMaxBytes;
}
// The whole-panel product itself: the threads fill W's rows in 16-row blocks into the calling thread's
// scratch (kept), then oneDNN's threaded FP32 matmul multiplies it.
void f32_whole_panel_gemm(const float* a, int64_t m, int64_t N, int64_t K, const float* bias, float* y,
                          const std::function<void(int64_t, int64_t, float*)>& fill);
// The same on BF16 panels (kPanelBytes), a: [m, K] BF16, and from kWholePanelMinRows rows on, where W fits
// kWholePanelMaxBytes in BF16, one whole panel (bf16_whole_panel_gemm).
void bf16_panel_gemm(const uint16_t* a, int64_t m, int64_t N, int64_t K, const float* bias, float* y,
                     const std::function<void(int64_t, int64_t, uint16_t*)>& fill);
// The same for BF16 panels (where panel_kind() is bf16: AMX), where whole_panel_applies(m, N, K, 2): the
// threads fill one whole BF16 panel and oneDNN's threaded BF16 matmul multiplies it, instead of each
// thread multiplying a narrow panel of N / threads rows (16 rows of a 256-wide layer on 16 threads)
// whose output goes through scratch.
void bf16_whole_panel_gemm(const uint16_t* a, int64_t m, int64_t N, int64_t K, const float* bias, float* y,
                           const std::function<void(int64_t, int64_t, uint16_t*)>& fill);

}  // namespace qjoule::kernels::avx512
