// EncoderClassifierCuda (qjoule/model/encoder_classifier_cuda.h): EncoderClassifier::forward, operation
// for operation, on one GPU. Built only with the CUDA backend (encoder_classifier_cuda_stub.cpp
// otherwise).
#include "qjoule/model/encoder_classifier_cuda.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include "kernels/cuda/encoder_ops_cuda.h"
#include "model/encoder_classifier_cuda_common.h"
#include "qjoule/error.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/linear_cuda.h"

namespace qjoule::model {
namespace {

using cuda_model_detail::fused_name;
using cuda_model_detail::fuses_qkv;

void check(cudaError_t err, int device, const std::string& what) {
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

cudaError_t malloc_device(void** ptr, std::size_t bytes) { return cudaMalloc(ptr, bytes); }
cudaError_t malloc_pinned(void** ptr, std::size_t bytes) { return cudaMallocHost(ptr, bytes); }

// Bytes from a CUDA allocator, freed on destruction: device memory (cudaMalloc) or the pinned host
// staging area of the explicit copies (cudaMallocHost).
template <cudaError_t (*Alloc)(void**, std::size_t), cudaError_t (*Free)(void*)>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  CudaBuffer(std::size_t bytes, int device, const std::string& what) {
    if (bytes == 0) return;
    check(Alloc(&ptr_, bytes), device, (Alloc == malloc_pinned ? "cudaMallocHost of " : "cudaMalloc of ") + what);
    bytes_ = bytes;
  }
  ~CudaBuffer() {
    if (ptr_ != nullptr) Free(ptr_);
  }
  CudaBuffer(CudaBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  CudaBuffer& operator=(CudaBuffer&& o) noexcept {
    if (this != &o) {
      if (ptr_ != nullptr) Free(ptr_);
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;

  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

using DeviceBuffer = CudaBuffer<malloc_device, cudaFree>;
using PinnedBuffer = CudaBuffer<malloc_pinned, cudaFreeHost>;

DeviceBuffer upload(const std::vector<float>& host, int device, const std::string& what) {
  DeviceBuffer buffer(host.size() * sizeof(float), device, what);
  if (!host.empty())
    check(cudaMemcpy(buffer.as<void>(), host.data(), buffer.bytes(), cudaMemcpyHostToDevice), device,
          "cudaMemcpy of " + what + " to the GPU");
  return buffer;
}

constexpr int64_t kAlignFloats = 64;  // 256 bytes: every slice of the workspace starts aligned
constexpr int64_t align_floats(int64_t n) { return (n + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

}  // namespace

struct EncoderClassifierCuda::Impl {
  struct NormParams {
    DeviceBuffer gamma, beta;
  };
  struct Layer {
    std::unique_ptr<kernels::CudaLinear> qkv;      // Q, K and V as one Linear [3·hidden], when fused
    std::unique_ptr<kernels::CudaLinear> q, k, v;  // otherwise
    std::unique_ptr<kernels::CudaLinear> o, ffn_in, ffn_out;
    NormParams attn_norm, ffn_norm;
  };
  struct NamedLinear {
    std::string name;
    const kernels::CudaLinear* linear;
    bool fused_qkv = false;
  };
  // Where each activation lives in the workspace, for `rows` = batch · seq rows.
  struct Slices {
    int32_t *ids = nullptr, *mask = nullptr;
    float *x = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *ctx = nullptr, *tmp = nullptr, *ffn = nullptr;
    float *cls = nullptr, *pooled = nullptr, *logits = nullptr;
  };

  int device = 0;
  EncoderConfig config;
  DeviceBuffer word, position, token_type0;
  NormParams embedding_norm;
  std::vector<Layer> layers;
  std::unique_ptr<kernels::CudaLinear> head_dense, classifier;
  std::vector<NamedLinear> linears;
  std::size_t parameter_bytes = 0;  // embeddings and norms

  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;

  mutable std::mutex mutex;  // one forward at a time: they share the workspace and the stream
  DeviceBuffer workspace;
  PinnedBuffer staging_in, staging_out;
  int64_t workspace_rows = 0, workspace_batch = 0;

  ~Impl() {
    if (stream == nullptr && start == nullptr && stop == nullptr) return;  // never reached the GPU
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

  void launched(const std::string& error, const std::string& what) const {
    if (!error.empty()) fail("GPU {}: {}: {}", device, what, error);
  }

  // Slice offsets (in floats, each aligned) for `rows` rows in `batch` sequences; returns the total.
  int64_t layout(int64_t rows, int64_t batch, Slices* s, char* base) const {
    const int64_t h = config.hidden_size, f = config.intermediate_size;
    int64_t at = 0;
    const auto take = [&](int64_t floats) {
      const int64_t here = at;
      at += align_floats(floats);
      return here;
    };
    const int64_t ids = take(rows), mask = take(rows), x = take(rows * h);
    const int64_t qkv = take(3 * align_floats(rows * h));  // fused [rows, 3h], or three [rows, h]
    const int64_t ctx = take(rows * h), tmp = take(rows * h), ffn = take(rows * f);
    const int64_t cls = take(batch * h), pooled = take(batch * h), logits = take(batch * config.num_labels);
    if (s != nullptr) {
      const auto f32 = [base](int64_t off) { return reinterpret_cast<float*>(base + off * 4); };
      s->ids = reinterpret_cast<int32_t*>(base + ids * 4);
      s->mask = reinterpret_cast<int32_t*>(base + mask * 4);
      s->x = f32(x);
      s->q = f32(qkv);
      s->k = f32(qkv + align_floats(rows * h));
      s->v = f32(qkv + 2 * align_floats(rows * h));
      s->ctx = f32(ctx);
      s->tmp = f32(tmp);
      s->ffn = f32(ffn);
      s->cls = f32(cls);
      s->pooled = f32(pooled);
      s->logits = f32(logits);
    }
    return at;
  }

  // The workspace for `rows` rows in `batch` sequences, grown when needed (never shrunk).
  Slices reserve(int64_t rows, int64_t batch) {
    if (rows > workspace_rows || batch > workspace_batch) {
      const int64_t new_rows = std::max(rows, workspace_rows), new_batch = std::max(batch, workspace_batch);
      check(cudaStreamSynchronize(stream), device, "waiting for the previous forward");
      workspace = DeviceBuffer();
      workspace = DeviceBuffer(static_cast<std::size_t>(layout(new_rows, new_batch, nullptr, nullptr)) * 4, device,
                               "the activation workspace");
      staging_in = PinnedBuffer(static_cast<std::size_t>(2 * new_rows) * sizeof(int32_t), device, "the ids and mask");
      staging_out =
          PinnedBuffer(static_cast<std::size_t>(new_batch * config.num_labels) * sizeof(float), device, "the logits");
      workspace_rows = new_rows;
      workspace_batch = new_batch;
    }
    Slices s;
    layout(workspace_rows, workspace_batch, &s, workspace.as<char>());
    return s;
  }

  void linear(const kernels::CudaLinear& l, const float* x, int64_t m, float* y) const {
    l.forward_device(x, m, y, stream);
  }

  void layer_norm(float* x, const float* residual, int64_t rows, const NormParams& n, const char* what) const {
    launched(kernels::cuda_detail::add_layer_norm_cuda(x, residual, rows, config.hidden_size, n.gamma.as<float>(),
                                                       n.beta.as<float>(), config.layer_norm_eps, stream),
             what);
  }

  // Everything between the input copy and the output copy, enqueued on `stream`.
  void enqueue(const Slices& s, int64_t batch, int64_t seq) const {
    namespace cd = kernels::cuda_detail;
    const int64_t h = config.hidden_size, f = config.intermediate_size, rows = batch * seq;
    launched(cd::embedding_sum_cuda(s.ids, word.as<float>(), position.as<float>(), token_type0.as<float>(), rows, seq,
                                    h, s.x, stream),
             "embeddings");
    layer_norm(s.x, nullptr, rows, embedding_norm, "embedding LayerNorm");
    for (const Layer& layer : layers) {
      int64_t stride = h;
      const float *q = s.q, *k = s.k, *v = s.v;
      if (layer.qkv) {
        linear(*layer.qkv, s.x, rows, s.q);
        k = s.q + h;
        v = s.q + 2 * h;
        stride = 3 * h;
      } else {
        linear(*layer.q, s.x, rows, s.q);
        linear(*layer.k, s.x, rows, s.k);
        linear(*layer.v, s.x, rows, s.v);
      }
      launched(cd::attention_cuda(q, k, v, stride, s.mask, false, batch, seq, config.num_heads, config.head_dim(),
                                  s.ctx, stream),
               "attention");
      linear(*layer.o, s.ctx, rows, s.tmp);
      layer_norm(s.x, s.tmp, rows, layer.attn_norm, "attention LayerNorm");
      linear(*layer.ffn_in, s.x, rows, s.ffn);
      launched(config.activation == "relu" ? cd::relu_cuda(s.ffn, rows * f, stream)
                                           : cd::gelu_erf_cuda(s.ffn, rows * f, stream),
               "FFN activation");
      linear(*layer.ffn_out, s.ffn, rows, s.tmp);
      layer_norm(s.x, s.tmp, rows, layer.ffn_norm, "FFN LayerNorm");
    }
    // Head on the first ([CLS]) row of each sequence.
    const auto row_bytes = static_cast<std::size_t>(h) * sizeof(float);
    check(cudaMemcpy2DAsync(s.cls, row_bytes, s.x, row_bytes * static_cast<std::size_t>(seq), row_bytes,
                            static_cast<std::size_t>(batch), cudaMemcpyDeviceToDevice, stream),
          device, "gathering the [CLS] rows");
    linear(*head_dense, s.cls, batch, s.pooled);
    launched(config.arch == EncoderArch::Bert ? cd::tanh_cuda(s.pooled, batch * h, stream)
                                              : cd::relu_cuda(s.pooled, batch * h, stream),
             "head activation");
    linear(*classifier, s.pooled, batch, s.logits);
  }

  // The whole forward, events around it when `timed`; returns the milliseconds (0 when not timed).
  double run(const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq, float* logits, bool timed) {
    cuda_model_detail::check_forward_inputs(config, ids, batch, seq);
    const std::size_t shared = kernels::cuda_detail::attention_shared_bytes(seq, config.head_dim());
    if (shared > kernels::cuda_detail::kAttentionMaxSharedBytes)
      fail(
          "forward: sequence length {} with head_dim {} needs {} bytes of shared memory in the GPU attention "
          "kernel, more than its {}",
          seq, config.head_dim(), shared, kernels::cuda_detail::kAttentionMaxSharedBytes);
    const int64_t rows = batch * seq;
    const auto labels = static_cast<std::size_t>(config.num_labels);
    std::lock_guard<std::mutex> lock(mutex);
    DeviceGuard guard(device);
    const Slices s = reserve(rows, batch);
    int32_t* in = staging_in.as<int32_t>();
    const auto id_bytes = static_cast<std::size_t>(rows) * sizeof(int32_t);
    std::memcpy(in, ids, id_bytes);
    std::memcpy(in + rows, mask, id_bytes);
    const std::string shape = fmt::format("forward of batch {} × sequence {}", batch, seq);
    if (timed) check(cudaEventRecord(start, stream), device, "cudaEventRecord");
    check(cudaMemcpyAsync(s.ids, in, id_bytes, cudaMemcpyHostToDevice, stream), device, "copying the ids to the GPU");
    check(cudaMemcpyAsync(s.mask, in + rows, id_bytes, cudaMemcpyHostToDevice, stream), device,
          "copying the mask to the GPU");
    enqueue(s, batch, seq);
    check(cudaMemcpyAsync(staging_out.as<void>(), s.logits, static_cast<std::size_t>(batch) * labels * sizeof(float),
                          cudaMemcpyDeviceToHost, stream),
          device, "copying the logits from the GPU");
    if (timed) check(cudaEventRecord(stop, stream), device, "cudaEventRecord");
    check(cudaStreamSynchronize(stream), device, shape);
    check(cudaGetLastError(), device, shape);
    std::memcpy(logits, staging_out.as<void>(), static_cast<std::size_t>(batch) * labels * sizeof(float));
    if (!timed) return 0.0;
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start, stop), device, "cudaEventElapsedTime");
    return static_cast<double>(ms);
  }
};

EncoderClassifierCuda::EncoderClassifierCuda(const EncoderParams& params, const CudaLinearFormats& formats, int device)
    : config_(params.config), device_(device), impl_(std::make_unique<Impl>()) {
  const auto& status = kernels::cuda_device_status();
  if (!status.usable) fail("GPU model on GPU {}: no usable GPU: {}", device, status.reason);
  if (device < 0 || device >= status.device_count)
    fail("GPU model: GPU {} does not exist; this machine has {} (0 to {})", device, status.device_count,
         status.device_count - 1);
  if (config_.num_heads <= 0 || config_.hidden_size % config_.num_heads != 0)
    fail("GPU model: hidden size {} is not a multiple of the {} attention heads", config_.hidden_size,
         config_.num_heads);
  Impl& m = *impl_;
  m.device = device;
  m.config = config_;
  DeviceGuard guard(device);

  const auto build = [&](const LinearParams& p, bool in_block) {
    auto linear =
        kernels::make_linear_cuda(formats(p, in_block), p.weight.data(), p.bias.empty() ? nullptr : p.bias.data(),
                                  p.out_features, p.in_features, p.name, device);
    m.linears.push_back({p.name, linear.get()});
    return linear;
  };
  const auto upload_norm = [&](const LayerNormParams& n) {
    Impl::NormParams out;
    out.gamma = upload(n.gamma, device, n.name + ".weight");
    out.beta = upload(n.beta, device, n.name + ".bias");
    m.parameter_bytes += out.gamma.bytes() + out.beta.bytes();
    return out;
  };

  const int64_t h = config_.hidden_size;
  for (const EncoderLayerParams& lp : params.layers) {
    Impl::Layer layer;
    const auto fq = formats(lp.q, true), fk = formats(lp.k, true), fv = formats(lp.v, true);
    if (lp.q.out_features == h && lp.k.out_features == h && lp.v.out_features == h &&
        lp.k.in_features == lp.q.in_features && lp.v.in_features == lp.q.in_features && fuses_qkv(fq, fk, fv)) {
      // [q; k; v] rows, biases likewise (zeros for a part without one): as EncoderClassifier fuses them.
      std::vector<float> weight, bias;
      const bool any_bias = !lp.q.bias.empty() || !lp.k.bias.empty() || !lp.v.bias.empty();
      for (const LinearParams* p : {&lp.q, &lp.k, &lp.v}) {
        weight.insert(weight.end(), p->weight.begin(), p->weight.end());
        if (any_bias) {
          if (p->bias.empty()) {
            bias.insert(bias.end(), static_cast<std::size_t>(p->out_features), 0.0f);
          } else {
            bias.insert(bias.end(), p->bias.begin(), p->bias.end());
          }
        }
      }
      const std::string name = fused_name({lp.q.name, lp.k.name, lp.v.name});
      layer.qkv = kernels::make_linear_cuda(fq, weight.data(), any_bias ? bias.data() : nullptr, 3 * h,
                                            lp.q.in_features, name, device);
      m.linears.push_back({name, layer.qkv.get(), true});
    } else {
      layer.q = build(lp.q, true);
      layer.k = build(lp.k, true);
      layer.v = build(lp.v, true);
    }
    layer.o = build(lp.o, true);
    layer.ffn_in = build(lp.ffn_in, true);
    layer.ffn_out = build(lp.ffn_out, true);
    layer.attn_norm = upload_norm(lp.attn_norm);
    layer.ffn_norm = upload_norm(lp.ffn_norm);
    m.layers.push_back(std::move(layer));
  }
  m.head_dense = build(params.head_dense, false);
  m.classifier = build(params.classifier, false);

  m.word = upload(params.word_embeddings, device, "the word embeddings");
  m.position = upload(params.position_embeddings, device, "the position embeddings");
  if (!params.token_type_embeddings.empty()) {
    // forward() adds token type 0 to every token, as the CPU model does: only that row is needed.
    const std::vector<float> row0(params.token_type_embeddings.begin(),
                                  params.token_type_embeddings.begin() + static_cast<long>(h));
    m.token_type0 = upload(row0, device, "token type embedding 0");
  }
  m.parameter_bytes += m.word.bytes() + m.position.bytes() + m.token_type0.bytes();
  m.embedding_norm = upload_norm(params.embedding_norm);

  check(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking), device, "cudaStreamCreate");
  check(cudaEventCreate(&m.start), device, "cudaEventCreate");
  check(cudaEventCreate(&m.stop), device, "cudaEventCreate");
}

EncoderClassifierCuda::~EncoderClassifierCuda() = default;

void EncoderClassifierCuda::forward(const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq,
                                    float* logits) const {
  impl_->run(ids, mask, batch, seq, logits, false);
}

double EncoderClassifierCuda::forward_timed(const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq,
                                            float* logits) const {
  return impl_->run(ids, mask, batch, seq, logits, true);
}

void EncoderClassifierCuda::synchronize() const { kernels::synchronize_cuda_device(device_); }

std::string EncoderClassifierCuda::device_name() const {
  const auto& devices = kernels::cuda_device_status().devices;
  return device_ < static_cast<int>(devices.size()) ? devices[static_cast<std::size_t>(device_)]
                                                    : fmt::format("{}", device_);
}

std::vector<LinearReport> EncoderClassifierCuda::linear_reports() const {
  std::vector<LinearReport> out;
  for (const auto& [name, linear, fused] : impl_->linears) {
    out.push_back({name, linear->format(), linear->kernel_path(), linear->bytes_held(),
                   static_cast<std::size_t>(linear->out_features() * (linear->in_features() + 1)) * sizeof(float)});
  }
  return out;
}

std::map<std::string, int> EncoderClassifierCuda::kernel_path_counts() const {
  std::map<std::string, int> counts;
  for (const auto& [name, linear, fused] : impl_->linears)
    ++counts[linear->format() + " " + linear->kernel_path() + (fused ? kFusedQkvMark : "")];
  return counts;
}

std::string EncoderClassifierCuda::nongemm_path() const {
  return fmt::format("qjoule:cuda:embedding_sum+add_layer_norm+attention(block per query)+{}+{}",
                     config_.activation == "relu" ? "relu" : "gelu_erf",
                     config_.arch == EncoderArch::Bert ? "tanh" : "relu");
}

std::size_t EncoderClassifierCuda::bytes_held() const {
  std::size_t total = impl_->parameter_bytes;
  for (const auto& l : impl_->linears) total += l.linear->bytes_held();
  return total;
}

std::size_t EncoderClassifierCuda::fp32_bytes() const {
  std::size_t total = bytes_held();
  for (const auto& r : linear_reports()) total = total - r.bytes_held + r.fp32_bytes;
  return total;
}

std::size_t EncoderClassifierCuda::workspace_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->workspace.bytes();
}

}  // namespace qjoule::model
