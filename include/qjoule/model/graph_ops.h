// The operations a model's forward graph is written against, with one implementation per device:
// the graph (EncoderClassifier::forward) is written once, and a backend contributes only memory and
// kernels. The CPU backend runs qjoule/kernels/encoder_ops.h and the CPU Linears; the CUDA backend
// runs the kernels of src/kernels/cuda on one stream and the CudaLinears (qjoule/kernels/linear_cuda.h).
// So every CPU test of a graph tests the logic that the GPU runs, and the GPU adds kernels only.
//
// Tensors know their device and their element type; every operation checks that what it is handed
// lives on its backend's device, has the type it reads and holds the elements it touches, so a graph
// that mixes devices or miscounts a shape fails in the CPU tests with one line, not on a GPU later.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qjoule/kernels/linear.h"

namespace qjoule::model {

struct Device {
  enum class Kind { cpu, cuda };
  Kind kind = Kind::cpu;
  int index = 0;  // the GPU, for cuda
  bool operator==(const Device&) const = default;
};
std::string to_string(const Device& device);  // "cpu", "cuda:0"

// bf16: 16-bit words as stored by a BF16 checkpoint (the embeddings a decoder holds as stored).
enum class DType { f32, i32, bf16 };

// A view of `size` elements of one type on one device, sharing ownership of the memory it views
// (a slice keeps the whole allocation alive). Only the operations of the tensor's backend read it.
class Tensor {
 public:
  Tensor() = default;
  Tensor(Device device, DType dtype, void* data, int64_t size, std::shared_ptr<void> owner)
      : device_(device), dtype_(dtype), data_(data), size_(size), owner_(std::move(owner)) {}

  Device device() const { return device_; }
  DType dtype() const { return dtype_; }
  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::size_t bytes() const { return static_cast<std::size_t>(size_) * element_bytes(); }
  std::size_t element_bytes() const { return dtype_ == DType::bf16 ? 2 : 4; }
  // The elements, for the backend's kernels; an error when the tensor holds the other type.
  float* f32() const;
  int32_t* i32() const;
  uint16_t* bf16() const;
  void* raw() const { return data_; }
  // Elements [offset, offset + count): an error outside the tensor.
  Tensor slice(int64_t offset, int64_t count) const;

 private:
  Device device_;
  DType dtype_ = DType::f32;
  void* data_ = nullptr;
  int64_t size_ = 0;
  std::shared_ptr<void> owner_;
};

enum class Activation { relu, gelu_erf, gelu_tanh, tanh };

// The activation of a gated (GLU) MLP's gate: SwiGLU (Llama, Qwen) or GeGLU with gelu_tanh (Gemma).
enum class Gate { silu, gelu_tanh };

// Work a backend recorded once (GraphOps::capture) and runs again as a whole: on the GPU, one CUDA
// graph launched with one call.
class CapturedWork {
 public:
  virtual ~CapturedWork() = default;
  // Enqueues the recorded work again, with the memory it recorded (read at run time, not at capture).
  virtual void replay() = 0;
  virtual int64_t kernels() const = 0;      // kernel launches in the recording
  virtual int64_t other_nodes() const = 0;  // copies, memsets and any other recorded operations
};

// What a graph needs of a device. Shapes as in qjoule/kernels/encoder_ops.h and decoder_ops.h;
// row-major; in place where the CPU kernel is. Every call may return before the device is done (the
// CUDA backend enqueues on its stream); copy_out waits.
//
// The operations are not virtual: each checks its arguments here, once for every backend (device,
// element type, the elements it touches: check_tensor), then calls the backend's run_* kernel. A
// backend implements memory, the timer and the run_* functions, nothing else.
class GraphOps {
 public:
  virtual ~GraphOps() = default;
  virtual Device device() const = 0;
  // "CPU" or "GPU 0: NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)".
  virtual std::string device_name() const = 0;
  // The kernels the operations other than the Linears run, e.g. "qjoule:cpu:avx512" or "qjoule:cuda".
  virtual std::string nongemm_path() const = 0;

  // ---- memory ----
  // `size` uninitialized elements; `what` names them in an allocation error.
  virtual Tensor empty(DType dtype, int64_t size, std::string_view what) = 0;
  // The values on the device (the CPU backend keeps the vector itself: no copy).
  virtual Tensor upload(std::vector<float> values, std::string_view what) = 0;
  // BF16 words (bf16_bits) on the device, as upload.
  virtual Tensor upload_bf16(std::vector<uint16_t> bits, std::string_view what) = 0;
  // Where a forward writes `size` FP32 results bound for `host`: on the CPU the host memory itself (so
  // that copy_out(t, host) copies nothing), elsewhere a device tensor that copy_out brings back.
  virtual Tensor host_output(float* host, int64_t size, std::string_view what) = 0;
  // host → dst (dst.size() elements of dst's type); the host memory may be reused once this returns.
  void copy_in(const void* host, const Tensor& dst);
  // src → host (src.size() elements), after everything enqueued before it: returns when host holds them.
  void copy_out(const Tensor& src, void* host);
  // dst[r, 0:cols] = src[r, 0:cols] for r < rows, rows `dst_stride` and `src_stride` elements apart.
  void copy_rows(const Tensor& dst, int64_t dst_stride, const Tensor& src, int64_t src_stride, int64_t cols,
                 int64_t rows);
  // Waits until everything enqueued is done.
  virtual void synchronize() = 0;

