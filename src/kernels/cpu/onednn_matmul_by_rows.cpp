#include "kernels/cpu/onednn_matmul_by_rows.h"

#include <unordered_map>

namespace qjoule::kernels {

using dnnl::memory;

OneDnnMatmulByRows::OneDnnMatmulByRows(int64_t out, int64_t in, memory::data_type src_type,
                                       memory::data_type weight_type, bool with_bias)
    : out_(out), in_(in), src_type_(src_type), weight_type_(weight_type), with_bias_(with_bias) {}

const OneDnnMatmulByRows::Entry& OneDnnMatmulByRows::entry(int64_t m) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = cache_.find(m);
  if (it != cache_.end()) return it->second;
  const memory::desc src_md({m, in_}, src_type_, memory::format_tag::ab);
  const memory::desc wei_md({in_, out_}, weight_type_, memory::format_tag::ba);  // W[out,in] seen as Wᵀ
  const memory::desc dst_md({m, out_}, memory::data_type::f32, memory::format_tag::ab);
  dnnl::matmul::primitive_desc pd;
  if (with_bias_) {
    const memory::desc bias_md({1, out_}, memory::data_type::f32, memory::format_tag::ab);
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_md, bias_md, dst_md), onednn_cpu_engine());
  } else {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_md, dst_md), onednn_cpu_engine());
  }
  return cache_.emplace(m, Entry{pd, dnnl::matmul(pd)}).first->second;
}

void OneDnnMatmulByRows::execute(int64_t m, const void* x, const void* weight, const float* bias, float* y) const {
  const Entry& e = entry(m);
  memory src(e.pd.src_desc(), onednn_cpu_engine(), const_cast<void*>(x));
  memory wei(e.pd.weights_desc(), onednn_cpu_engine(), const_cast<void*>(weight));
  memory dst(e.pd.dst_desc(), onednn_cpu_engine(), y);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
  if (with_bias_) args.emplace(DNNL_ARG_BIAS, memory(e.pd.bias_desc(), onednn_cpu_engine(), const_cast<float*>(bias)));
  e.prim.execute(onednn_cpu_stream(), args);
  onednn_cpu_stream().wait();
}

}  // namespace qjoule::kernels
