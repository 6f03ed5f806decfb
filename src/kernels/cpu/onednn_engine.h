// The process-wide oneDNN CPU engine and stream used by every oneDNN-backed kernel.
#pragma once

#include <string>

#include <oneapi/dnnl/dnnl.hpp>

namespace qjoule::kernels {

dnnl::engine& onednn_cpu_engine();
dnnl::stream& onednn_cpu_stream();

// "onednn:<impl>" for a primitive descriptor, e.g. "onednn:brg:avx2" — the implementation that runs.
std::string onednn_kernel_path(const dnnl::primitive_desc_base& pd);

}  // namespace qjoule::kernels
