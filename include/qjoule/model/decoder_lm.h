// A decoder language model (Llama / Qwen2 / Qwen3 / Gemma 3 / Phi-3 / GPT-2, and the mixtures of experts Mixtral /
// Qwen3-MoE / OLMoE): token (and, for GPT-2, position) embeddings, pre-norm transformer blocks with causal
// grouped-query attention over a KV cache (through a sliding window in the layers the config names), a dense MLP
// or a mixture of experts (decoder_lm_moe.cpp: the router FP32, each expert's Linears reading only the rows of
// the tokens routed to it), the final norm and
// lm_head. Each Linear is built by a factory, so the same model runs FP32 or any quantized format;
// embeddings, norms and lm_head stay FP32 unless the policy names them. The forward graph is written
// once against GraphOps (graph_ops.h): on the CPU backend (the default), or on the CUDA backend with
// every weight and the KV cache on one GPU and the Linears of cuda_linear_factory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qjoule/kernels/decoder_ops.h"
#include "qjoule/kernels/linear.h"
#include "qjoule/model/decoder_params.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/graph_ops.h"
#include "qjoule/model/kv_cache.h"

namespace qjoule::model {

// One sequence of a batched forward (DecoderLM::forward_batch): n tokens `ids` continuing its own
// `cache`; the logits of its tokens logits_from .. n − 1 go to `logits` ([n − logits_from, vocab], host).
struct DecoderSequence {
  const int32_t* ids = nullptr;
  int64_t n = 0;
  KvCache* cache = nullptr;
  float* logits = nullptr;
  int64_t logits_from = 0;
};

class DecoderLM {
 public:
  // `ops`: the backend (nullptr: the CPU); the factory must build Linears it runs.
  DecoderLM(DecoderParams params, const LinearFactory& factory, std::shared_ptr<GraphOps> ops = nullptr);

  // A cache for up to `capacity` tokens (0: max_position_embeddings); more than the model's positions
  // is an error naming both numbers. `rewind` >= 0 (CPU): the sliding-window layers hold a ring of their
  // window + `rewind` rows only (where that is fewer than `capacity`), so a long generation holds its
  // windows' keys, not the whole context's, and KvCache::truncate can go back `rewind` tokens; -1: every
  // layer holds `capacity` rows.
  KvCache make_cache(int64_t capacity = 0, int64_t rewind = -1) const;

  // Runs the n tokens `ids` at positions cache.size() .. cache.size() + n − 1 (a prefill when the cache
  // is empty, a decode step when n = 1), appends their keys and values to the cache and writes the
  // logits of tokens logits_from .. n − 1: [n − logits_from, vocab] (n − 1: the last token's only).
  // A position beyond the cache or max_position_embeddings, or an id outside the vocabulary, is an error.
  // ids and logits are host memory; the logits are written when forward returns.
  void forward(const int32_t* ids, int64_t n, KvCache& cache, float* logits, int64_t logits_from = 0) const;
  // forward() of several sequences at once, each at its own positions over its own cache: their rows go
  // through every Linear, norm and activation as one [Σ n, ·] product (the speed of a prefill of Σ n
  // tokens), the attention runs per sequence. Each sequence's logits are those forward() gives up to
  // the rounding of the kernels chosen for Σ n rows (no format here mixes rows: activations are
  // quantized per token). Each sequence is checked as forward() checks it; two sharing a cache is an error.
  void forward_batch(std::span<const DecoderSequence> sequences) const;
  // forward() timed by the backend (CUDA events on the GPU, the steady clock on the CPU): milliseconds.
  double forward_timed(const int32_t* ids, int64_t n, KvCache& cache, float* logits, int64_t logits_from = 0) const;
  // Runs `body` (forwards of this model and host work between them) timed by the backend the same way.
  double timed_ms(const std::function<void()>& body) const;
  void synchronize() const { ops_->synchronize(); }
  Device device() const { return ops_->device(); }
  std::string device_name() const { return ops_->device_name(); }
  std::string nongemm_path() const;

  // A decode step (one token) on a backend that records work (the GPU) runs as one recorded piece of
  // work replayed each token: the token id and its position are copied to the device, the recording
  // (one CUDA graph: every kernel of the step, the position read on the device) launched once, the
  // logits copied back. The first step on a cache runs plainly (every layer's plans and buffers exist
  // then), the second records; a new cache or capacity records again. On by default; off, or where
  // recording fails (said by decode_step_path), every step runs its kernels one launch each.
  void set_decode_graph(bool on) { decode_graph_on_ = on; }
  // How the last decode steps ran: "" before any; "one CUDA graph a token: N kernels (K a layer) + M
  // other nodes, 1 launch"; "kernel by kernel (N launches a token): REASON" otherwise.
  std::string decode_step_path() const;

