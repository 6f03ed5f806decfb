// The prefill product of the AVX-512 BF16 weight-only kernels: BF16 activations times a panel of weight
// rows dequantized to BF16, on oneDNN's native BF16 matmul, or FP32 activations times an FP32 panel on
// its FP32 matmul, whichever panel_kind() chose for this CPU (weight_only_avx512.h). One primitive per
// (m, k, n, bias, type) shape, created on first use and cached process-wide.
//
// Each OpenMP thread runs its own panels (run_gemm's parallel loop calls this from inside it): oneDNN
// then runs single-threaded in the calling thread (it does inside an OpenMP parallel region), on a
// stream and a scratchpad of the thread's own (user scratchpad mode: concurrent executions of one
// primitive share nothing).
//
// The product is always written densely ([m, n], row stride n): oneDNN 2.6 runs a dense destination on
// its brgemm kernel but a strided one (a column slice of y) on gemm:jit (measured, every shape tried),
// and the kernel path names one implementation. A panel narrower than y is written to scratch and
// copied into its columns. oneDNN also sends some small shapes elsewhere (on AMX, a BF16 product of few
// rows times a narrow panel, or of a short depth, runs on its AVX-512 BF16 kernel: seen on an H100
// host's Xeon with a 6 x 32 x 16 product): such a product is computed on zero-padded operands
// (panel_padding) whose shape runs on the implementation the path names; a shape that no padding
// brings there is an error, never a wrong label.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/linear_bf16_kernels.h"
#include "kernels/cpu/onednn_engine.h"
#include "kernels/cpu/weight_only/panel_matmul.h"
#include "kernels/cpu/parallel_errors.h"
#include "qjoule/error.h"
#include "qjoule/kernels/kernel_overrides.h"

namespace qjoule::kernels::avx512 {
namespace {

using dnnl::memory;

struct Entry {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  PanelPadding pad;  // the shape the primitive multiplies (the real one, or padded)
};

dnnl::matmul::primitive_desc make_pd(int64_t m, int64_t k, int64_t n, bool with_bias,
                                     memory::data_type type = memory::data_type::bf16) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const memory::desc src_md({m, k}, type, memory::format_tag::ab);
  const memory::desc wei_md({k, n}, type, memory::dims{1, k});  // panel [n, k] seen as [k, n]
  const memory::desc dst_md({m, n}, memory::data_type::f32, memory::format_tag::ab);
  if (with_bias) {
    const memory::desc bias_md({1, n}, memory::data_type::f32, memory::format_tag::ab);
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_md, bias_md, dst_md), attr, onednn_cpu_engine());
  }
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_md, dst_md), attr, onednn_cpu_engine());
}

std::string path_of(const dnnl::matmul::primitive_desc& pd, memory::data_type type = memory::data_type::bf16) {
  return onednn_kernel_path(pd) + (type == memory::data_type::bf16 ? ":bf16bf16f32" : ":f32");
}

// The implementation every panel product of `type` must run on (its name is in the layers' kernel path).
const std::string& expected_path(memory::data_type type) {
  static const std::string bf16 = bf16_panel_available() ? path_of(make_pd(64, 256, 64, true)) : std::string();
  static const std::string f32 = path_of(make_pd(64, 256, 64, true, memory::data_type::f32), memory::data_type::f32);
  return type == memory::data_type::bf16 ? bf16 : f32;
}

const Entry& entry_for(int64_t m, int64_t k, int64_t n, bool with_bias,
                       memory::data_type type = memory::data_type::bf16) {
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, int64_t, bool, int>, Entry> cache;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(m, k, n, with_bias, static_cast<int>(type));
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  std::string chosen;  // oneDNN's choice for the real shape, for the error
  std::optional<dnnl::matmul::primitive_desc> found;
  const auto pad = panel_padding(m, k, [&](int64_t pm, int64_t pk) {
    auto pd = make_pd(pm, pk, n, with_bias, type);
    const std::string path = path_of(pd, type);
    if (chosen.empty()) chosen = path;
    if (path != expected_path(type)) return false;
    found = std::move(pd);
    return true;
  });
  if (!pad) {
    fail(
        "{} panel product of {} x {} x {}: oneDNN chose {}, not the {} that the layer's kernel path names (also "
        "with {} zero rows and depth {})",
        type == memory::data_type::bf16 ? "BF16" : "FP32", m, k, n, chosen, expected_path(type),
        std::max(m, kPanelPadRows), std::max(k, kPanelPadDepth));
  }
  return cache.emplace(key, Entry{*found, dnnl::matmul(*found), *pad}).first->second;
}

