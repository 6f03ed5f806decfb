// A GraphOps backend for tests: it counts the operations a graph asks for (and each Linear's calls, by name) and
// has the CPU backend run them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qjoule/error.h"
#include "qjoule/model/graph_ops.h"

namespace qjoule::model {

// A backend that counts the operations the graph asks for and has the CPU backend run them.
class RecordingOps final : public GraphOps {
 public:
  std::shared_ptr<GraphOps> cpu = make_cpu_graph_ops();
  std::map<std::string, int> calls;
  std::map<std::string, int> linear_calls;  // by the Linear's name

  Device device() const override { return cpu->device(); }
  std::string device_name() const override { return "recording"; }
  std::string nongemm_path() const override { return "recording"; }
  Tensor empty(DType d, int64_t n, std::string_view what) override {
    ++calls["empty"];
    return cpu->empty(d, n, what);
  }
  Tensor upload(std::vector<float> v, std::string_view what) override {
    ++calls["upload"];
    return cpu->upload(std::move(v), what);
  }
  Tensor upload_bf16(std::vector<uint16_t> bits, std::string_view what) override {
    ++calls["upload_bf16"];
    return cpu->upload_bf16(std::move(bits), what);
  }
  Tensor host_output(float* host, int64_t size, std::string_view what) override {
    ++calls["host_output"];
    return cpu->host_output(host, size, what);
  }
  void synchronize() override { cpu->synchronize(); }
  // With `record`, capture keeps the body and each replay runs it again (the position read from the
  // position source, as a CUDA graph's kernels read it).
  bool record = false, refuse_capture = false;
  int captures = 0, replays = 0;
  bool records_work() const override { return record; }
  std::unique_ptr<CapturedWork> capture(const std::function<void()>& body) override {
    ++captures;
    if (refuse_capture) fail("this backend cannot record here");
    struct Work final : CapturedWork {
      std::function<void()> body;
      int* replays;
      void replay() override {
        ++*replays;
        body();
      }
      int64_t kernels() const override { return 7; }
      int64_t other_nodes() const override { return 0; }
    };
    auto work = std::make_unique<Work>();
    work->body = body;
    work->replays = &replays;
    return work;
  }
  void start_timer() override { cpu->start_timer(); }
  double stop_timer_ms() override { return cpu->stop_timer_ms(); }