  // Layer at a time, for calibration (model/calibration/decoder_calibration.h): the residual stream of n tokens at
  // positions 0..n−1 after the embeddings, into x (host, [n, hidden]); and x through layer `index` (0 ..
  // layers − 1) in place, its keys and values in a cache of its own. Ids as forward() checks them.
  void embed(const int32_t* ids, int64_t n, float* x) const;
  void forward_layer(int64_t index, float* x, int64_t n) const;
  // Layer `index`'s norms from now on (AWQ folds its scales into them), FP32, shaped as before.
  void replace_norms(int64_t index, const LayerNormParams& attn, const LayerNormParams& mlp);
  // Layer `index`'s router from now on (a mixture: AWQ's scales in its columns), shaped as before.
  void replace_router(int64_t index, std::unique_ptr<kernels::Linear> router);

  const DecoderConfig& config() const { return config_; }
  std::vector<LinearReport> linear_reports() const;
  // The head's report (lm_head: its format as held, e.g. the checkpoint's bf16 below FP32, and its bytes).
  LinearReport head_report() const;
  // The token embeddings' format as held: "bf16" (a BF16 checkpoint's, as stored) or "fp32".
  std::string embeddings_format() const { return token_embeddings_.dtype() == DType::bf16 ? "bf16" : "fp32"; }
  // A tied model whose embedding lookups read the head's rows (model/tied_embeddings.h): held once.
  bool embeddings_in_head() const { return embeddings_in_head_; }
  // "format kernel_path" -> the checkpoint's Linears that ran it (a fused Linear counts once per part).
  std::map<std::string, int> kernel_path_counts() const;
  std::size_t bytes_held() const;  // every Linear as packed + embeddings (once when tied) and norms
  std::size_t fp32_bytes() const;  // the same model held entirely in FP32

 private:
  struct OwnedLinear {
    std::unique_ptr<kernels::Linear> linear;
    std::string name;
    explicit operator bool() const { return linear != nullptr; }
  };
  struct Norm {
    Tensor gamma, beta;  // beta empty: RMSNorm
  };
  struct Expert {
    OwnedLinear gate_up, gate, up, down;  // gate_up: [gate | up], or gate and up apart
  };
  struct Layer {
    OwnedLinear qkv, q, k, v, o, gate_up, gate, up, down;  // qkv: [q | k | v] rows; gate_up: [gate | up]
    OwnedLinear router;           // a mixture-of-experts layer: [experts, hidden], FP32 unless the policy names it
    std::vector<Expert> experts;  // empty: the dense MLP above
    Norm attn_norm, mlp_norm;
    Norm q_norm, k_norm;  // config.qk_norm: each head's RMSNorm before RoPE (gamma [head_dim]); else empty
    Norm attn_post_norm, mlp_post_norm;  // config.sandwich_norms: on each block's output; else empty
    int64_t window = 0;                  // the keys its attention reads (0: all)
    bool local_rope = false;             // RoPE from rope_local_inv_freq_ (Gemma 3's sliding layers)
  };
  // The activations of one forward of n tokens.
  struct Scratch {
    Tensor x, hn, qkv, ctx, a, g;  // g: [n, 2·intermediate] (gate | up, or the gate)
    Tensor lx, lhn;                // a batch's rows that give logits, gathered (forward_batch only)
    Tensor wk, wv;                 // a ring layer's window in position order, then the new rows (add_window_scratch)
    Tensor route, xin, xe, ye;     // a mixture: router logits [n, experts]; input, an expert's rows in and out [n, h]
  };
  // One sequence's rows of a forward: rows row .. row + n − 1 at positions past .. past + n − 1.
  struct Segment {
    int64_t row = 0, n = 0, past = 0;
    KvCache* cache = nullptr;
    int64_t logits_from = 0;
  };
  struct StepGraph;  // the recorded decode step (decoder_step_graph.cpp)
  void norm(const Norm& p, const Tensor& x, int64_t rows, const Tensor& out) const;
  // x += residual, then out = norm(x): one operation for RMSNorm, two for LayerNorm.
  void add_norm(const Norm& p, const Tensor& x, const Tensor& residual, int64_t rows, const Tensor& out) const;
  void linear(const OwnedLinear& l, const Tensor& x, int64_t m, const Tensor& y) const;
  // The attention of n rows, each segment over its own cache.
  void attention_block(const Layer& layer, int64_t index, const Scratch& s, int64_t n,
                       std::span<const Segment> segments) const;
  void mlp_block(const Layer& layer, const Scratch& s, int64_t n) const;
  // A mixture-of-experts MLP (decoder_lm_moe.cpp): reads s.hn, leaves the weighted experts' sum in s.hn.
  void moe_block(const Layer& layer, const Scratch& s, int64_t n) const;
  // A gated MLP (a dense layer's or an expert's) of width f over m rows x into y, through s.g and s.a: gate_up
  // fused, or gate and up apart. y may be x (its rows are read before down writes them).
  void gated_mlp(const OwnedLinear& gate_up, const OwnedLinear& gate, const OwnedLinear& up, const OwnedLinear& down,
                 int64_t f, const Tensor& x, int64_t m, const Tensor& y, const Scratch& s) const;
  // The attention of one segment's rows over a sliding-window layer's ring (decoder_lm_window.cpp): q, k
  // and v its rows (k and v turned by RoPE already), ctx its output rows.
  void ring_attention(const Layer& layer, int64_t index, const Scratch& s, const Segment& g, const Tensor& q,
                      int64_t q_stride, const Tensor& k, const Tensor& v, int64_t kv_stride, float scale,
                      const Tensor& ctx) const;
  // s.wk / s.wv, where a segment's ring layer reads its window from scratch (every forward but a decode
  // step over a ring of exactly the window): the window and n new rows. Nothing for whole caches.
  void add_window_scratch(Scratch& s, int64_t n, std::span<const Segment> segments) const;
  // The embeddings of n tokens at positions past .. past + n − 1 into out [n, hidden]: the FP32 table
  // (with GPT-2's positions), or the BF16 one widened as looked up.
  void embed_rows(const Tensor& ids, int64_t n, int64_t past, const Tensor& out) const;
  Scratch make_scratch(int64_t n) const;
  // Enqueues the forward of the n tokens `ids` (on the device), segment by segment at its positions,
  // into `out` (each segment's logits rows in turn; a single segment's straight from s.x, several
  // through s.lx / s.lhn); allocates nothing and leaves the caches' sizes as they were.
  void enqueue_forward(const Tensor& ids, int64_t n, std::span<const Segment> segments, const Scratch& s,
                       const Tensor& out) const;
  // forward()'s checks of one sequence; `what` names it in a message ("" for forward itself).
  void check_forward(const int32_t* ids, int64_t n, const KvCache& cache, int64_t logits_from,
                     std::string_view what) const;
  // The decode step through the recording; false where it does not run (then the caller runs it plainly).
  bool decode_step_graph(int32_t id, KvCache& cache, float* logits) const;

