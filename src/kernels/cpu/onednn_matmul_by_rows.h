// y[m, out] = x[m, in] · W[out, in]ᵀ (+ bias) on oneDNN's matmul, with W kept in Hugging Face's
// [out, in] layout and described to oneDNN as a transposed [in, out] matrix. One primitive per
// distinct row count m, created on first use and cached (transformer shapes repeat); thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "kernels/cpu/onednn_engine.h"

namespace qjoule::kernels {

class OneDnnMatmulByRows {
 public:
  // src_type: the activations' type (f32 or bf16); weights have `weight_type`; dst and bias are f32.
  OneDnnMatmulByRows(int64_t out, int64_t in, dnnl::memory::data_type src_type, dnnl::memory::data_type weight_type,
                     bool with_bias);

  // The primitive for m rows (created on first use).
  const dnnl::matmul::primitive_desc& primitive_desc(int64_t m) const { return entry(m).pd; }

  // Runs the product for m rows; `bias` must be given exactly when the matmul was made with_bias.
  void execute(int64_t m, const void* x, const void* weight, const float* bias, float* y) const;

 private:
  struct Entry {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul prim;
  };
  const Entry& entry(int64_t m) const;

  int64_t out_, in_;
  dnnl::memory::data_type src_type_, weight_type_;
  bool with_bias_;
  mutable std::mutex mutex_;
  mutable std::map<int64_t, Entry> cache_;
};

}  // namespace qjoule::kernels