// Each thread's buffers for panel_matmul (a narrow panel's dense output, oneDNN's scratchpad, padded
// operands), kept from one product to the next; release_panel_scratch() frees them.
thread_local std::vector<float> t_dense;
thread_local std::vector<uint8_t> t_scratchpad, t_padded_a, t_padded_panel;

void panel_matmul(const void* a, int64_t m, int64_t k, const void* panel, int64_t n, const float* bias, float* y,
                  int64_t ldy, memory::data_type type, std::optional<PanelPadding> forced = std::nullopt) {
  const Entry* e = nullptr;
  std::optional<Entry> own;  // a forced padding (tests): its own primitive, not cached
  if (forced) {
    auto pd = make_pd(forced->m, forced->k, n, bias != nullptr, type);
    own.emplace(Entry{pd, dnnl::matmul(pd), *forced});
    e = &*own;
  } else {
    e = &entry_for(m, k, n, bias != nullptr, type);
  }
  const int64_t pm = e->pad.m, pk = e->pad.k;
  const size_t elem = type == memory::data_type::bf16 ? sizeof(uint16_t) : sizeof(float);
  const dnnl::engine& engine = onednn_cpu_engine();
  thread_local dnnl::stream stream(engine);
  const memory::desc scratch_md = e->pd.scratchpad_desc();
  if (t_scratchpad.size() < scratch_md.get_size()) t_scratchpad.resize(scratch_md.get_size());
  // Zero rows below a's m, zero columns right of a's and the panel's k: they add nothing to y's m rows.
  const auto pad_rows = [elem](const void* src, int64_t rows, int64_t cols, int64_t to_rows, int64_t to_cols,
                               std::vector<uint8_t>& out) {
    out.assign(static_cast<size_t>(to_rows * to_cols) * elem, 0);
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(out.data() + static_cast<size_t>(i * to_cols) * elem,
                  static_cast<const uint8_t*>(src) + static_cast<size_t>(i * cols) * elem,
                  static_cast<size_t>(cols) * elem);
    return static_cast<void*>(out.data());
  };
  const void* src = (pm == m && pk == k) ? a : pad_rows(a, m, k, pm, pk, t_padded_a);
  const void* weights = pk == k ? panel : pad_rows(panel, n, k, n, pk, t_padded_panel);
  float* out = y;
  if (ldy != n || pm != m) {
    t_dense.resize(static_cast<size_t>(pm * n));
    out = t_dense.data();
  }
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(e->pd.src_desc(), engine, const_cast<void*>(src))},
      {DNNL_ARG_WEIGHTS, memory(e->pd.weights_desc(), engine, const_cast<void*>(weights))},
      {DNNL_ARG_DST, memory(e->pd.dst_desc(), engine, out)},
      {DNNL_ARG_SCRATCHPAD, memory(scratch_md, engine, t_scratchpad.data())}};
  if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, memory(e->pd.bias_desc(), engine, const_cast<float*>(bias)));
  e->prim.execute(stream, args);
  stream.wait();
  if (out != y) {
#pragma omp parallel for schedule(static) if (m * n >= (int64_t{1} << 15))
    for (int64_t i = 0; i < m; ++i) std::memcpy(y + i * ldy, out + i * n, sizeof(float) * static_cast<size_t>(n));
  }
}

}  // namespace

void bf16_panel_matmul(const uint16_t* a, int64_t m, int64_t k, const uint16_t* panel, int64_t n, const float* bias,
                       float* y, int64_t ldy) {
  panel_matmul(a, m, k, panel, n, bias, y, ldy, memory::data_type::bf16);
}

void f32_panel_matmul(const float* a, int64_t m, int64_t k, const float* panel, int64_t n, const float* bias, float* y,
                      int64_t ldy) {
  panel_matmul(a, m, k, panel, n, bias, y, ldy, memory::data_type::f32);
}

void bf16_panel_matmul_padded(const uint16_t* a, int64_t m, int64_t k, const uint16_t* panel, int64_t n,
                              const float* bias, float* y, int64_t ldy, PanelPadding pad) {
  panel_matmul(a, m, k, panel, n, bias, y, ldy, memory::data_type::bf16, pad);
}

void f32_panel_matmul_padded(const float* a, int64_t m, int64_t k, const float* panel, int64_t n, const float* bias,
                             float* y, int64_t ldy, PanelPadding pad) {
  panel_matmul(a, m, k, panel, n, bias, y, ldy, memory::data_type::f32, pad);
}

