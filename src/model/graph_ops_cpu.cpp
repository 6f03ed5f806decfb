// The CPU GraphOps backend (qjoule/model/graph_ops.h): qjoule/kernels/encoder_ops.h, decoder_ops.h
// and the CPU Linears. GraphOps has checked every argument before a run_* function is called.
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "qjoule/error.h"
#include "qjoule/kernels/decoder_ops.h"
#include "qjoule/kernels/encoder_ops.h"
#include "qjoule/model/graph_ops.h"
#include "qjoule/quant/element_math.h"

namespace qjoule::model {
namespace {

constexpr Device kCpu{Device::Kind::cpu, 0};

void* raw(const Tensor& t) { return t.raw(); }

class CpuGraphOps final : public GraphOps {
 public:
  Device device() const override { return kCpu; }
  std::string device_name() const override { return "CPU"; }
  std::string nongemm_path() const override {
    // GELU (erf and tanh) and SiLU run as oneDNN eltwise primitives, the rest in qjoule's kernels.
    return fmt::format("qjoule:cpu:{} (gelu, silu: onednn:eltwise)",
                       kernels::encoder_ops_isa_name(kernels::encoder_ops_isa()));
  }

  Tensor empty(DType dtype, int64_t size, std::string_view what) override {
    if (size < 0) fail("{}: {} elements", what, size);
    // 64-byte aligned, uninitialized: an activation block is written before it is read, and zeroing
    // it would be a pass over tens of MB per batch.
    const auto bytes = (static_cast<std::size_t>(size) * 4 + 63) / 64 * 64;
    void* data = bytes == 0 ? nullptr : std::aligned_alloc(64, bytes);
    if (bytes != 0 && data == nullptr) fail("{}: cannot allocate {} bytes", what, bytes);
    return Tensor(kCpu, dtype, data, size, std::shared_ptr<void>(data, std::free));
  }

  Tensor upload(std::vector<float> values, std::string_view /*what*/) override {
    auto owner = std::make_shared<std::vector<float>>(std::move(values));
    float* data = owner->data();
    const auto size = static_cast<int64_t>(owner->size());
    return Tensor(kCpu, DType::f32, data, size, std::move(owner));
  }

  Tensor upload_bf16(std::vector<uint16_t> bits, std::string_view /*what*/) override {
    auto owner = std::make_shared<std::vector<uint16_t>>(std::move(bits));
    uint16_t* data = owner->data();
    const auto size = static_cast<int64_t>(owner->size());
    return Tensor(kCpu, DType::bf16, data, size, std::move(owner));
  }

  Tensor host_output(float* host, int64_t size, std::string_view /*what*/) override {
    return Tensor(kCpu, DType::f32, host, size, nullptr);  // the caller's memory, not owned
  }

  void synchronize() override {}

  void start_timer() override { start_ = std::chrono::steady_clock::now(); }
  double stop_timer_ms() override {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
  }

 protected:
  void run_copy_in(const void* host, const Tensor& dst) override { std::memcpy(raw(dst), host, dst.bytes()); }

  void run_copy_out(const Tensor& src, void* host) override {
    if (src.size() > 0 && raw(src) != host) std::memcpy(host, raw(src), src.bytes());
  }

  void run_copy_rows(const Tensor& dst, int64_t dst_stride, const Tensor& src, int64_t src_stride, int64_t cols,
                     int64_t rows) override {
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst.f32() + r * dst_stride, src.f32() + r * src_stride, static_cast<std::size_t>(cols) * 4);
  }

  void run_linear(const kernels::Linear& layer, std::string_view /*name*/, const Tensor& x, int64_t m,
                  const Tensor& y) override {
    layer.forward(x.f32(), m, y.f32());
  }

  void run_embedding_sum(const Tensor& ids, const Tensor& word, const Tensor& position, const Tensor& token_type0,
                         int64_t seq, int64_t first_position, int64_t hidden, const Tensor& out) override {
    const int64_t rows = ids.size(), h = hidden;
    const int32_t* id = ids.i32();
    const float* w = word.f32();
    const float* p = position.empty() ? nullptr : position.f32() + position_or(first_position) * h;
    const float* t = token_type0.empty() ? nullptr : token_type0.f32();
    float* o = out.f32();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      const float* wr = w + static_cast<int64_t>(id[i]) * h;
      float* row = o + i * h;
      if (p != nullptr) {
        const float* pr = p + (i % seq) * h;
        for (int64_t c = 0; c < h; ++c) row[c] = wr[c] + pr[c];
      } else {
        std::memcpy(row, wr, static_cast<std::size_t>(h) * 4);
      }
      if (t != nullptr) {
        for (int64_t c = 0; c < h; ++c) row[c] += t[c];
      }
    }
  }

  void run_embedding_bf16(const Tensor& ids, const Tensor& word, float scale, int64_t h, const Tensor& out) override {
    const int32_t* id = ids.i32();
    const uint16_t* w = word.bf16();
    float* o = out.f32();
    const int64_t rows = ids.size();
#pragma omp parallel for schedule(static) if (rows > 1)
    for (int64_t i = 0; i < rows; ++i) {
      const uint16_t* wr = w + static_cast<int64_t>(id[i]) * h;
      float* row = o + i * h;
      for (int64_t c = 0; c < h; ++c) row[c] = element::bf16_bits_to_f32(wr[c]) * scale;
    }
  }

