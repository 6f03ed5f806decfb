// The prefill product of the AVX-512 BF16 weight-only kernels: BF16 activations times a panel of weight
// rows dequantized to BF16, on oneDNN's native BF16 matmul (weight_only_avx512.h). One primitive per
// (m, k, n, bias) shape, created on first use and cached process-wide.
//
// Each OpenMP thread runs its own panels (run_gemm's parallel loop calls this from inside it): oneDNN
// then runs single-threaded in the calling thread (it does inside an OpenMP parallel region), on a
// stream and a scratchpad of the thread's own (user scratchpad mode: concurrent executions of one
// primitive share nothing).
//
// The product is always written densely ([m, n], row stride n): oneDNN 2.6 runs a dense destination on
// its brgemm kernel but a strided one (a column slice of y) on gemm:jit (measured, every shape tried),
// and the kernel path names one implementation. A panel narrower than y is written to scratch and
// copied into its columns. A shape whose implementation differs from the path is an error.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/linear_bf16_kernels.h"
#include "kernels/cpu/onednn_engine.h"
#include "kernels/cpu/weight_only_avx512.h"
#include "qjoule/error.h"

namespace qjoule::kernels::avx512 {
namespace {

using dnnl::memory;

struct Entry {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

dnnl::matmul::primitive_desc make_pd(int64_t m, int64_t k, int64_t n, bool with_bias) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const memory::desc src_md({m, k}, memory::data_type::bf16, memory::format_tag::ab);
  const memory::desc wei_md({k, n}, memory::data_type::bf16, memory::dims{1, k});  // panel [n, k] seen as [k, n]
  const memory::desc dst_md({m, n}, memory::data_type::f32, memory::format_tag::ab);
  if (with_bias) {
    const memory::desc bias_md({1, n}, memory::data_type::f32, memory::format_tag::ab);
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_md, bias_md, dst_md), attr, onednn_cpu_engine());
  }
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_md, dst_md), attr, onednn_cpu_engine());
}

std::string path_of(const dnnl::matmul::primitive_desc& pd) { return onednn_kernel_path(pd) + ":bf16bf16f32"; }

const Entry& entry_for(int64_t m, int64_t k, int64_t n, bool with_bias) {
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, int64_t, bool>, Entry> cache;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(m, k, n, with_bias);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  auto pd = make_pd(m, k, n, with_bias);
  if (path_of(pd) != bf16_panel_kernel_path()) {
    fail("BF16 panel product of {} x {} x {}: oneDNN chose {}, not the {} that the layer's kernel path names", m, k, n,
         path_of(pd), bf16_panel_kernel_path());
  }
  return cache.emplace(key, Entry{pd, dnnl::matmul(pd)}).first->second;
}

}  // namespace

void bf16_panel_matmul(const uint16_t* a, int64_t m, int64_t k, const uint16_t* panel, int64_t n, const float* bias,
                       float* y, int64_t ldy) {
  const Entry& e = entry_for(m, k, n, bias != nullptr);
  thread_local std::vector<float> dense;
  thread_local std::vector<uint8_t> scratchpad;
  const dnnl::engine& engine = onednn_cpu_engine();
  thread_local dnnl::stream stream(engine);
  const memory::desc scratch_md = e.pd.scratchpad_desc();
  if (scratchpad.size() < scratch_md.get_size()) scratchpad.resize(scratch_md.get_size());
  float* out = y;
  if (ldy != n) {
    dense.resize(static_cast<size_t>(m * n));
    out = dense.data();
  }
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(e.pd.src_desc(), engine, const_cast<uint16_t*>(a))},
      {DNNL_ARG_WEIGHTS, memory(e.pd.weights_desc(), engine, const_cast<uint16_t*>(panel))},
      {DNNL_ARG_DST, memory(e.pd.dst_desc(), engine, out)},
      {DNNL_ARG_SCRATCHPAD, memory(scratch_md, engine, scratchpad.data())}};
  if (bias != nullptr) args.emplace(DNNL_ARG_BIAS, memory(e.pd.bias_desc(), engine, const_cast<float*>(bias)));
  e.prim.execute(stream, args);
  stream.wait();
  if (out != y) {
#pragma omp parallel for schedule(static) if (m * n >= (int64_t{1} << 15))
    for (int64_t i = 0; i < m; ++i) std::memcpy(y + i * ldy, out + i * n, sizeof(float) * static_cast<size_t>(n));
  }
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

const std::string& bf16_panel_kernel_path() {
  static const std::string path = bf16_panel_available() ? path_of(make_pd(64, 256, 64, true)) : std::string();
  return path;
}

}  // namespace qjoule::kernels::avx512