std::optional<PanelPadding> panel_padding(int64_t m, int64_t k,
                                          const std::function<bool(int64_t, int64_t)>& runs_on_path) {
  const int64_t pm = std::max(m, kPanelPadRows), pk = std::max(k, kPanelPadDepth);
  const PanelPadding candidates[] = {{m, k}, {pm, k}, {m, pk}, {pm, pk}};
  for (size_t i = 0; i < std::size(candidates); ++i) {
    const PanelPadding c = candidates[i];
    const bool tried =
        std::any_of(candidates, candidates + i, [c](PanelPadding t) { return t.m == c.m && t.k == c.k; });
    if (!tried && runs_on_path(c.m, c.k)) return c;
  }
  return std::nullopt;
}

namespace {

// Seconds per product of the [256 x 1024] x [1024 x 256] panel product in BF16 and in FP32, best of 4
// each, the two types taking turns (a spell of noise on a shared host then slows both, not one).
struct PanelTimes {
  double bf16 = 1e30, f32 = 1e30;
};
PanelTimes seconds_per_product() {
  constexpr int64_t m = 256, k = 1024, n = 256;
  std::vector<uint16_t> a16(m * k, 0x3F80), p16(n * k, 0x3F80);  // 1.0 in BF16
  std::vector<float> a32(m * k, 1.0f), p32(n * k, 1.0f), y(m * n);
  const auto seconds = [&](memory::data_type type) {
    const auto start = std::chrono::steady_clock::now();
    if (type == memory::data_type::bf16)
      panel_matmul(a16.data(), m, k, p16.data(), n, nullptr, y.data(), n, type);
    else
      panel_matmul(a32.data(), m, k, p32.data(), n, nullptr, y.data(), n, type);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  seconds(memory::data_type::bf16);  // the first of each creates its primitive
  seconds(memory::data_type::f32);
  PanelTimes best;
  for (int rep = 0; rep < 4; ++rep) {
    best.bf16 = std::min(best.bf16, seconds(memory::data_type::bf16));
    best.f32 = std::min(best.f32, seconds(memory::data_type::f32));
  }
  return best;
}

}  // namespace

PanelKind panel_kind() {
  static const PanelKind kind = [] {
    if (const auto forced = kernel_override(KernelOverride::weight_only_panel))
      return *forced == "bf16" ? PanelKind::bf16 : PanelKind::f32;
    if (!bf16_panel_available()) return PanelKind::f32;
    const PanelTimes t = seconds_per_product();
    return t.f32 >= kBf16PanelMinSpeedup * t.bf16 ? PanelKind::bf16 : PanelKind::f32;
  }();
  return kind;
}

const std::string& panel_kernel_path() {
  static const std::string path = panel_kind() == PanelKind::bf16
                                      ? "bf16_panel+" + expected_path(memory::data_type::bf16)
                                      : "f32_panel+" + expected_path(memory::data_type::f32);
  return path;
}

int64_t panel_rows_for(int64_t N, int64_t K, int64_t max_elements) {
  const int64_t threads = std::max(1, omp_get_max_threads());
  const int64_t blocks = (N + 15) / 16;
  const int64_t max_blocks = std::max<int64_t>(1, max_elements / K / 16);
  int64_t panels = (blocks + max_blocks - 1) / max_blocks;
  panels = std::min(blocks, (panels + threads - 1) / threads * threads);
  return (blocks + panels - 1) / panels * 16;
}

namespace {
// Each thread's FP32 panel, and the calling thread's whole panel (up to kWholePanelMaxBytes: filled by
// every thread, then multiplied), kept from one product to the next; release_panel_scratch() frees them.
thread_local std::vector<float> t_panel;
thread_local std::vector<uint16_t> t_panel_bf16;
thread_local std::vector<float> t_whole;
thread_local std::vector<uint16_t> t_whole_bf16;
}  // namespace

void release_panel_scratch() {
  const auto release = [] {
    // Move-assigned from empty vectors: `v = {}` would clear them and keep their memory.
    t_panel = std::vector<float>();
    t_panel_bf16 = std::vector<uint16_t>();
    t_dense = std::vector<float>();
    t_scratchpad = std::vector<uint8_t>();
    t_padded_a = std::vector<uint8_t>();
    t_padded_panel = std::vector<uint8_t>();
  };
  t_whole = std::vector<float>();
  t_whole_bf16 = std::vector<uint16_t>();
  release();  // the calling thread's (its whole-panel products run oneDNN from here)
#pragma omp parallel
  release();
}

namespace {
// The panels of either type: whole 16-row blocks within `max_elements` weights, as many as a multiple of the thread
// count (a balanced static split); each thread fills its panels into its own scratch (`panel`, the thread's
// vector), which stays in its L2, and `matmul` multiplies them right away: no barrier between the two steps.
template <class T, class Matmul>
void split_panel_gemm(std::vector<T>& (*panel)(), const T* a, int64_t m, int64_t N, int64_t K, const float* bias,
                      float* y, int64_t max_elements, const std::function<void(int64_t, int64_t, T*)>& fill,
                      Matmul matmul) {
  const int64_t panel_rows = panel_rows_for(N, K, max_elements);
  const int64_t panel_count = (N + panel_rows - 1) / panel_rows;
  ParallelErrors errors;  // a panel product oneDNN cannot run as the path names throws: after the region
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < panel_count; ++p) {
    errors.run([&] {
      const int64_t n0 = p * panel_rows, n = std::min(panel_rows, N - n0);
      std::vector<T>& own = panel();
      if (own.size() < static_cast<std::size_t>(panel_rows * K)) own.resize(static_cast<std::size_t>(panel_rows * K));
      fill(n0, n0 + n, own.data());
      matmul(a, m, K, own.data(), n, bias != nullptr ? bias + n0 : nullptr, y + n0, N);
    });
  }
  errors.rethrow();
}
std::vector<float>& f32_panel_of_thread() { return t_panel; }
std::vector<uint16_t>& bf16_panel_of_thread() { return t_panel_bf16; }
}  // namespace

