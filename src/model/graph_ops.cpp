// Tensor, and GraphOps's operations: the argument checks every backend shares, then its kernel
// (qjoule/model/graph_ops.h).
#include "qjoule/model/graph_ops.h"

#include <algorithm>

#include <fmt/format.h>

#include "qjoule/error.h"

namespace qjoule::model {
namespace {

std::string_view dtype_name(DType dtype) { return dtype == DType::f32 ? "f32" : dtype == DType::i32 ? "i32" : "bf16"; }

}  // namespace

std::string to_string(const Device& device) {
  return device.kind == Device::Kind::cpu ? std::string("cpu") : fmt::format("cuda:{}", device.index);
}

float* Tensor::f32() const {
  if (dtype_ != DType::f32) fail("tensor of {} {} elements read as f32", size_, dtype_name(dtype_));
  return static_cast<float*>(data_);
}

int32_t* Tensor::i32() const {
  if (dtype_ != DType::i32) fail("tensor of {} {} elements read as i32", size_, dtype_name(dtype_));
  return static_cast<int32_t*>(data_);
}

uint16_t* Tensor::bf16() const {
  if (dtype_ != DType::bf16) fail("tensor of {} {} elements read as bf16", size_, dtype_name(dtype_));
  return static_cast<uint16_t*>(data_);
}

Tensor Tensor::slice(int64_t offset, int64_t count) const {
  if (offset < 0 || count < 0 || offset + count > size_)
    fail("slice [{}, {}) of a tensor of {} elements: out of range", offset, offset + count, size_);
  return Tensor(device_, dtype_, static_cast<char*>(data_) + offset * static_cast<int64_t>(element_bytes()), count,
                owner_);
}

void check_tensor(const Tensor& t, const Device& device, DType dtype, int64_t needed, std::string_view op,
                  std::string_view argument) {
  if (t.device() != device)
    fail("{}: {} lives on {}, the operation runs on {}", op, argument, to_string(t.device()), to_string(device));
  if (t.dtype() != dtype)
    fail("{}: {} holds {} elements, expected {}", op, argument, dtype_name(t.dtype()), dtype_name(dtype));
  if (t.size() < needed) fail("{}: {} holds {} elements, the operation reads {}", op, argument, t.size(), needed);
}

void GraphOps::copy_in(const void* host, const Tensor& dst) {
  check_tensor(dst, device(), dst.dtype(), 0, "copy_in", "the destination");
  if (dst.size() > 0) run_copy_in(host, dst);
}

void GraphOps::copy_out(const Tensor& src, void* host) {
  check_tensor(src, device(), src.dtype(), 0, "copy_out", "the source");
  run_copy_out(src, host);  // waits even for no elements: what was enqueued before is done
}

void GraphOps::copy_rows(const Tensor& dst, int64_t dst_stride, const Tensor& src, int64_t src_stride, int64_t cols,
                         int64_t rows) {
  if (rows <= 0 || cols <= 0) return;
  check_tensor(dst, device(), DType::f32, (rows - 1) * dst_stride + cols, "copy_rows", "the destination");
  check_tensor(src, device(), DType::f32, (rows - 1) * src_stride + cols, "copy_rows", "the source");
  run_copy_rows(dst, dst_stride, src, src_stride, cols, rows);
}

void GraphOps::linear(const kernels::Linear& layer, std::string_view name, const Tensor& x, int64_t m,
                      const Tensor& y) {
  check_tensor(x, device(), DType::f32, m * layer.in_features(), name, "the input");
  check_tensor(y, device(), DType::f32, m * layer.out_features(), name, "the output");
  run_linear(layer, name, x, m, y);
}

void GraphOps::embedding_sum(const Tensor& ids, const Tensor& word, const Tensor& position, const Tensor& token_type0,
                             int64_t seq, int64_t first_position, int64_t hidden, const Tensor& out) {
  const int64_t rows = ids.size();
  if (seq <= 0) fail("embeddings: sequence length {}, expected at least 1", seq);
  check_tensor(ids, device(), DType::i32, rows, "embeddings", "the ids");
  check_tensor(word, device(), DType::f32, hidden, "embeddings", "the word embeddings");
  if (!position.empty())
    check_tensor(position, device(), DType::f32, (first_position + std::min(rows, seq)) * hidden, "embeddings",
                 "the position embeddings");
  if (!token_type0.empty()) check_tensor(token_type0, device(), DType::f32, hidden, "embeddings", "token type 0");
  check_tensor(out, device(), DType::f32, rows * hidden, "embeddings", "the output");
  run_embedding_sum(ids, word, position, token_type0, seq, first_position, hidden, out);
}

void GraphOps::embedding_bf16(const Tensor& ids, const Tensor& word, float scale, int64_t hidden, const Tensor& out) {
  const int64_t rows = ids.size();
  check_tensor(ids, device(), DType::i32, rows, "embeddings", "the ids");
  check_tensor(word, device(), DType::bf16, hidden, "embeddings", "the word embeddings");
  check_tensor(out, device(), DType::f32, rows * hidden, "embeddings", "the output");
  run_embedding_bf16(ids, word, scale, hidden, out);
}

void GraphOps::add_layer_norm(const Tensor& x, const Tensor& residual, int64_t rows, int64_t cols, const Tensor& gamma,
                              const Tensor& beta, float eps) {
  check_tensor(x, device(), DType::f32, rows * cols, "LayerNorm", "the input");
  if (!residual.empty()) check_tensor(residual, device(), DType::f32, rows * cols, "LayerNorm", "the residual");
  check_tensor(gamma, device(), DType::f32, cols, "LayerNorm", "gamma");
  check_tensor(beta, device(), DType::f32, cols, "LayerNorm", "beta");
  run_add_layer_norm(x, residual, rows, cols, gamma, beta, eps);
}

void GraphOps::attention(const Tensor& qkv, int64_t k_offset, int64_t v_offset, int64_t row_stride, const Tensor& mask,
                         int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, const Tensor& ctx) {
  const int64_t rows = batch * seq, width = heads * head_dim;
  if (rows <= 0) return;
  check_tensor(qkv, device(), DType::f32, std::max(k_offset, v_offset) + (rows - 1) * row_stride + width, "attention",
               "q, k and v");
  check_tensor(mask, device(), DType::i32, rows, "attention", "the mask");
  check_tensor(ctx, device(), DType::f32, rows * width, "attention", "the context");
  run_attention(qkv, k_offset, v_offset, row_stride, mask, batch, seq, heads, head_dim, ctx);
}

void GraphOps::activation(Activation kind, const Tensor& x, int64_t n) {
  check_tensor(x, device(), DType::f32, n, "activation", "the input");
  run_activation(kind, x, n);
}

void GraphOps::round_to_bf16(const Tensor& x, int64_t n) {
  check_tensor(x, device(), DType::f32, n, "BF16 rounding", "the input");
  run_round_to_bf16(x, n);
}

void GraphOps::rms_norm(const Tensor& x, int64_t rows, int64_t cols, const Tensor& gamma, float eps,
                        const Tensor& out) {
  check_tensor(x, device(), DType::f32, rows * cols, "RMSNorm", "the input");
  check_tensor(gamma, device(), DType::f32, cols, "RMSNorm", "gamma");
  check_tensor(out, device(), DType::f32, rows * cols, "RMSNorm", "the output");
  run_rms_norm(x, rows, cols, gamma, eps, out);
}

void GraphOps::add_rms_norm(const Tensor& x, const Tensor& residual, int64_t rows, int64_t cols, const Tensor& gamma,
                            float eps, const Tensor& out) {
  check_tensor(x, device(), DType::f32, rows * cols, "RMSNorm", "the input");
  check_tensor(residual, device(), DType::f32, rows * cols, "RMSNorm", "the residual");
  check_tensor(gamma, device(), DType::f32, cols, "RMSNorm", "gamma");
  check_tensor(out, device(), DType::f32, rows * cols, "RMSNorm", "the output");
  run_add_rms_norm(x, residual, rows, cols, gamma, eps, out);
}

void GraphOps::head_rms_norm(const Tensor& x, int64_t n, int64_t row_stride, int64_t heads, int64_t head_dim,
                             const Tensor& gamma, float eps) {
  if (n <= 0) return;
  if (heads <= 0 || head_dim <= 0 || row_stride < heads * head_dim)
    fail("head RMSNorm: {} heads of {} in rows {} apart; expected positive counts within the row", heads, head_dim,
         row_stride);
  check_tensor(x, device(), DType::f32, (n - 1) * row_stride + heads * head_dim, "head RMSNorm", "the heads");
  check_tensor(gamma, device(), DType::f32, head_dim, "head RMSNorm", "gamma");
  run_head_rms_norm(x, n, row_stride, heads, head_dim, gamma, eps);
}

void GraphOps::add(const Tensor& x, const Tensor& y, int64_t n) {
  check_tensor(x, device(), DType::f32, n, "residual add", "the sum");
  check_tensor(y, device(), DType::f32, n, "residual add", "the addend");
  run_add(x, y, n);
}

void GraphOps::add_scaled(const Tensor& x, const Tensor& y, float alpha, int64_t n, bool accumulate) {
  check_tensor(x, device(), DType::f32, n, "weighted add", "the sum");
  check_tensor(y, device(), DType::f32, n, "weighted add", "the addend");
  run_add_scaled(x, y, alpha, n, accumulate);
}

void GraphOps::gated_mul(Gate act, const Tensor& gate, const Tensor& up, int64_t n) {
  const char* op = act == Gate::silu ? "SwiGLU" : "GeGLU";
  check_tensor(gate, device(), DType::f32, n, op, "the gate");
  check_tensor(up, device(), DType::f32, n, op, "up");
  run_gated_mul(act, gate, up, n);
}

void GraphOps::gated_mul_rows(Gate act, const Tensor& gate_up, int64_t rows, int64_t cols, const Tensor& out) {
  const char* op = act == Gate::silu ? "SwiGLU" : "GeGLU";
  check_tensor(gate_up, device(), DType::f32, rows * 2 * cols, op, "gate|up");
  check_tensor(out, device(), DType::f32, rows * cols, op, "the output");
  run_gated_mul_rows(act, gate_up, rows, cols, out);
}

void GraphOps::store_kv(const Tensor& k, const Tensor& v, int64_t src_stride, const Tensor& k_cache,
                        const Tensor& v_cache, int64_t kv_stride, int64_t past, int64_t n, int64_t cols) {
  if (n <= 0) return;
  check_tensor(k, device(), DType::f32, (n - 1) * src_stride + cols, "KV cache store", "the keys");
  check_tensor(v, device(), DType::f32, (n - 1) * src_stride + cols, "KV cache store", "the values");
  check_tensor(k_cache, device(), DType::f32, (past + n - 1) * kv_stride + cols, "KV cache store", "the key cache");
  check_tensor(v_cache, device(), DType::f32, (past + n - 1) * kv_stride + cols, "KV cache store", "the value cache");
  run_store_kv(k, v, src_stride, k_cache, v_cache, kv_stride, past, n, cols);
}

std::unique_ptr<CapturedWork> GraphOps::capture(const std::function<void()>& /*body*/) { return nullptr; }

void GraphOps::set_position_source(const Tensor& position) {
  if (!position.empty()) check_tensor(position, device(), DType::i32, 1, "the position source", "the position");
  position_source_ = position;
}

void GraphOps::rope(const Tensor& x, int64_t n_tokens, int64_t row_stride, int64_t heads, int64_t first_position,
                    const Tensor& inv_freq, float attention_factor, int64_t head_dim) {
  if (n_tokens <= 0) return;
  check_tensor(inv_freq, device(), DType::f32, 1, "RoPE", "the frequencies");
  if (head_dim == 0) head_dim = 2 * inv_freq.size();
  if (head_dim < 2 * inv_freq.size())
    fail("RoPE: heads of {} values cannot turn {} of them", head_dim, 2 * inv_freq.size());
  check_tensor(x, device(), DType::f32, (n_tokens - 1) * row_stride + heads * head_dim, "RoPE", "the input");
  run_rope(x, n_tokens, row_stride, heads, first_position, inv_freq, attention_factor, head_dim);
}

void GraphOps::rope_store_kv(const Tensor& qkv, int64_t n, int64_t row_stride, int64_t q_heads, int64_t kv_heads,
                             int64_t past, const Tensor& inv_freq, float attention_factor, const Tensor& k_cache,
                             const Tensor& v_cache, int64_t kv_stride) {
  if (n <= 0) return;
  check_tensor(inv_freq, device(), DType::f32, 1, "RoPE + KV cache store", "the frequencies");
  const int64_t head_dim = 2 * inv_freq.size(), kv_cols = kv_heads * head_dim;
  check_tensor(qkv, device(), DType::f32, (n - 1) * row_stride + (q_heads + 2 * kv_heads) * head_dim,
               "RoPE + KV cache store", "q | k | v");
  check_tensor(k_cache, device(), DType::f32, (past + n - 1) * kv_stride + kv_cols, "RoPE + KV cache store",
               "the key cache");
  check_tensor(v_cache, device(), DType::f32, (past + n - 1) * kv_stride + kv_cols, "RoPE + KV cache store",
               "the value cache");
  run_rope_store_kv(qkv, n, row_stride, q_heads, kv_heads, past, inv_freq, attention_factor, k_cache, v_cache,
                    kv_stride);
}

void GraphOps::run_rope_store_kv(const Tensor& qkv, int64_t n, int64_t row_stride, int64_t q_heads, int64_t kv_heads,
                                 int64_t past, const Tensor& inv_freq, float attention_factor, const Tensor& k_cache,
                                 const Tensor& v_cache, int64_t kv_stride) {
  const int64_t head_dim = 2 * inv_freq.size(), q_cols = q_heads * head_dim, kv_cols = kv_heads * head_dim;
  run_rope(qkv, n, row_stride, q_heads + kv_heads, past, inv_freq, attention_factor, head_dim);
  run_store_kv(qkv.slice(q_cols, qkv.size() - q_cols), qkv.slice(q_cols + kv_cols, qkv.size() - q_cols - kv_cols),
               row_stride, k_cache, v_cache, kv_stride, past, n, kv_cols);
}

void GraphOps::causal_attention(const Tensor& q, int64_t q_stride, const Tensor& k_cache, const Tensor& v_cache,
                                int64_t kv_stride, int64_t past, int64_t n_new, int64_t heads, int64_t kv_heads,
                                int64_t head_dim, float scale, const Tensor& ctx, int64_t window) {
  if (n_new <= 0) return;
  if (window < 0) fail("causal attention: window = {}, expected 0 (none) or a positive number of keys", window);
  const int64_t keys = past + n_new, kv_width = kv_heads * head_dim;
  check_tensor(q, device(), DType::f32, (n_new - 1) * q_stride + heads * head_dim, "causal attention", "q");
  check_tensor(k_cache, device(), DType::f32, (keys - 1) * kv_stride + kv_width, "causal attention", "the key cache");
  check_tensor(v_cache, device(), DType::f32, (keys - 1) * kv_stride + kv_width, "causal attention", "the value cache");
  check_tensor(ctx, device(), DType::f32, n_new * heads * head_dim, "causal attention", "the context");
  run_causal_attention(q, q_stride, k_cache, v_cache, kv_stride, past, n_new, heads, kv_heads, head_dim, scale, ctx,
                       window);
}

}  // namespace qjoule::model
