// Linear layers on an NVIDIA GPU: y[m, out] = x[m, in] · Wᵀ + b with W resident on the device, in
// the format the layer was built for. Matrix products run in cuBLASLt; the 4-bit weight-only formats
// run qjoule's own kernels. docs/cuda.md lists what runs for each format and what has been checked
// on a GPU.
//
//   precision  device weights                          matrix product                       kernel_path()
//   fp32       FP32                                    cuBLASLt FP32 (no tensor cores)      cublaslt:f32
//   tf32       FP32 (rounded to TF32 by the GPU)       cuBLASLt TF32 tensor cores, FP32 acc cublaslt:tf32:tensor_op
//   fp16       FP16 (quant::quantize_matrix_fp16)      x → FP16 on the device; FP16 tensor  cublaslt:f16:tensor_op
//                                                      cores, FP32 accumulation and output
//   bf16       BF16 (round to nearest even)            x → BF16 on the device; BF16 tensor  cublaslt:bf16:tensor_op
//                                                      cores, FP32 accumulation and output
//   int8       s8 per output channel, symmetric,       x quantized per token on the device  cublaslt:s8:tensor_op
//              [-127, 127] (the CPU W8A8 quantizer)    (scale max|x|/127); s8×s8→s32; qjoule
//                                                      epilogue y = acc·(s_x·s_w) + b
//   fp8        E4M3, one per-tensor scale max|W|/448   x quantized per token to E4M3 (scale    cublaslt:e4m3:tensor_op
//                                                      max|x|/448); E4M3×E4M3→FP32; epilogue
//                                                      y = acc·(s_x·s_w) + b. sm_89 and newer.
//   int4       formats.h's int4 blocks, as is          m ≤ 8: qjoule GEMV, dequantized in       qjoule:cuda:int4_gemv_split+f16_cublaslt
//   nf4        formats.h's nf4 (or nf4+dq) blocks      registers; m > 8: FP16 dequantized weight qjoule:cuda:nf4_gemv_split+f16_cublaslt
//                                                      panels + cuBLASLt FP16 GEMM               (nf4dq_… with double quant;
//                                                                                                _gemv with QJOULE_CUDA_GEMV4=plain)
// kernel_path_for(m) names the one path that runs for m rows.
//
// int8 and fp8 pad W to multiples of 16 in both dimensions on the device (zero rows and columns, so
// the product is unchanged; bytes_held counts the padding). A non-finite activation makes the
// outputs of its row NaN (the CPU int8 layer throws instead: checking would need a device sync).
//
// Threads and streams: one layer may be called from several threads (calls are serialized), but all
// layers on one device share one cuBLASLt workspace, so their forward_device calls must be ordered
// on one stream (or the streams synchronized).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qjoule/kernels/linear.h"
#include "qjoule/kernels/make_linear.h"
#include "qjoule/quant/format_spec.h"
#include "qjoule/quant/formats.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace qjoule::kernels {

// Fails with one line beginning with `what` (e.g. "--precision w8") unless some CUDA layer runs this
// format: the checks of make_linear_cuda that need no shape (emulate, w8, int4 with a8, an unknown
// precision, the int4 group size). Needs no GPU.
void check_cuda_format(const quant::FormatSpec& format, const std::string& what);

class CudaLinear : public Linear {
 public:
  // y_device[m, out] = x_device[m, in] · Wᵀ + b, enqueued on `stream` (nullptr: the default stream);
  // returns before the GPU is done. Both pointers are device memory, 16-byte aligned. Launch and
  // cuBLASLt errors throw qjoule::Error; errors inside the kernels surface at the next synchronization.
  virtual void forward_device(const float* x_device, int64_t m, float* y_device, CUstream_st* stream) const = 0;
  // (Linear::forward(x, m, y) takes HOST pointers: it copies x to the GPU, runs forward_device on the
  // default stream, copies y back and waits, throwing qjoule::Error on any CUDA error.)

  // The GPU this layer lives on.
  virtual int device() const = 0;
  // The kernel(s) that run for m rows, e.g. "qjoule:cuda:int4_gemv_split" for m = 1.
  virtual std::string kernel_path_for(int64_t m) const = 0;
};

// Builds a layer on GPU `device` from FP32 W [out, in] row-major (Hugging Face layout) and bias [out]
// (or nullptr); both are quantized / converted on the host and copied to the GPU. Uses
// format.format (a format whose traits say runs_on_cuda; tf32 and fp8 run on CUDA only),
// group_size and int4_asymmetric for int4, nf4_double_quant for nf4. Everything else is a one-line
// qjoule::Error naming the tensor: int4 with INT8 activations (a8), w8, emulate, an unknown precision,
// `in` not a multiple of the int4 group or of 64 for nf4, non-finite weights, |w| > 65504 for fp16,
// fp8 on a GPU below sm_89, tf32 / bf16 below sm_80, no usable GPU (with cuda_device_status()'s reason).
std::unique_ptr<CudaLinear> make_linear_cuda(const quant::FormatSpec& format, const float* W, const float* bias,
                                             int64_t out, int64_t in, const std::string& tensor_name, int device = 0);

// Builds an int4 layer on GPU `device` from codes already in formats.h's blocks (calibrated ones: GPTQ's,
// AWQ's), uploaded byte for byte: the kernels, labels and bytes make_linear_cuda gives the same codes, so a
// calibrated model runs what round-to-nearest's runs. Block gives the group and scheme. A width that is not a
// whole number of groups (the CUDA kernels need whole ones), or a block count that is not the shape's, is a
// one-line qjoule::Error naming the tensor, checked before the GPU.
template <class Block>
std::unique_ptr<CudaLinear> make_linear_cuda_int4_packed(const quant::BlockMatrix<Block>& codes, const float* bias,
                                                         const std::string& tensor_name, int device = 0);

}  // namespace qjoule::kernels