  void run_add_layer_norm(const Tensor& x, const Tensor& residual, int64_t rows, int64_t cols, const Tensor& gamma,
                          const Tensor& beta, float eps) override {
    kernels::add_layer_norm_f32(x.f32(), residual.empty() ? nullptr : residual.f32(), rows, cols, gamma.f32(),
                                beta.f32(), eps);
  }

  void run_attention(const Tensor& qkv, int64_t k_offset, int64_t v_offset, int64_t row_stride, const Tensor& mask,
                     int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, const Tensor& ctx) override {
    const float* q = qkv.f32();
    kernels::attention_f32(q, q + k_offset, q + v_offset, row_stride, mask.i32(), batch, seq, heads, head_dim,
                           ctx.f32());
  }

  void run_activation(Activation kind, const Tensor& x, int64_t n) override {
    switch (kind) {
      case Activation::relu: return kernels::relu_f32(x.f32(), n);
      case Activation::gelu_erf: return kernels::gelu_erf_f32(x.f32(), n);
      case Activation::gelu_tanh: return kernels::gelu_tanh_f32(x.f32(), n);
      case Activation::tanh: return kernels::tanh_f32(x.f32(), n);
    }
  }

  void run_round_to_bf16(const Tensor& x, int64_t n) override { kernels::round_to_bf16_f32(x.f32(), n); }

  void run_rms_norm(const Tensor& x, int64_t rows, int64_t cols, const Tensor& gamma, float eps,
                    const Tensor& out) override {
    kernels::rms_norm_f32(x.f32(), rows, cols, gamma.f32(), eps, out.f32());
  }

  // The residual add, then the norm: the two operations' own kernels, so the result is theirs bit for bit.
  void run_head_rms_norm(const Tensor& x, int64_t n, int64_t row_stride, int64_t heads, int64_t head_dim,
                         const Tensor& gamma, float eps) override {
    kernels::head_rms_norm_f32(x.f32(), n, row_stride, heads, head_dim, gamma.f32(), eps);
  }

  void run_add_rms_norm(const Tensor& x, const Tensor& residual, int64_t rows, int64_t cols, const Tensor& gamma,
                        float eps, const Tensor& out) override {
    run_add(x, residual, rows * cols);
    kernels::rms_norm_f32(x.f32(), rows, cols, gamma.f32(), eps, out.f32());
  }

  void run_gated_mul_rows(Gate act, const Tensor& gate_up, int64_t rows, int64_t cols, const Tensor& out) override {
    for (int64_t r = 0; r < rows; ++r) {
      float* o = out.f32() + r * cols;
      const float* g = gate_up.f32() + r * 2 * cols;
      if (o != g) std::memmove(o, g, static_cast<std::size_t>(cols) * 4);
      run_gated(act, o, g + cols, cols);
    }
  }

  void run_store_kv(const Tensor& k, const Tensor& v, int64_t src_stride, const Tensor& k_cache, const Tensor& v_cache,
                    int64_t kv_stride, int64_t past, int64_t n, int64_t cols) override {
    const int64_t at = position_or(past);
    run_copy_rows(k_cache.slice(at * kv_stride, (n - 1) * kv_stride + cols), kv_stride, k, src_stride, cols, n);
    run_copy_rows(v_cache.slice(at * kv_stride, (n - 1) * kv_stride + cols), kv_stride, v, src_stride, cols, n);
  }

  void run_add(const Tensor& x, const Tensor& y, int64_t n) override {
    float* a = x.f32();
    const float* b = y.f32();
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) a[i] += b[i];
  }

  void run_add_scaled(const Tensor& x, const Tensor& y, float alpha, int64_t n, bool accumulate) override {
    float* a = x.f32();
    const float* b = y.f32();
    if (accumulate) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) a[i] += alpha * b[i];
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) a[i] = alpha * b[i];
    }
  }

  void run_gated_mul(Gate act, const Tensor& gate, const Tensor& up, int64_t n) override {
    run_gated(act, gate.f32(), up.f32(), n);
  }

  void run_rope(const Tensor& x, int64_t n_tokens, int64_t row_stride, int64_t heads, int64_t first_position,
                const Tensor& inv_freq, float attention_factor, int64_t head_dim) override {
    kernels::apply_rope_f32(x.f32(), n_tokens, row_stride, heads, position_or(first_position), inv_freq.f32(), head_dim,
                            attention_factor, 2 * inv_freq.size());
  }

  void run_causal_attention(const Tensor& q, int64_t q_stride, const Tensor& k_cache, const Tensor& v_cache,
                            int64_t kv_stride, int64_t past, int64_t n_new, int64_t heads, int64_t kv_heads,
                            int64_t head_dim, float scale, const Tensor& ctx, int64_t window) override {
    kernels::causal_attention_f32(q.f32(), q_stride, k_cache.f32(), v_cache.f32(), kv_stride, position_or(past), n_new,
                                  heads, kv_heads, head_dim, scale, ctx.f32(), window);
  }

 private:
  static void run_gated(Gate act, float* gate, const float* up, int64_t n) {
    if (act == Gate::silu) {
      kernels::silu_mul_f32(gate, up, n);
    } else {
      kernels::gelu_tanh_mul_f32(gate, up, n);
    }
  }

  // The position the operation runs at: the position source's value when one is set.
  int64_t position_or(int64_t argument) const {
    return position_source().empty() ? argument : static_cast<int64_t>(*position_source().i32());
  }

  std::chrono::steady_clock::time_point start_;
};

}  // namespace

std::shared_ptr<GraphOps> make_cpu_graph_ops() { return std::make_shared<CpuGraphOps>(); }

}  // namespace qjoule::model