 protected:
  void run_copy_in(const void* host, const Tensor& dst) override {
    ++calls["copy_in"];
    cpu->copy_in(host, dst);
  }
  void run_copy_out(const Tensor& src, void* host) override {
    ++calls["copy_out"];
    cpu->copy_out(src, host);
  }
  void run_copy_rows(const Tensor& d, int64_t ds, const Tensor& s, int64_t ss, int64_t c, int64_t r) override {
    ++calls["copy_rows"];
    cpu->copy_rows(d, ds, s, ss, c, r);
  }
  void run_linear(const kernels::Linear& l, std::string_view name, const Tensor& x, int64_t m,
                  const Tensor& y) override {
    ++calls["linear"];
    ++linear_calls[std::string(name)];
    cpu->linear(l, name, x, m, y);
  }
  void run_embedding_sum(const Tensor& ids, const Tensor& w, const Tensor& p, const Tensor& t, int64_t seq,
                         int64_t first, int64_t h, const Tensor& out) override {
    ++calls["embedding_sum"];
    cpu->set_position_source(position_source());
    cpu->embedding_sum(ids, w, p, t, seq, first, h, out);
  }
  void run_embedding_bf16(const Tensor& ids, const Tensor& w, float scale, int64_t h, const Tensor& out) override {
    ++calls["embedding_bf16"];
    cpu->embedding_bf16(ids, w, scale, h, out);
  }
  void run_add_layer_norm(const Tensor& x, const Tensor& r, int64_t rows, int64_t cols, const Tensor& g,
                          const Tensor& b, float eps) override {
    ++calls["add_layer_norm"];
    cpu->add_layer_norm(x, r, rows, cols, g, b, eps);
  }
  void run_attention(const Tensor& qkv, int64_t ko, int64_t vo, int64_t stride, const Tensor& mask, int64_t batch,
                     int64_t seq, int64_t heads, int64_t hd, const Tensor& ctx) override {
    ++calls["attention"];
    cpu->attention(qkv, ko, vo, stride, mask, batch, seq, heads, hd, ctx);
  }
  void run_activation(Activation kind, const Tensor& x, int64_t n) override {
    ++calls["activation"];
    cpu->activation(kind, x, n);
  }
  void run_round_to_bf16(const Tensor& x, int64_t n) override {
    ++calls["round_to_bf16"];
    cpu->round_to_bf16(x, n);
  }
  void run_rms_norm(const Tensor& x, int64_t rows, int64_t cols, const Tensor& g, float eps,
                    const Tensor& out) override {
    ++calls["rms_norm"];
    cpu->rms_norm(x, rows, cols, g, eps, out);
  }
  void run_head_rms_norm(const Tensor& x, int64_t n, int64_t stride, int64_t heads, int64_t hd, const Tensor& g,
                         float eps) override {
    ++calls["head_rms_norm"];
    cpu->head_rms_norm(x, n, stride, heads, hd, g, eps);
  }
  void run_add(const Tensor& x, const Tensor& y, int64_t n) override {
    ++calls["add"];
    cpu->add(x, y, n);
  }
  void run_add_scaled(const Tensor& x, const Tensor& y, float alpha, int64_t n, bool accumulate) override {
    ++calls["add_scaled"];
    cpu->add_scaled(x, y, alpha, n, accumulate);
  }
  void run_add_rms_norm(const Tensor& x, const Tensor& r, int64_t rows, int64_t cols, const Tensor& g, float eps,
                        const Tensor& out) override {
    ++calls["add_rms_norm"];
    cpu->add_rms_norm(x, r, rows, cols, g, eps, out);
  }
  void run_gated_mul_rows(Gate act, const Tensor& gu, int64_t rows, int64_t cols, const Tensor& out) override {
    ++calls[act == Gate::silu ? "silu_mul_rows" : "gelu_tanh_mul_rows"];
    cpu->gated_mul_rows(act, gu, rows, cols, out);
  }
  void run_store_kv(const Tensor& k, const Tensor& v, int64_t src_stride, const Tensor& kc, const Tensor& vc,
                    int64_t kv_stride, int64_t past, int64_t n, int64_t cols) override {
    ++calls["store_kv"];
    cpu->set_position_source(position_source());
    cpu->store_kv(k, v, src_stride, kc, vc, kv_stride, past, n, cols);
  }
  void run_gated_mul(Gate act, const Tensor& g, const Tensor& u, int64_t n) override {
    ++calls[act == Gate::silu ? "silu_mul" : "gelu_tanh_mul"];
    cpu->gated_mul(act, g, u, n);
  }
  void run_rope(const Tensor& x, int64_t n, int64_t stride, int64_t heads, int64_t first, const Tensor& inv_freq,
                float factor, int64_t head_dim) override {
    ++calls["rope"];
    cpu->set_position_source(position_source());
    cpu->rope(x, n, stride, heads, first, inv_freq, factor, head_dim);
  }
  void run_causal_attention(const Tensor& q, int64_t qs, const Tensor& k, const Tensor& v, int64_t kvs, int64_t past,
                            int64_t n, int64_t heads, int64_t kv_heads, int64_t hd, float scale, const Tensor& ctx,
                            int64_t window) override {
    ++calls["causal_attention"];
    cpu->set_position_source(position_source());
    cpu->causal_attention(q, qs, k, v, kvs, past, n, heads, kv_heads, hd, scale, ctx, window);
  }
};

}  // namespace qjoule::model
