#include "kernels/cpu/gemm_u8s8s32.h"

#include <unordered_map>

#include "kernels/cpu/gemv_u8s8s32_avx512_vnni.h"
#include "kernels/cpu/onednn_engine.h"
#include "qjoule/error.h"

namespace qjoule::kernels {

using dnnl::memory;

GemmU8S8S32::GemmU8S8S32(const int8_t* b, int64_t n, int64_t k, bool allow_gemv)
    : n_(n), k_(k), gemv_(allow_gemv && cpu_supports_avx512_vnni()), b_(b, b + n * k) {
  if (n <= 0 || k <= 0) fail("u8s8s32 GEMM: shape n={} k={} is empty; expected both > 0", n, k);
}

const GemmU8S8S32::Entry& GemmU8S8S32::entry_for(int64_t m) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = cache_.find(m);
  if (it != cache_.end()) return it->second;
  memory::desc a_md({m, k_}, memory::data_type::u8, memory::format_tag::ab);
  memory::desc b_md({k_, n_}, memory::data_type::s8, memory::format_tag::ba);  // B[n,k] seen as Bᵀ
  memory::desc c_md({m, n_}, memory::data_type::s32, memory::format_tag::ab);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), onednn_cpu_engine());
  } catch (const dnnl::error& e) {
    fail("u8s8s32 GEMM m={} k={} n={}: oneDNN has no u8×s8→s32 matmul here ({})", m, k_, n_, e.what());
  }
  return cache_.emplace(m, Entry{pd, dnnl::matmul(pd)}).first->second;
}

bool GemmU8S8S32::uses_gemv(int64_t m) const { return gemv_ && m <= kGemvU8S8S32MaxRows; }

void GemmU8S8S32::run(const uint8_t* a, int64_t m, int32_t* c) const {
  if (m <= 0) return;
  if (uses_gemv(m)) return gemv_u8s8s32_avx512_vnni(a, m, b_.data(), n_, k_, c);
  const Entry& e = entry_for(m);
  memory a_mem(e.pd.src_desc(), onednn_cpu_engine(), const_cast<uint8_t*>(a));
  memory b_mem(e.pd.weights_desc(), onednn_cpu_engine(), const_cast<int8_t*>(b_.data()));
  memory c_mem(e.pd.dst_desc(), onednn_cpu_engine(), c);
  e.prim.execute(onednn_cpu_stream(), {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
  onednn_cpu_stream().wait();
}

std::string GemmU8S8S32::kernel_path(int64_t m) const {
  if (uses_gemv(m)) return "qjoule:avx512_vnni:u8s8s32_gemv";
  return onednn_kernel_path(entry_for(m).pd) + ":u8s8s32";
}

std::string GemmU8S8S32::kernel_path() const {
  const std::string decode = kernel_path(1), prefill = kernel_path(kGemvU8S8S32MaxRows + 1);
  return decode == prefill ? decode : decode + ",m>" + std::to_string(kGemvU8S8S32MaxRows) + ":" + prefill;
}

namespace {

// True when the GEMM is exact on the worst case for |b| = qmax: a = 255 everywhere against b = +qmax
// and, in the second half of the columns, b = −qmax (the negative pair sum saturates too).
bool gemm_exact_at(int qmax) {
  constexpr int64_t n = 64, k = 256;
  std::vector<int8_t> b(n * k);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i) b[j * k + i] = static_cast<int8_t>(j < n / 2 ? qmax : -qmax);
  GemmU8S8S32 gemm(b.data(), n, k);
  for (int64_t m : {1, 7, 64}) {
    std::vector<uint8_t> a(m * k, 255);
    std::vector<int32_t> c(m * n);
    gemm.run(a.data(), m, c.data());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        if (c[i * n + j] != 255 * k * (j < n / 2 ? qmax : -qmax)) return false;
  }
  return true;
}

}  // namespace

int int8_gemm_weight_qmax() {
  static const int qmax = [] {
    if (gemm_exact_at(127)) return 127;
    if (gemm_exact_at(63)) return 63;
    fail(
        "int8 W8A8: oneDNN's u8×s8→s32 matmul is not exact on this CPU even with 7-bit weights; "
        "refusing to report int8 results from it");
  }();
  return qmax;
}

}  // namespace qjoule::kernels
