// The CUDA GraphOps backend (qjoule/model/graph_ops.h): the kernels of src/kernels/cuda and the
// CudaLinears on one stream of one GPU. Memory and kernel launches only: the graph is the CPU's.
// Built only with the CUDA backend (graph_ops_cuda_stub.cpp otherwise).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/cuda/decode_attention_cuda.h"
#include "kernels/cuda/decoder_ops_cuda.h"
#include "kernels/cuda/encoder_ops_cuda.h"
#include "qjoule/error.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/linear_cuda.h"
#include "qjoule/model/graph_ops.h"

namespace qjoule::model {
namespace {

namespace cd = kernels::cuda_detail;

void check(cudaError_t err, int device, std::string_view what) {
  if (err != cudaSuccess) fail("GPU {}: {}: {} ({})", device, what, cudaGetErrorString(err), cudaGetErrorName(err));
}

// Makes `device` current for its scope, restoring the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) check(cudaSetDevice(device), device, "cudaSetDevice");
  }
  ~DeviceGuard() {
    int now = -1;
    if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// The stream and timing events, alive as long as the last tensor whose memory is freed on the stream.
struct Stream {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Stream() {
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    if (previous != device) cudaSetDevice(device);
    if (stream != nullptr) {
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    if (previous >= 0 && previous != device) cudaSetDevice(previous);
  }
};

// A recorded CUDA graph, instantiated, launched on the backend's stream.
class CudaCapturedWork final : public CapturedWork {
 public:
  CudaCapturedWork(std::shared_ptr<Stream> s, cudaGraph_t graph, cudaGraphExec_t exec, int64_t kernels, int64_t other)
      : s_(std::move(s)), graph_(graph), exec_(exec), kernels_(kernels), other_(other) {}
  ~CudaCapturedWork() override {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
  }
  CudaCapturedWork(const CudaCapturedWork&) = delete;
  CudaCapturedWork& operator=(const CudaCapturedWork&) = delete;
  void replay() override {
    DeviceGuard guard(s_->device);
    check(cudaGraphLaunch(exec_, s_->stream), s_->device, "cudaGraphLaunch");
  }
  int64_t kernels() const override { return kernels_; }
  int64_t other_nodes() const override { return other_; }

 private:
  std::shared_ptr<Stream> s_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  int64_t kernels_ = 0, other_ = 0;
};

void* raw(const Tensor& t) { return t.raw(); }

class CudaGraphOps final : public GraphOps {
 public:
  explicit CudaGraphOps(int device) : device_{Device::Kind::cuda, device}, s_(std::make_shared<Stream>()) {
    s_->device = device;
    DeviceGuard guard(device);
    check(cudaStreamCreateWithFlags(&s_->stream, cudaStreamNonBlocking), device, "cudaStreamCreate");
    check(cudaEventCreate(&s_->start), device, "cudaEventCreate");
    check(cudaEventCreate(&s_->stop), device, "cudaEventCreate");
  }

  Device device() const override { return device_; }
  std::string device_name() const override {
    const auto& devices = kernels::cuda_device_status().devices;
    const auto i = static_cast<std::size_t>(device_.index);
    return i < devices.size() ? "GPU " + devices[i] : fmt::format("GPU {}", device_.index);
  }
  std::string nongemm_path() const override { return "qjoule:cuda"; }

  // Activations: stream-ordered (cudaMallocAsync's pool reuses them from one forward to the next).
  Tensor empty(DType dtype, int64_t size, std::string_view what) override {
    DeviceGuard guard(device_.index);
    void* data = nullptr;
    if (size > 0)
      check(cudaMallocAsync(&data, static_cast<std::size_t>(size) * 4, s_->stream), device_.index,
            fmt::format("cudaMallocAsync of {} ({} bytes)", what, size * 4));
    std::shared_ptr<void> owner(data, [s = s_](void* p) {
      if (p != nullptr) cudaFreeAsync(p, s->stream);
    });
    return Tensor(device_, dtype, data, size, std::move(owner));
  }

  // Parameters: cudaMalloc, copied before this returns.
  Tensor upload(std::vector<float> values, std::string_view what) override {
    return upload_raw(values.data(), DType::f32, static_cast<int64_t>(values.size()), sizeof(float), what);
  }

  Tensor upload_bf16(std::vector<uint16_t> bits, std::string_view what) override {
    return upload_raw(bits.data(), DType::bf16, static_cast<int64_t>(bits.size()), sizeof(uint16_t), what);
  }

  Tensor host_output(float* /*host*/, int64_t size, std::string_view what) override {
    return empty(DType::f32, size, what);
  }

  void synchronize() override {
    DeviceGuard guard(device_.index);
    check(cudaStreamSynchronize(s_->stream), device_.index, "cudaStreamSynchronize");
  }

  // Stream capture of `body` (thread-local mode: another thread's CUDA calls are not affected), then
  // the graph's nodes counted by type and the graph instantiated.
  bool records_work() const override { return true; }
  std::unique_ptr<CapturedWork> capture(const std::function<void()>& body) override {
    DeviceGuard guard(device_.index);
    check(cudaStreamBeginCapture(s_->stream, cudaStreamCaptureModeThreadLocal), device_.index,
          "cudaStreamBeginCapture");
    cudaGraph_t graph = nullptr;
    try {
      body();
    } catch (...) {
      if (cudaStreamEndCapture(s_->stream, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
      cudaGetLastError();  // the capture's error, if any, is the exception's
      throw;
    }
    check(cudaStreamEndCapture(s_->stream, &graph), device_.index, "recording the decode step (cudaStreamEndCapture)");
    std::size_t count = 0;
    cudaError_t err = cudaGraphGetNodes(graph, nullptr, &count);
    std::vector<cudaGraphNode_t> nodes(count);
    if (err == cudaSuccess && count > 0) err = cudaGraphGetNodes(graph, nodes.data(), &count);
    int64_t kernels = 0;
    for (std::size_t i = 0; err == cudaSuccess && i < count; ++i) {
      cudaGraphNodeType type{};
      err = cudaGraphNodeGetType(nodes[i], &type);
      if (type == cudaGraphNodeTypeKernel) ++kernels;
    }
    cudaGraphExec_t exec = nullptr;
    const char* step = "counting the recorded decode step's nodes (cudaGraphGetNodes)";
    if (err == cudaSuccess) {
      step = "instantiating the recorded decode step (cudaGraphInstantiate)";
      err = cudaGraphInstantiate(&exec, graph, 0);
    }
    if (err != cudaSuccess) {
      cudaGraphDestroy(graph);
      check(err, device_.index, step);
    }
    return std::make_unique<CudaCapturedWork>(s_, graph, exec, kernels, static_cast<int64_t>(count) - kernels);
  }

  void start_timer() override { check(cudaEventRecord(s_->start, s_->stream), device_.index, "cudaEventRecord"); }
  double stop_timer_ms() override {
    check(cudaEventRecord(s_->stop, s_->stream), device_.index, "cudaEventRecord");
    check(cudaEventSynchronize(s_->stop), device_.index, "cudaEventSynchronize");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, s_->start, s_->stop), device_.index, "cudaEventElapsedTime");
    return static_cast<double>(ms);
  }

 protected:
  void run_copy_in(const void* host, const Tensor& dst) override {
    DeviceGuard guard(device_.index);
    // Pageable host memory: the copy is staged before cudaMemcpyAsync returns, so `host` may be reused.
    check(cudaMemcpyAsync(raw(dst), host, dst.bytes(), cudaMemcpyHostToDevice, s_->stream), device_.index,
          "copying the input to the GPU");
  }

  void run_copy_out(const Tensor& src, void* host) override {
    DeviceGuard guard(device_.index);
    if (src.size() > 0)
      check(cudaMemcpyAsync(host, raw(src), src.bytes(), cudaMemcpyDeviceToHost, s_->stream), device_.index,
            "copying the output from the GPU");
    check(cudaStreamSynchronize(s_->stream), device_.index, "the forward");
    check(cudaGetLastError(), device_.index, "the forward");
  }

  void run_copy_rows(const Tensor& dst, int64_t dst_stride, const Tensor& src, int64_t src_stride, int64_t cols,
                     int64_t rows) override {
    const auto f = sizeof(float);
    check(cudaMemcpy2DAsync(dst.f32(), static_cast<std::size_t>(dst_stride) * f, src.f32(),
                            static_cast<std::size_t>(src_stride) * f, static_cast<std::size_t>(cols) * f,
                            static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice, s_->stream),
          device_.index, "copy_rows");
  }

  void run_linear(const kernels::Linear& layer, std::string_view name, const Tensor& x, int64_t m,
                  const Tensor& y) override {
    const auto* gpu = dynamic_cast<const kernels::CudaLinear*>(&layer);
    if (gpu == nullptr)
      fail("{}: a {} Linear built for the CPU, handed to GPU {}", name, layer.format(), device_.index);
    if (gpu->device() != device_.index)
      fail("{}: a Linear on GPU {}, handed to GPU {}", name, gpu->device(), device_.index);
    DeviceGuard guard(device_.index);
    gpu->forward_device(x.f32(), m, y.f32(), s_->stream);
  }

  void run_embedding_bf16(const Tensor& ids, const Tensor& word, float scale, int64_t hidden,
                          const Tensor& out) override {
    launched(cd::embedding_bf16_cuda(ids.i32(), word.bf16(), scale, ids.size(), hidden, out.f32(), s_->stream),
             "BF16 embeddings");
  }

  void run_embedding_sum(const Tensor& ids, const Tensor& word, const Tensor& position, const Tensor& token_type0,
                         int64_t seq, int64_t first_position, int64_t hidden, const Tensor& out) override {
    const int32_t* dynamic = position_device();
    const float* rows = position.empty()     ? nullptr
                        : dynamic != nullptr ? position.f32()
                                             : position.f32() + first_position * hidden;
    launched(
        cd::embedding_sum_cuda(ids.i32(), word.f32(), rows, dynamic, token_type0.empty() ? nullptr : token_type0.f32(),
                               ids.size(), seq, hidden, out.f32(), s_->stream),
        "embeddings");
  }

  void run_add_layer_norm(const Tensor& x, const Tensor& residual, int64_t rows, int64_t cols, const Tensor& gamma,
                          const Tensor& beta, float eps) override {
    launched(cd::add_layer_norm_cuda(x.f32(), residual.empty() ? nullptr : residual.f32(), rows, cols, gamma.f32(),
                                     beta.f32(), eps, s_->stream),
             "LayerNorm");
  }

  void run_attention(const Tensor& qkv, int64_t k_offset, int64_t v_offset, int64_t row_stride, const Tensor& mask,
                     int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, const Tensor& ctx) override {
    if (cd::attention_shared_bytes(seq, head_dim) > cd::kAttentionMaxSharedBytes)
      fail(
          "forward: sequence length {} with head_dim {} needs {} bytes of shared memory in the GPU attention "
          "kernel, more than its {}",
          seq, head_dim, cd::attention_shared_bytes(seq, head_dim), cd::kAttentionMaxSharedBytes);
    const float* q = qkv.f32();
    launched(cd::attention_cuda(q, q + k_offset, q + v_offset, row_stride, mask.i32(), false, batch, seq, heads,
                                head_dim, ctx.f32(), s_->stream),
             "attention");
  }

  void run_activation(Activation kind, const Tensor& x, int64_t n) override {
    float* p = x.f32();
    switch (kind) {
      case Activation::relu: return launched(cd::relu_cuda(p, n, s_->stream), "ReLU");
      case Activation::gelu_erf: return launched(cd::gelu_erf_cuda(p, n, s_->stream), "GELU");
      case Activation::gelu_tanh: return launched(cd::gelu_tanh_cuda(p, n, s_->stream), "GELU (tanh)");
      case Activation::tanh: return launched(cd::tanh_cuda(p, n, s_->stream), "tanh");
    }
  }

  void run_round_to_bf16(const Tensor& x, int64_t n) override {
    launched(cd::round_to_bf16_cuda(x.f32(), n, s_->stream), "BF16 rounding");
  }

  void run_rms_norm(const Tensor& x, int64_t rows, int64_t cols, const Tensor& gamma, float eps,
                    const Tensor& out) override {
    launched(cd::rms_norm_cuda(x.f32(), rows, cols, gamma.f32(), eps, out.f32(), s_->stream), "RMSNorm");
  }

  void run_head_rms_norm(const Tensor& x, int64_t n, int64_t row_stride, int64_t heads, int64_t head_dim,
                         const Tensor& gamma, float eps) override {
    launched(cd::head_rms_norm_cuda(x.f32(), n, row_stride, heads, head_dim, gamma.f32(), eps, s_->stream),
             "head RMSNorm");
  }

  void run_add_rms_norm(const Tensor& x, const Tensor& residual, int64_t rows, int64_t cols, const Tensor& gamma,
                        float eps, const Tensor& out) override {
    launched(cd::add_rms_norm_cuda(x.f32(), residual.f32(), rows, cols, gamma.f32(), eps, out.f32(), s_->stream),
             "residual add + RMSNorm");
  }

  void run_gated_mul_rows(Gate act, const Tensor& gate_up, int64_t rows, int64_t cols, const Tensor& out) override {
    if (act == Gate::gelu_tanh)
      return launched(cd::gelu_tanh_mul_rows_cuda(gate_up.f32(), rows, cols, out.f32(), s_->stream), "GeGLU");
    launched(cd::silu_mul_rows_cuda(gate_up.f32(), rows, cols, out.f32(), s_->stream), "SwiGLU");
  }

  void run_store_kv(const Tensor& k, const Tensor& v, int64_t src_stride, const Tensor& k_cache, const Tensor& v_cache,
                    int64_t kv_stride, int64_t past, int64_t n, int64_t cols) override {
    launched(cd::store_kv_cuda(k.f32(), v.f32(), src_stride, k_cache.f32(), v_cache.f32(), kv_stride, past,
                               position_device(), n, cols, s_->stream),
             "KV cache store");
  }

  void run_add(const Tensor& x, const Tensor& y, int64_t n) override {
    launched(cd::add_cuda(x.f32(), y.f32(), n, s_->stream), "residual add");
  }

  void run_add_scaled(const Tensor& x, const Tensor& y, float alpha, int64_t n, bool accumulate) override {
    launched(cd::add_scaled_cuda(x.f32(), y.f32(), alpha, n, accumulate, s_->stream), "weighted add of an expert");
  }

  void run_gated_mul(Gate act, const Tensor& gate, const Tensor& up, int64_t n) override {
    if (act == Gate::gelu_tanh) return launched(cd::gelu_tanh_mul_cuda(gate.f32(), up.f32(), n, s_->stream), "GeGLU");
    launched(cd::silu_mul_cuda(gate.f32(), up.f32(), n, s_->stream), "SwiGLU");
  }

  void run_rope(const Tensor& x, int64_t n_tokens, int64_t row_stride, int64_t heads, int64_t first_position,
                const Tensor& inv_freq, float attention_factor, int64_t head_dim) override {
    launched(cd::rope_cuda(x.f32(), n_tokens, row_stride, heads, inv_freq.size(), head_dim, first_position,
                           position_device(), inv_freq.f32(), attention_factor, s_->stream),
             "RoPE");
  }

  void run_rope_store_kv(const Tensor& qkv, int64_t n, int64_t row_stride, int64_t q_heads, int64_t kv_heads,
                         int64_t past, const Tensor& inv_freq, float attention_factor, const Tensor& k_cache,
                         const Tensor& v_cache, int64_t kv_stride) override {
    launched(
        cd::rope_store_kv_cuda(qkv.f32(), n, row_stride, q_heads, kv_heads, inv_freq.size(), past, position_device(),
                               inv_freq.f32(), attention_factor, k_cache.f32(), v_cache.f32(), kv_stride, s_->stream),
        "RoPE + KV cache store");
  }

  void run_causal_attention(const Tensor& q, int64_t q_stride, const Tensor& k_cache, const Tensor& v_cache,
                            int64_t kv_stride, int64_t past, int64_t n_new, int64_t heads, int64_t kv_heads,
                            int64_t head_dim, float scale, const Tensor& ctx, int64_t window) override {
    // Room for every key the cache holds when the position is read on the device.
    const int64_t max_keys = (k_cache.size() - kv_heads * head_dim) / kv_stride + 1;
    const int32_t* position = position_device();
    if (n_new == 1) {  // a decode step: split across blocks, the group's query heads sharing one K / V read
      const auto plan = cd::decode_attention_plan(
          heads, kv_heads, head_dim, cd::decode_attention_keys(past, position != nullptr, max_keys, window));
      if (plan.fits) {
        // Sized for the whole cache, so that it grows only for a longer cache; a recorded step may still
        // point at the old one, which is kept (not freed) while the backend lives.
        const int64_t need = cd::decode_attention_plan(heads, kv_heads, head_dim, max_keys).scratch_floats;
        if (attention_scratch_.size() < std::max(need, plan.scratch_floats)) {
          cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
          check(cudaStreamIsCapturing(s_->stream, &capturing), device_.index, "cudaStreamIsCapturing");
          if (capturing != cudaStreamCaptureStatusNone)
            fail("GPU {}: decode attention: its scratch would grow while the step is recorded", device_.index);
          if (!attention_scratch_.empty()) retired_scratch_.push_back(attention_scratch_);
          attention_scratch_ =
              empty(DType::f32, std::max(need, plan.scratch_floats), "the decode attention's partial sums");
        }
        return launched(cd::decode_attention_cuda(q.f32(), k_cache.f32(), v_cache.f32(), kv_stride, past, position,
                                                  max_keys, heads, kv_heads, head_dim, scale, attention_scratch_.f32(),
                                                  attention_scratch_.size(), ctx.f32(), window, s_->stream),
                        "decode attention");
      }
    }
    launched(
        cd::causal_attention_cuda(q.f32(), q_stride, k_cache.f32(), v_cache.f32(), kv_stride, past, position, max_keys,
                                  n_new, heads, kv_heads, head_dim, scale, ctx.f32(), window, s_->stream),
        "causal attention");
  }

 private:
  // `size` elements of `element_bytes` each from the host into new device memory, copied before this returns.
  Tensor upload_raw(const void* host, DType dtype, int64_t size, std::size_t element_bytes, std::string_view what) {
    if (size == 0) return Tensor(device_, dtype, nullptr, 0, nullptr);
    DeviceGuard guard(device_.index);
    void* data = nullptr;
    const std::size_t bytes = static_cast<std::size_t>(size) * element_bytes;
    check(cudaMalloc(&data, bytes), device_.index, fmt::format("cudaMalloc of {} ({} bytes)", what, bytes));
    std::shared_ptr<void> owner(data, [](void* p) { cudaFree(p); });
    check(cudaMemcpy(data, host, bytes, cudaMemcpyHostToDevice), device_.index,
          fmt::format("copying {} to the GPU", what));
    return Tensor(device_, dtype, data, size, std::move(owner));
  }

  const int32_t* position_device() const { return position_source().empty() ? nullptr : position_source().i32(); }

  void launched(const std::string& error, std::string_view what) const {
    if (!error.empty()) fail("GPU {}: {}: {}", device_.index, what, error);
  }

  Device device_;
  std::shared_ptr<Stream> s_;
  Tensor attention_scratch_;             // the decode attention's partial sums, grown as needed
  std::vector<Tensor> retired_scratch_;  // earlier ones: a recorded decode step may read them
};

}  // namespace

std::shared_ptr<GraphOps> make_cuda_graph_ops(int device) {
  const auto& status = kernels::cuda_device_status();
  if (!status.usable) fail("GPU {}: no usable GPU: {}", device, status.reason);
  if (device < 0 || device >= status.device_count)
    fail("GPU {} does not exist; this machine has {} (0 to {})", device, status.device_count, status.device_count - 1);
  return std::make_shared<CudaGraphOps>(device);
}

}  // namespace qjoule::model
