#include "kernels/cpu/onednn_engine.h"

namespace qjoule::kernels {

dnnl::engine& onednn_cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& onednn_cpu_stream() {
  thread_local dnnl::stream stream(onednn_cpu_engine());
  return stream;
}

std::string onednn_kernel_path(const dnnl::primitive_desc_base& pd) {
  return "onednn:" + std::string(pd.impl_info_str());
}

}  // namespace qjoule::kernels