  // Records what `body` enqueues, without running it, as one piece of work to replay; nullptr where
  // the backend records nothing (the CPU), and then `body` has not run either. Memory must not be
  // allocated or freed inside `body`. A recording that fails is one line naming why.
  virtual std::unique_ptr<CapturedWork> capture(const std::function<void()>& body);
  // Whether capture records (the GPU): a model asks only then.
  virtual bool records_work() const { return false; }

  // While `position` (one i32 on this device) is set, the operations that take a position
  // (embedding_sum's first_position, rope's first_position, store_kv's and causal_attention's `past`)
  // read it from there when they run, and their own argument only sizes the checks: one recorded
  // decode step then serves every position. An empty tensor goes back to the arguments.
  void set_position_source(const Tensor& position);
  const Tensor& position_source() const { return position_source_; }

  // ---- operations ----
  // y[m, out] = x[m, in] · Wᵀ + b with a Linear this backend can run (the CPU Linears; a CudaLinear on
  // this GPU); `name` names the layer in an error.
  void linear(const kernels::Linear& layer, std::string_view name, const Tensor& x, int64_t m, const Tensor& y);
  // out[i, :] = word[ids[i], :] + position[first_position + i % seq, :] (when position is not empty)
  // (+ token_type0[:] when not empty), i < ids.size(). The ids must already lie in the vocabulary.
  void embedding_sum(const Tensor& ids, const Tensor& word, const Tensor& position, const Tensor& token_type0,
                     int64_t seq, int64_t first_position, int64_t hidden, const Tensor& out);
  // out[i, :] = word[ids[i], :] · scale, i < ids.size(), with word [vocab, hidden] held in BF16 (a BF16
  // checkpoint's embeddings as stored): each value widened to FP32 exactly, then scaled (Gemma's
  // sqrt(hidden); 1 elsewhere). The ids must already lie in the vocabulary.
  void embedding_bf16(const Tensor& ids, const Tensor& word, float scale, int64_t hidden, const Tensor& out);
  // x[r, :] = LayerNorm(x[r, :] + residual[r, :]) · gamma + beta, in place (residual may be empty).
  void add_layer_norm(const Tensor& x, const Tensor& residual, int64_t rows, int64_t cols, const Tensor& gamma,
                      const Tensor& beta, float eps);
  // Multi-head self-attention with a key padding mask [batch, seq]: kernels::attention_f32. q, k and v
  // are views into one tensor `qkv` at element offsets 0, k_offset and v_offset, rows `row_stride` apart.
  void attention(const Tensor& qkv, int64_t k_offset, int64_t v_offset, int64_t row_stride, const Tensor& mask,
                 int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, const Tensor& ctx);
  // In place over the first n elements of x.
  void activation(Activation kind, const Tensor& x, int64_t n);
  // Rounds the first n elements to BF16 in place (kernels::round_to_bf16_f32): the emulated BF16
  // activations of --act-dtype bf16.
  void round_to_bf16(const Tensor& x, int64_t n);