void f32_panel_gemm(const float* a, int64_t m, int64_t N, int64_t K, const float* bias, float* y,
                    const std::function<void(int64_t, int64_t, float*)>& fill) {
  if (whole_panel_applies(m, N, K)) return f32_whole_panel_gemm(a, m, N, K, bias, y, fill);
  split_panel_gemm(f32_panel_of_thread, a, m, N, K, bias, y, kF32PanelBytes / int64_t{sizeof(float)}, fill,
                   f32_panel_matmul);
}

void bf16_panel_gemm(const uint16_t* a, int64_t m, int64_t N, int64_t K, const float* bias, float* y,
                     const std::function<void(int64_t, int64_t, uint16_t*)>& fill) {
  if (whole_panel_applies(m, N, K, sizeof(uint16_t))) return bf16_whole_panel_gemm(a, m, N, K, bias, y, fill);
  split_panel_gemm(bf16_panel_of_thread, a, m, N, K, bias, y, kPanelBytes / int64_t{sizeof(uint16_t)}, fill,
                   bf16_panel_matmul);
}

namespace {
// The whole-panel product of either type: the threads fill W's rows in 16-row blocks into `whole` (the
// calling thread's, kept), then `matmul` runs outside a parallel region, on oneDNN's threads.
template <class T, class Matmul>
void whole_panel_gemm(std::vector<T>& whole, const T* a, int64_t m, int64_t N, int64_t K, const float* bias, float* y,
                      const std::function<void(int64_t, int64_t, T*)>& fill, Matmul matmul) {
  if (whole.size() < static_cast<std::size_t>(N * K)) whole.resize(static_cast<std::size_t>(N * K));
  const int64_t blocks = (N + 15) / 16;
  T* w = whole.data();
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) fill(b * 16, std::min(N, b * 16 + 16), w + b * 16 * K);
  matmul(a, m, K, w, N, bias, y, N);
}
}  // namespace

void f32_whole_panel_gemm(const float* a, int64_t m, int64_t N, int64_t K, const float* bias, float* y,
                          const std::function<void(int64_t, int64_t, float*)>& fill) {
  whole_panel_gemm(t_whole, a, m, N, K, bias, y, fill, f32_panel_matmul);
}

void bf16_whole_panel_gemm(const uint16_t* a, int64_t m, int64_t N, int64_t K, const float* bias, float* y,
                           const std::function<void(int64_t, int64_t, uint16_t*)>& fill) {
  whole_panel_gemm(t_whole_bf16, a, m, N, K, bias, y, fill, bf16_panel_matmul);
}

const std::string& f32_panel_kernel_path() {
  static const std::string path = "f32_panel+" + expected_path(memory::data_type::f32);
  return path;
}

bool bf16_panel_available() {
  static const bool available = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") != 0 && __builtin_cpu_supports("avx512bw") != 0 &&
           __builtin_cpu_supports("avx512vl") != 0 && __builtin_cpu_supports("avx512dq") != 0 &&
           onednn_has_native_bf16_matmul();
  }();
  return available;
}

}  // namespace qjoule::kernels::avx512
