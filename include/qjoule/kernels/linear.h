// A linear layer as the model sees it: y[m, out] = x[m, in] · Wᵀ + b, with W held in whatever
// format the layer was built for. Every implementation says which kernel really runs
// (`kernel_path`) and how many bytes it holds, so results can report both honestly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace qjoule::kernels {

class Linear {
 public:
  virtual ~Linear() = default;
  // x: [m, in_features] row-major FP32; y: [m, out_features] row-major FP32 (overwritten).
  virtual void forward(const float* x, int64_t m, float* y) const = 0;
  virtual int64_t in_features() const = 0;
  virtual int64_t out_features() const = 0;
  // Precision name as accepted by --precision ("fp32", "int8", "nf4", ...).
  virtual std::string format() const = 0;
  // The kernel that actually executes, e.g. "onednn:brg:avx2:f32" or "qjoule:avx2:nf4_f32".
  virtual std::string kernel_path() const = 0;
  // Bytes held in memory for this layer: packed weights + scales + zero points + bias.
  virtual std::size_t bytes_held() const = 0;
  // The weights when held as plain rows [out, in] in host memory, FP32 (4 bytes a value) or BF16 words
  // (2): what a tied decoder's token-embedding lookup reads instead of a second copy of the same matrix.
  // {} for every other layout (packed, quantized, on a GPU).
  struct HostRows {
    const void* data = nullptr;
    int element_bytes = 0;
  };
  virtual HostRows host_weight_rows() const { return {}; }
};

// FP32 weights [out, in] row-major (Hugging Face nn.Linear layout) and an optional bias [out]
// (nullptr for none); both are copied. The matrix product runs in oneDNN's f32 matmul.
std::unique_ptr<Linear> make_linear_f32_onednn(const float* weight, const float* bias, int64_t out_features,
                                               int64_t in_features);

// Plain scalar reference for y = x · Wᵀ + b (double accumulation); the twin every kernel is tested against.
void linear_f32_ref(const float* x, int64_t m, const float* weight, const float* bias, int64_t out_features,
                    int64_t in_features, float* y);

}  // namespace qjoule::kernels