  // ---- decoder operations (qjoule/kernels/decoder_ops.h) ----
  // out[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) · gamma; out may be x.
  void rms_norm(const Tensor& x, int64_t rows, int64_t cols, const Tensor& gamma, float eps, const Tensor& out);
  // x[r, :] += residual[r, :], then out[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) · gamma: the residual
  // add and the next RMSNorm in one pass. out may be x or the residual.
  void add_rms_norm(const Tensor& x, const Tensor& residual, int64_t rows, int64_t cols, const Tensor& gamma, float eps,
                    const Tensor& out);
  // The RMSNorm of each head of n rows, in place (kernels::head_rms_norm_f32: Qwen3's q_norm / k_norm):
  // row t at x + t·row_stride holds `heads` heads of head_dim values; gamma [head_dim].
  void head_rms_norm(const Tensor& x, int64_t n, int64_t row_stride, int64_t heads, int64_t head_dim,
                     const Tensor& gamma, float eps);
  // x[i] += y[i] for i < n: the residual add.
  void add(const Tensor& x, const Tensor& y, int64_t n);
  // x[i] = alpha·y[i] (accumulate false: x is not read) or x[i] += alpha·y[i], i < n: an expert's output rows
  // weighted into a mixture's output.
  void add_scaled(const Tensor& x, const Tensor& y, float alpha, int64_t n, bool accumulate);
  // gate[i] = act(gate[i]) · up[i] for i < n (act: silu for SwiGLU, gelu_tanh for GeGLU).
  void gated_mul(Gate act, const Tensor& gate, const Tensor& up, int64_t n);
  void silu_mul(const Tensor& gate, const Tensor& up, int64_t n) { gated_mul(Gate::silu, gate, up, n); }
  // The same of a fused gate|up product: gate_up [rows, 2·cols] holds [gate | up] per row, out [rows, cols]
  // = act(gate) · up (element::silu_mul / element::gelu_tanh, as gated_mul).
  void gated_mul_rows(Gate act, const Tensor& gate_up, int64_t rows, int64_t cols, const Tensor& out);
  void silu_mul_rows(const Tensor& gate_up, int64_t rows, int64_t cols, const Tensor& out) {
    gated_mul_rows(Gate::silu, gate_up, rows, cols, out);
  }
  // The n new tokens' keys and values into the caches: k_cache[past + t, 0:cols] = k[t, 0:cols] (rows
  // `src_stride` and `kv_stride` elements apart), and the same for v.
  void store_kv(const Tensor& k, const Tensor& v, int64_t src_stride, const Tensor& k_cache, const Tensor& v_cache,
                int64_t kv_stride, int64_t past, int64_t n, int64_t cols);
  // Rotary embedding in place, Hugging Face's rotate_half convention (kernels::apply_rope_f32): x
  // [n_tokens, row_stride], `heads` heads of 2·inv_freq.size() columns, token t at first_position + t,
  // cos and sin multiplied by attention_factor.
  // head_dim > 2·inv_freq.size(): only each head's first 2·inv_freq.size() values turn (a partial rotary
  // factor); 0: heads of 2·inv_freq.size().
  void rope(const Tensor& x, int64_t n_tokens, int64_t row_stride, int64_t heads, int64_t first_position,
            const Tensor& inv_freq, float attention_factor, int64_t head_dim = 0);
  // rope over the q | k heads of fused rows qkv [n, row_stride] = [q (q_heads heads) | k (kv_heads) | v
  // (kv_heads)], each head 2·inv_freq.size() columns, token t at past + t; then store_kv of their k and v
  // parts into the caches at past (rows kv_stride apart). The same values as the two operations; one
  // kernel on the GPU.
  void rope_store_kv(const Tensor& qkv, int64_t n, int64_t row_stride, int64_t q_heads, int64_t kv_heads, int64_t past,
                     const Tensor& inv_freq, float attention_factor, const Tensor& k_cache, const Tensor& v_cache,
                     int64_t kv_stride);
  // Causal grouped-query attention of n_new tokens over a KV cache (kernels::causal_attention_f32): q
  // [n_new, q_stride]; k_cache, v_cache [>= past + n_new, kv_stride], the new tokens' rows written;
  // ctx [n_new, heads·head_dim]. window > 0: each token reads its last `window` keys only (a sliding window).
  void causal_attention(const Tensor& q, int64_t q_stride, const Tensor& k_cache, const Tensor& v_cache,
                        int64_t kv_stride, int64_t past, int64_t n_new, int64_t heads, int64_t kv_heads,
                        int64_t head_dim, float scale, const Tensor& ctx, int64_t window = 0);

  // ---- timing ----
  // Marks the start of a timed region, then returns the milliseconds from that mark to everything
  // enqueued so far being done (CUDA events on the GPU, the steady clock on the CPU).
  virtual void start_timer() = 0;
  virtual double stop_timer_ms() = 0;