  std::shared_ptr<GraphOps> ops_;  // first: destroyed after every tensor it allocated
  DecoderConfig config_;
  Tensor token_embeddings_, position_embeddings_;
  std::vector<Layer> layers_;
  Norm final_norm_;
  OwnedLinear lm_head_;
  Tensor rope_inv_freq_;
  float rope_attention_factor_ = 1.0f;
  Tensor rope_local_inv_freq_;  // config.local_rope_theta > 0: the sliding layers' RoPE (no scaling)
  Tensor rope_long_inv_freq_;   // longrope: the frequencies past original_max_position_embeddings
  struct NamedLinear {
    std::string name;
    const kernels::Linear* linear;
    std::size_t fp32_bytes;    // weight + bias as FP32
    int parts = 1;             // the checkpoint Linears it stands for (fused: 2 or 3)
    double token_share = 1.0;  // the share of decode steps that read it: an expert's top-k / experts
  };
  std::vector<NamedLinear> all_linears_;
  Gate gate_ = Gate::silu;  // the gated MLP's activation: SwiGLU, or Gemma's GeGLU (config.activation)
  bool decode_graph_on_ = true;
  bool embeddings_in_head_ = false;                // token_embeddings_ views lm_head_'s rows (tied, held as stored)
  mutable std::shared_ptr<StepGraph> step_graph_;  // made by the first decode step that records
  mutable std::string decode_step_path_;
};

// Loads `dir` (config.json + safetensors) into a DecoderLM. `unused_tensors` (when not null) receives
// unused_tensors_warning(): "" when the model read every tensor it should.
// `adjust` (when set) changes the parameters before the model is built (a calibration's norms).
DecoderLM load_decoder_lm(const std::filesystem::path& dir, const LinearFactory& factory = fp32_linear_factory(),
                          std::string* unused_tensors = nullptr, std::shared_ptr<GraphOps> ops = nullptr,
                          const std::function<void(DecoderParams&)>& adjust = nullptr);

// The FP32 model of `dir` holding no Linear weights: each Linear reads its weights from the checkpoint
// at every forward (model/streamed_linear_f32.h), so the model holds its embeddings, norms and one
// layer's FP32 weights at a time. Outputs equal load_decoder_lm's FP32 ones; forwards are slower. For
// reference outputs of models whose FP32 weights would not fit beside the quantized one.
DecoderLM load_decoder_lm_streamed(const std::filesystem::path& dir);

}  // namespace qjoule::model
