// The integer matrix product C[m, n] (s32) = A[m, k] (u8) · Bᵀ, with B held as s8 [n, k] row-major
// (Hugging Face's [out, in] weight layout, described to oneDNN as a transposed [k, n] matrix):
// oneDNN's matmul (one primitive per distinct m, created on first use and cached), except for
// m <= kGemvU8S8S32MaxRows on CPUs with AVX512_VNNI, where qjoule's GEMV runs (gemv_u8s8s32_avx512_vnni.h:
// oneDNN 2.6 reads the weights at about half the memory bandwidth at m = 1). Both are exact.
//
// Exactness caveat (measured, see int8_gemm_weight_qmax): CPUs without VNNI compute u8×s8 with
// vpmaddubsw, which adds two adjacent u8·s8 products into a SATURATING int16. With u8 up to 255 and
// s8 up to 127 a pair can reach 64770 > 32767, and oneDNN 2.6's AVX2 GEMM does not guard against
// it, so C is silently wrong. Keeping |B| <= 63 bounds a pair by 2·255·63 = 32130 and the product is
// exact again (the same 7-bit-weight remedy oneDNN's guide describes for non-VNNI int8).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/cpu/gemv_u8s8s32_avx512_vnni.h"
#include "qjoule/io/huge_pages.h"

namespace qjoule::kernels {

class GemmU8S8S32 {
 public:
  // b: [n, k] s8 row-major, copied. allow_gemv = false: oneDNN at every m (to compare the two).
  GemmU8S8S32(const int8_t* b, int64_t n, int64_t k, bool allow_gemv = true);

  // c[m, n] = a[m, k] · bᵀ in exact int32 arithmetic (up to the saturation caveat above).
  void run(const uint8_t* a, int64_t m, int32_t* c) const;

  // The path that runs at this m: "onednn:<impl>:u8s8s32" for the primitive oneDNN picks, e.g.
  // "onednn:brg:avx512_core_vnni:u8s8s32", or "qjoule:avx512_vnni:u8s8s32_gemv".
  std::string kernel_path(int64_t m) const;
  // Every path of the layer: kernel_path(1), followed by ",m>4:" and kernel_path(5) where they differ.
  std::string kernel_path() const;
  bool uses_gemv(int64_t m) const;

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  const io::HugePageVector<int8_t>& b() const { return b_; }

 private:
  struct Entry {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul prim;
  };
  const Entry& entry_for(int64_t m) const;

  int64_t n_, k_;
  bool gemv_;  // qjoule's VNNI GEMV for m <= kGemvU8S8S32MaxRows
  io::HugePageVector<int8_t> b_;
  mutable std::mutex mutex_;
  mutable std::map<int64_t, Entry> cache_;
};

// The largest |weight code| for which this CPU's oneDNN u8×s8 GEMM is exact with u8 activations up
// to 255: 127 where products accumulate without int16 saturation (VNNI), 63 where vpmaddubsw pairs
// saturate (AVX2/AVX-512 without VNNI). Measured once per process by running the GEMM on
// worst-case operands at several m; fails with a clear message if neither is exact.
int int8_gemm_weight_qmax();

}  // namespace qjoule::kernels