 protected:
  // The backend's kernels, called by the operations above once their arguments are checked: every
  // tensor on device(), of the right type, holding what is touched. Pointers come from f32() / i32().
  virtual void run_copy_in(const void* host, const Tensor& dst) = 0;
  virtual void run_copy_out(const Tensor& src, void* host) = 0;
  virtual void run_copy_rows(const Tensor& dst, int64_t dst_stride, const Tensor& src, int64_t src_stride, int64_t cols,
                             int64_t rows) = 0;
  virtual void run_linear(const kernels::Linear& layer, std::string_view name, const Tensor& x, int64_t m,
                          const Tensor& y) = 0;
  virtual void run_embedding_sum(const Tensor& ids, const Tensor& word, const Tensor& position,
                                 const Tensor& token_type0, int64_t seq, int64_t first_position, int64_t hidden,
                                 const Tensor& out) = 0;
  virtual void run_embedding_bf16(const Tensor& ids, const Tensor& word, float scale, int64_t hidden,
                                  const Tensor& out) = 0;
  virtual void run_add_layer_norm(const Tensor& x, const Tensor& residual, int64_t rows, int64_t cols,
                                  const Tensor& gamma, const Tensor& beta, float eps) = 0;
  virtual void run_attention(const Tensor& qkv, int64_t k_offset, int64_t v_offset, int64_t row_stride,
                             const Tensor& mask, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                             const Tensor& ctx) = 0;
  virtual void run_activation(Activation kind, const Tensor& x, int64_t n) = 0;
  virtual void run_round_to_bf16(const Tensor& x, int64_t n) = 0;
  virtual void run_rms_norm(const Tensor& x, int64_t rows, int64_t cols, const Tensor& gamma, float eps,
                            const Tensor& out) = 0;
  virtual void run_add_rms_norm(const Tensor& x, const Tensor& residual, int64_t rows, int64_t cols,
                                const Tensor& gamma, float eps, const Tensor& out) = 0;
  virtual void run_head_rms_norm(const Tensor& x, int64_t n, int64_t row_stride, int64_t heads, int64_t head_dim,
                                 const Tensor& gamma, float eps) = 0;
  virtual void run_add(const Tensor& x, const Tensor& y, int64_t n) = 0;
  virtual void run_add_scaled(const Tensor& x, const Tensor& y, float alpha, int64_t n, bool accumulate) = 0;
  virtual void run_gated_mul(Gate act, const Tensor& gate, const Tensor& up, int64_t n) = 0;
  virtual void run_gated_mul_rows(Gate act, const Tensor& gate_up, int64_t rows, int64_t cols, const Tensor& out) = 0;
  virtual void run_store_kv(const Tensor& k, const Tensor& v, int64_t src_stride, const Tensor& k_cache,
                            const Tensor& v_cache, int64_t kv_stride, int64_t past, int64_t n, int64_t cols) = 0;
  virtual void run_rope(const Tensor& x, int64_t n_tokens, int64_t row_stride, int64_t heads, int64_t first_position,
                        const Tensor& inv_freq, float attention_factor, int64_t head_dim) = 0;
  // By default run_rope, then run_store_kv; a backend may do both in one kernel.
  virtual void run_rope_store_kv(const Tensor& qkv, int64_t n, int64_t row_stride, int64_t q_heads, int64_t kv_heads,
                                 int64_t past, const Tensor& inv_freq, float attention_factor, const Tensor& k_cache,
                                 const Tensor& v_cache, int64_t kv_stride);
  virtual void run_causal_attention(const Tensor& q, int64_t q_stride, const Tensor& k_cache, const Tensor& v_cache,
                                    int64_t kv_stride, int64_t past, int64_t n_new, int64_t heads, int64_t kv_heads,
                                    int64_t head_dim, float scale, const Tensor& ctx, int64_t window) = 0;

 private:
  Tensor position_source_;
};

// Every slice a graph hands to an operation starts on a 256-byte boundary (64 elements), as cuBLASLt and
// the vector kernels want of their operands: `n` elements rounded up to that.
constexpr int64_t kSliceAlignElements = 64;
constexpr int64_t aligned_elements(int64_t n) {
  return (n + kSliceAlignElements - 1) / kSliceAlignElements * kSliceAlignElements;
}

// One uninitialized allocation of `dtype` carved into N tensors of the given sizes, in order, each
// starting aligned (aligned_elements): a graph's activations in one block, written before they are read.
template <std::size_t N>
std::array<Tensor, N> carve(GraphOps& ops, DType dtype, const std::array<int64_t, N>& sizes, std::string_view what) {
  int64_t total = 0;
  for (const int64_t n : sizes) total += aligned_elements(n);
  const Tensor block = ops.empty(dtype, total, what);
  std::array<Tensor, N> out;
  int64_t at = 0;
  for (std::size_t i = 0; i < N; ++i) {
    out[i] = block.slice(at, sizes[i]);
    at += aligned_elements(sizes[i]);
  }
  return out;
}

// The CPU backend: qjoule/kernels/encoder_ops.h and decoder_ops.h on the calling thread (OpenMP inside
// the kernels).
std::shared_ptr<GraphOps> make_cpu_graph_ops();

// The CUDA backend on GPU `device`: one non-blocking stream, stream-ordered allocations for the
// activations (cudaMallocAsync), cudaMalloc for the parameters. Without a usable GPU, or in a build
// without the CUDA backend, one line saying why (cuda_device_status()'s reason); a GPU that does not
// exist is one line naming how many there are.
std::shared_ptr<GraphOps> make_cuda_graph_ops(int device = 0);

// The check every operation makes: `t` lives on `device`, holds `dtype` and at least `needed`
// elements; else one line naming the operation and the argument.
void check_tensor(const Tensor& t, const Device& device, DType dtype, int64_t needed, std::string_view op,
                  std::string_view argument);

}  // namespace qjoule::model
