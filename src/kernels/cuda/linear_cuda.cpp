// make_linear_cuda: checks the format and the shape, then the GPU, prepares the weights on the host
// with the CPU layers' own quantizers (padding INT8 / FP8 matrices to multiples of 16) and hands them
// to the device side (linear_cuda_device.h). Every failure is one qjoule::Error line naming the tensor.
#include "qjoule/kernels/linear_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/cuda/cuda_format_plans.h"
#include "kernels/cuda/gemv_dense_cuda.h"
#include "kernels/cuda/linear_cuda_device.h"
#include "qjoule/error.h"
#include "qjoule/kernels/backend_registry.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/cuda_gemm_bench.h"
#include "qjoule/kernels/kernel_overrides.h"
#include "kernels/cpu/weight_only/fp4_scales.h"
#include "qjoule/quant/formats.h"

#if QJOULE_HAVE_CUDA
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/quantize_symmetric_rows.h"
#include "kernels/cuda/cuda_bench_device.h"
#include "qjoule/quant/quantize_fp16.h"
#include "qjoule/quant/quantize_fp4.h"
#include "qjoule/quant/quantize_int4.h"
#include "qjoule/quant/quantize_nf4.h"
#include "qjoule/quant/require_finite.h"
#endif

namespace qjoule::kernels {

bool cuda_detail::gemv4_split() { return kernel_override(KernelOverride::cuda_gemv4).value_or("split") == "split"; }

namespace {

// The block of the table formats (nf4, mxfp4, nvfp4: formats.h), 0 for the others.
int table_block_size(quant::Format f) {
  switch (f) {
    case quant::Format::nf4: return quant::kNf4BlockSize;
    case quant::Format::mxfp4: return quant::kMxfp4BlockSize;
    case quant::Format::nvfp4: return quant::kNvfp4BlockSize;
    default: return 0;
  }
}

// What a validated format runs as.
struct Plan {
  bool packed = false;
  cuda_detail::GemmKind gemm = cuda_detail::GemmKind::f32;
  cuda_detail::PackedKind four_bit = cuda_detail::PackedKind::int4_sym;
  int min_compute = 75;  // compute capability × 10 the kernels need
  std::string kernel_path;
  std::string packed_name;  // "int4", "nf4", "nf4dq", "mxfp4", "nvfp4"
  std::string packed_gemv;  // "int4_gemv_split", or "int4_gemv" (cuda_detail::gemv4_split)
  std::string lt_path;      // dense: the cuBLASLt path of products above the GEMV's rows
  std::string gemv_name;    // dense formats with a decode GEMV (gemv_dense_cuda.h): "f32", "f16", "bf16", "s8"
};

// The format alone (no shape): what check_cuda_format and make_linear_cuda both reject. Errors begin
// with `who` ("tensor 'NAME'").
Plan validate_format(const quant::FormatSpec& f, const std::string& who) {
  using quant::Format;
  const Format p = f.format;
  if (f.emulate)
    fail("{}: precision '{}:emulate': fake quantization runs on the CPU only; CUDA layers run the real format", who, p);
  if (p == Format::w8)
    fail("{}: precision '{}' (INT8 weight-only) has no CUDA kernel; use {} (W8A8 through cuBLASLt) or {}", who, p,
         Format::int8, Format::fp16);
  const detail::CudaFormatPlan* row = detail::cuda_format_plan(p);
  if (row == nullptr)
    fail("{}: precision '{}' is not available on CUDA; expected one of {}", who, p,
         backend_format_names(Backend::cuda));
  if (f.smoothquant_alpha)
    fail(
        "{}: precision '{}': SmoothQuant runs on the CPU only (the GPU int8 layers quantize activations per token "
        "without smoothing)",
        who, quant::to_string(f));
  Plan plan;
  plan.packed = row->packed;
  plan.gemm = row->gemm;
  plan.min_compute = row->min_compute;
  plan.kernel_path = std::string(row->lt_path);
  plan.gemv_name = std::string(row->gemv);
  if (p == Format::int4) {
    if (f.int4_int8_activations)
      fail("{}: int4 with INT8 activations (a8) has no CUDA kernel; use int4 (FP32 activations) or int8", who);
    if (f.group_size != 32 && f.group_size != 64 && f.group_size != 128)
      fail("{}: int4 group size {}; expected 32, 64 or 128", who, f.group_size);
    plan.four_bit = f.int4_asymmetric ? cuda_detail::PackedKind::int4_asym : cuda_detail::PackedKind::int4_sym;
    plan.packed_name = quant::name(p);
  } else if (p == Format::nf4) {
    plan.four_bit = f.nf4_double_quant ? cuda_detail::PackedKind::nf4dq : cuda_detail::PackedKind::nf4;
    plan.packed_name = std::string(quant::name(p)) + (f.nf4_double_quant ? "dq" : "");
  } else if (p == Format::mxfp4 || p == Format::nvfp4) {
    plan.four_bit = p == Format::mxfp4 ? cuda_detail::PackedKind::mxfp4 : cuda_detail::PackedKind::nvfp4;
    plan.packed_name = quant::name(p);
  }
  if (plan.packed) {
    // nvfp4's 16-weight blocks are finer than the plain GEMV's 32 codes a lane: always the split GEMV.
    const bool split = cuda_detail::gemv4_split() || p == Format::nvfp4;
    plan.packed_gemv = plan.packed_name + (split ? "_gemv_split" : "_gemv");
    plan.kernel_path = "qjoule:cuda:" + plan.packed_gemv + "+f16_cublaslt";
  }
  plan.lt_path = plan.kernel_path;
  // Decode-sized products (m ≤ kDenseGemvMaxRows) run qjoule's GEMV, larger ones cuBLASLt: the path
  // names both, as the CPU layers' do ("...gemv,m>4:...").
  if (!plan.gemv_name.empty())
    plan.kernel_path =
        fmt::format("qjoule:cuda:{}_gemv,m>{}:{}", plan.gemv_name, cuda_detail::kDenseGemvMaxRows, plan.lt_path);
  return plan;
}

Plan validate(const quant::FormatSpec& f, int64_t out, int64_t in, const std::string& tensor) {
  if (out <= 0 || in <= 0) fail("tensor '{}': shape [{}, {}]; expected positive dimensions", tensor, out, in);
  Plan plan = validate_format(f, "tensor '" + tensor + "'");
  if (f.format == quant::Format::int4 && in % f.group_size != 0)
    fail(
        "tensor '{}': in_features {} is not a multiple of the int4 group size {}; the CUDA kernels need whole groups "
        "(the CPU kernels take a partial last group)",
        tensor, in, f.group_size);
  if (const int block = table_block_size(f.format); block > 0 && in % block != 0)
    fail(
        "tensor '{}': in_features {} is not a multiple of the {} block size {}; the CUDA kernels need whole blocks "
        "(the CPU kernels take a partial last block)",
        tensor, in, f.format, block);
  // A width the GEMV's 16-byte loads do not cover runs every product in cuBLASLt.
  if (!plan.packed && !plan.gemv_name.empty() && !cuda_detail::dense_gemv_applies(plan.gemm, 1, in)) {
    plan.gemv_name.clear();
    plan.kernel_path = plan.lt_path;
  }
  return plan;
}

template <class T, class Allocator>
void append_bytes(std::vector<uint8_t>& bytes, const std::vector<T, Allocator>& values) {
  static_assert(std::is_trivially_copyable_v<T>);
  const std::size_t at = bytes.size();
  bytes.resize(at + values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(bytes.data() + at, values.data(), values.size() * sizeof(T));
}

// A packed layer's weights without their blocks: kind, shape and the tables the kernels read.
cuda_detail::PackedWeights packed_header(const Plan& plan, int group_size, int64_t out, int64_t in) {
  cuda_detail::PackedWeights w;
  w.kind = plan.four_bit;
  w.split_gemv = plan.packed_gemv.ends_with("_split");
  w.group_size = group_size;
  w.out = out;
  w.in = in;
  w.nf4_table.assign(quant::kNf4Table.begin(), quant::kNf4Table.end());
  w.dynamic_map.assign(quant::dynamic_map_signed().begin(), quant::dynamic_map_signed().end());
  w.e2m1_table.assign(quant::kE2M1Table.begin(), quant::kE2M1Table.end());
  w.e8m0_map.assign(detail::e8m0_values().begin(), detail::e8m0_values().end());  // the CPU kernels' scale tables
  w.e4m3_map.assign(detail::e4m3_values().begin(), detail::e4m3_values().end());
  return w;
}

#if QJOULE_HAVE_CUDA

using cuda_detail::DenseWeights;
using cuda_detail::GemmKind;
using cuda_detail::PackedKind;
using cuda_detail::PackedWeights;

void require_finite_matrix(const float* W, int64_t out, int64_t in, const std::string& tensor,
                           std::string_view format) {
  for (int64_t r = 0; r < out; ++r) quant::require_finite(W + r * in, in, tensor, r, format);
}

DenseWeights dense_weights(GemmKind kind, const float* W, int64_t out, int64_t in, const std::string& tensor) {
  DenseWeights w;
  w.kind = kind;
  w.out = out;
  w.in = in;
  w.rows = out;
  w.cols = in;
  const auto n = static_cast<std::size_t>(out * in);
  switch (kind) {
    case GemmKind::f32:
    case GemmKind::tf32:
      require_finite_matrix(W, out, in, tensor,
                            quant::name(kind == GemmKind::f32 ? quant::Format::fp32 : quant::Format::tf32));
      w.data.resize(n * sizeof(float));
      std::memcpy(w.data.data(), W, n * sizeof(float));
      break;
    case GemmKind::f16: append_bytes(w.data, quant::quantize_matrix_fp16(W, out, in, tensor).bits); break;
    case GemmKind::bf16: {
      require_finite_matrix(W, out, in, tensor, quant::name(quant::Format::bf16));
      std::vector<uint16_t> bits(n);
      for (std::size_t i = 0; i < n; ++i) bits[i] = f32_to_bf16_bits(W[i]);
      append_bytes(w.data, bits);
      break;
    }
    case GemmKind::s8: {
      w.rows = cuda_detail::round_up(out, cuda_detail::kLowpPad);
      w.cols = cuda_detail::round_up(in, cuda_detail::kLowpPad);
      std::vector<int8_t> q(n);
      w.row_scales.assign(static_cast<std::size_t>(w.rows), 0.0f);
      quantize_rows_symmetric_s8(W, out, in, 127, q.data(), w.row_scales.data(), "tensor '" + tensor + "'");
      w.data.assign(static_cast<std::size_t>(w.rows * w.cols), 0);
      for (int64_t r = 0; r < out; ++r)
        std::memcpy(w.data.data() + r * w.cols, q.data() + r * in, static_cast<std::size_t>(in));
      break;
    }
    case GemmKind::e4m3: {
      require_finite_matrix(W, out, in, tensor, quant::name(quant::Format::fp8));
      w.rows = cuda_detail::round_up(out, cuda_detail::kLowpPad);
      w.cols = cuda_detail::round_up(in, cuda_detail::kLowpPad);
      float amax = 0.0f;
      for (std::size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(W[i]));
      float inv = 0.0f, scale = 0.0f;
      cuda_detail::e4m3_scales(amax, inv, scale);
      w.row_scales.assign(static_cast<std::size_t>(w.rows), scale);
      w.data.assign(static_cast<std::size_t>(w.rows * w.cols), 0);
      for (int64_t r = 0; r < out; ++r)
        for (int64_t c = 0; c < in; ++c)
          w.data[static_cast<std::size_t>(r * w.cols + c)] = cuda_detail::fp32_to_e4m3(W[r * in + c] * inv);
      break;
    }
  }
  return w;
}

template <class Block>
void int4_blocks(const float* W, int64_t out, int64_t in, const std::string& tensor, PackedWeights& w) {
  append_bytes(w.blocks, quant::quantize_matrix_int4<Block>(W, out, in, tensor).blocks);
}

PackedWeights packed_weights(const Plan& plan, const quant::FormatSpec& f, const float* W, int64_t out, int64_t in,
                             const std::string& tensor) {
  const bool int4 = plan.four_bit == PackedKind::int4_sym || plan.four_bit == PackedKind::int4_asym;
  PackedWeights w = packed_header(plan, int4 ? f.group_size : table_block_size(f.format), out, in);
  switch (plan.four_bit) {
    case PackedKind::int4_sym:
    case PackedKind::int4_asym: {
      const bool asym = plan.four_bit == PackedKind::int4_asym;
      if (f.group_size == 32) {
        asym ? int4_blocks<quant::BlockInt4Asym<32>>(W, out, in, tensor, w)
             : int4_blocks<quant::BlockInt4Sym<32>>(W, out, in, tensor, w);
      } else if (f.group_size == 64) {
        asym ? int4_blocks<quant::BlockInt4Asym<64>>(W, out, in, tensor, w)
             : int4_blocks<quant::BlockInt4Sym<64>>(W, out, in, tensor, w);
      } else {
        asym ? int4_blocks<quant::BlockInt4Asym<128>>(W, out, in, tensor, w)
             : int4_blocks<quant::BlockInt4Sym<128>>(W, out, in, tensor, w);
      }
      break;
    }
    case PackedKind::nf4: append_bytes(w.blocks, quant::quantize_matrix_nf4(W, out, in, tensor).blocks); break;
    case PackedKind::nf4dq: {
      const quant::Nf4DqMatrix m = quant::quantize_matrix_nf4_double(W, out, in, tensor);
      append_bytes(w.blocks, m.blocks);
      w.absmax_scales = m.absmax_scales;
      w.absmax_mean = m.absmax_mean;
      break;
    }
    case PackedKind::mxfp4: append_bytes(w.blocks, quant::quantize_matrix_mxfp4(W, out, in, tensor).blocks); break;
    case PackedKind::nvfp4: {
      const quant::Nvfp4Matrix m = quant::quantize_matrix_nvfp4(W, out, in, tensor);
      append_bytes(w.blocks, m.blocks);
      w.tensor_scale = m.tensor_scale;
      break;
    }
  }
  return w;
}

class CudaLinearImpl final : public CudaLinear {
 public:
  CudaLinearImpl(std::unique_ptr<cuda_detail::DeviceLinear> impl, Plan plan, std::string precision,
                 std::string tensor_name, int64_t out_features, int64_t in_features, int device_index)
      : impl_(std::move(impl)),
        plan_(std::move(plan)),
        format_(std::move(precision)),
        tensor_(std::move(tensor_name)),
        out_(out_features),
        in_(in_features),
        device_(device_index) {}

  void forward(const float* x, int64_t m, float* y) const override { check(impl_->forward_host(x, m, y), m); }
  void forward_device(const float* x_device, int64_t m, float* y_device, CUstream_st* stream) const override {
    check(impl_->forward(x_device, m, y_device, stream), m);
  }
  int64_t in_features() const override { return in_; }
  int64_t out_features() const override { return out_; }
  std::string format() const override { return format_; }
  std::string kernel_path() const override { return plan_.kernel_path; }
  std::size_t bytes_held() const override { return impl_->bytes_held(); }
  int device() const override { return device_; }
  std::string kernel_path_for(int64_t m) const override {
    if (!plan_.packed) {
      return !plan_.gemv_name.empty() && cuda_detail::dense_gemv_applies(plan_.gemm, m, in_)
                 ? "qjoule:cuda:" + plan_.gemv_name + "_gemv"
                 : plan_.lt_path;
    }
    return m <= cuda_detail::kGemvMaxRows ? "qjoule:cuda:" + plan_.packed_gemv
                                          : "qjoule:cuda:" + plan_.packed_name + "_dequant_f16+cublaslt:f16:tensor_op";
  }
  cuda_detail::DeviceLinear* device_linear() const { return impl_.get(); }

 private:
  void check(const std::string& error, int64_t m) const {
    if (!error.empty())
      fail("tensor '{}': CUDA {} forward of {} rows on GPU {}: {}", tensor_, kernel_path_for(m), m, device_, error);
  }

  std::unique_ptr<cuda_detail::DeviceLinear> impl_;
  Plan plan_;
  std::string format_, tensor_;
  int64_t out_, in_;
  int device_;
};

#endif  // QJOULE_HAVE_CUDA

}  // namespace

void check_cuda_format(const quant::FormatSpec& format, const std::string& what) { validate_format(format, what); }

namespace {

// The GPU part of every constructor: the device checks, then the weights (prepared on the host) uploaded.
std::unique_ptr<CudaLinear> upload_linear(const Plan& plan, const quant::FormatSpec& format,
                                          const cuda_detail::DenseWeights& dense,
                                          const cuda_detail::PackedWeights& packed, const float* bias, int64_t out,
                                          int64_t in, const std::string& tensor_name, int device) {
  const CudaDeviceStatus& status = cuda_device_status();
  if (!status.usable) fail("tensor '{}': CUDA {} layer: no usable GPU: {}", tensor_name, format.format, status.reason);
  if (device < 0 || device >= status.device_count)
    fail("tensor '{}': GPU {} does not exist; this machine has {} (0 to {})", tensor_name, device, status.device_count,
         status.device_count - 1);
#if QJOULE_HAVE_CUDA
  std::vector<float> b;
  if (bias != nullptr) b.assign(bias, bias + out);
  cuda_detail::DeviceInfo info;
  if (std::string e = cuda_detail::query_device(device, info); !e.empty())
    fail("tensor '{}': GPU {}: {}", tensor_name, device, e);
  const int compute = info.major * 10 + info.minor;
  if (compute < plan.min_compute)
    fail("tensor '{}': {} ({}) needs compute capability {}.{} or newer; GPU {} is {} (sm_{})", tensor_name,
         format.format, plan.kernel_path, plan.min_compute / 10, plan.min_compute % 10, device, info.name, compute);
  std::unique_ptr<cuda_detail::DeviceLinear> impl;
  const std::string error = plan.packed ? cuda_detail::make_packed_linear(packed, b, device, impl)
                                        : cuda_detail::make_dense_linear(dense, b, device, impl);
  if (!error.empty())
    fail("tensor '{}': CUDA {} layer [{}, {}] on GPU {}: {}", tensor_name, format.format, out, in, device, error);
  return std::make_unique<CudaLinearImpl>(std::move(impl), plan, std::string(quant::name(format.format)), tensor_name,
                                          out, in, device);
#else
  (void)plan;
  (void)dense;
  (void)packed;
  (void)bias;
  (void)out;
  (void)in;
  fail("tensor '{}': CUDA {} layer: this qjoule was built without the CUDA backend", tensor_name, format.format);
#endif
}

// Blocks handed in (make_linear_cuda_*_packed): as many as their matrix says, whole ones only.
void check_packed_blocks(std::size_t blocks, int64_t rows, int64_t cols, int block_size,
                         const std::string& tensor_name) {
  if (rows <= 0 || cols <= 0 || cols % block_size != 0 ||
      blocks != static_cast<std::size_t>(rows * (cols / block_size)))
    fail(
        "tensor '{}': {} packed blocks of {} weights for [{}, {}]; expected a positive shape whose width is a whole "
        "number of blocks and one block per {} weights of each row",
        tensor_name, blocks, block_size, rows, cols, block_size);
}

}  // namespace

std::unique_ptr<CudaLinear> make_linear_cuda(const quant::FormatSpec& format, const float* W, const float* bias,
                                             int64_t out, int64_t in, const std::string& tensor_name, int device) {
  // Calibrated codes come with their own constructor (make_linear_cuda_int4_packed); from weights alone
  // they would be round-to-nearest's under GPTQ's or AWQ's name.
  if (quant::needs_calibration(format)) fail("tensor '{}': {}", tensor_name, quant::calibration_needed_message(format));
  const Plan plan = validate(format, out, in, tensor_name);
  // The host work first (its errors name the tensor and need no GPU), then the GPU.
  cuda_detail::DenseWeights dense;
  cuda_detail::PackedWeights packed;
#if QJOULE_HAVE_CUDA
  if (plan.packed) {
    packed = packed_weights(plan, format, W, out, in, tensor_name);
  } else {
    dense = dense_weights(plan.gemm, W, out, in, tensor_name);
  }
#else
  (void)W;
#endif
  return upload_linear(plan, format, dense, packed, bias, out, in, tensor_name, device);
}

template <class Block>
std::unique_ptr<CudaLinear> make_linear_cuda_int4_packed(const quant::BlockMatrix<Block>& codes, const float* bias,
                                                         const std::string& tensor_name, int device) {
  quant::FormatSpec format;
  format.format = quant::Format::int4;
  format.group_size = Block::kSize;
  format.int4_asymmetric = std::is_same_v<Block, quant::BlockInt4Asym<Block::kSize>>;
  const Plan plan = validate(format, codes.rows, codes.cols, tensor_name);
  check_packed_blocks(codes.blocks.size(), codes.rows, codes.cols, Block::kSize, tensor_name);
  cuda_detail::PackedWeights packed = packed_header(plan, format.group_size, codes.rows, codes.cols);
  append_bytes(packed.blocks, codes.blocks);
  return upload_linear(plan, format, {}, packed, bias, codes.rows, codes.cols, tensor_name, device);
}

#define QJOULE_CUDA_INT4_PACKED(B)                                                                                 \
  template std::unique_ptr<CudaLinear> make_linear_cuda_int4_packed<B>(const quant::BlockMatrix<B>&, const float*, \
                                                                       const std::string&, int);
QJOULE_CUDA_INT4_PACKED(quant::BlockInt4Sym<32>)
QJOULE_CUDA_INT4_PACKED(quant::BlockInt4Sym<64>)
QJOULE_CUDA_INT4_PACKED(quant::BlockInt4Sym<128>)
QJOULE_CUDA_INT4_PACKED(quant::BlockInt4Asym<32>)
QJOULE_CUDA_INT4_PACKED(quant::BlockInt4Asym<64>)
QJOULE_CUDA_INT4_PACKED(quant::BlockInt4Asym<128>)
#undef QJOULE_CUDA_INT4_PACKED

std::vector<float> time_linear_forward(const std::vector<const CudaLinear*>& layers, int64_t m, int reps, int calls) {
  if (layers.empty()) fail("time_linear_forward: no layers");
#if QJOULE_HAVE_CUDA
  std::vector<cuda_detail::DeviceLinear*> impls;
  for (const CudaLinear* layer : layers) {
    const auto* impl = dynamic_cast<const CudaLinearImpl*>(layer);
    if (impl == nullptr || layer->in_features() != layers[0]->in_features() ||
        layer->out_features() != layers[0]->out_features() || layer->device() != layers[0]->device())
      fail("time_linear_forward: the layers must be make_linear_cuda layers of one shape on one GPU");
    impls.push_back(impl->device_linear());
  }
  std::vector<float> ms;
  if (std::string e = cuda_detail::bench_forward(impls, layers[0]->in_features(), layers[0]->out_features(), m, reps,
                                                 calls, layers[0]->device(), ms);
      !e.empty())
    fail("timing {} forward calls of {} rows: {}", layers[0]->kernel_path_for(m), m, e);
  return ms;
#else
  (void)m;
  (void)reps;
  (void)calls;
  fail("time_linear_forward: this qjoule was built without the CUDA backend");
#endif
}

}  // namespace qjoule::kernels
