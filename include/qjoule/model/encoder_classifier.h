// A BERT or DistilBERT sequence classifier: embeddings, post-LN transformer blocks (multi-head
// attention with the padding mask, GELU FFN), and the head (BERT: tanh pooler; DistilBERT: ReLU
// pre_classifier), then the classifier. Each Linear is built by a factory, so the same model runs FP32
// or any quantized format. The forward graph is written once against GraphOps (graph_ops.h): on the
// CPU backend (the default) with the CPU Linears, or on the CUDA backend with every weight on one GPU
// and the Linears of cuda_linear_factory (cuda_linear_factory.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "qjoule/kernels/linear.h"
#include "qjoule/model/encoder_params.h"
#include "qjoule/model/graph_ops.h"

namespace qjoule::model {

// Builds the Linear for one layer; `in_block` is true for the Linears inside transformer blocks
// (Q, K, V, attention output, FFN in/out) and false for the head.
// EncoderClassifier first offers each block's Q, K and V as one fused LinearParams (weights and biases
// concatenated [q; k; v], `fused_from` naming the three): the factory builds it when the three would
// get the same format and kernel — one activation pass and one GEMM instead of three — or returns
// nullptr, and the model then asks for the three separately. Only fused params may get nullptr.
using LinearFactory = std::function<std::unique_ptr<kernels::Linear>(const LinearParams& params, bool in_block)>;

// The default factory: FP32 on oneDNN for every layer (fused Q, K, V included).
LinearFactory fp32_linear_factory();

// One row per Linear that runs: what ran and what it holds. Fused Q, K and V are one row whose name
// joins the three, e.g. "distilbert.transformer.layer.0.attention.q_lin+k_lin+v_lin".
struct LinearReport {
  std::string name;
  std::string format;
  std::string kernel_path;
  std::size_t bytes_held = 0;
  std::size_t fp32_bytes = 0;
  // The share of tokens whose forward reads it: 1, or a mixture's experts_per_token / experts for an expert's
  // Linear (a decode step reads the chosen experts only).
  double token_share = 1.0;
};

// Precision of the activations between operations (`--act-dtype`). With bf16, every activation
// tensor an operation hands on (Linear outputs, attention context, LayerNorm, GELU, head) is rounded
// to BF16, and the non-GEMM operations compute in FP32 inside, as BF16 LayerNorm/softmax/GELU do.
// No x86 instruction set here does that arithmetic natively, so the rounding is done in place on
// FP32 buffers: the numbers are a BF16 pipeline's, the speed is not (see activation_path()).
enum class ActivationDtype { f32, bf16 };
ActivationDtype parse_activation_dtype(const std::string& text);  // "f32"/"fp32" or "bf16", else an error
std::string to_string(ActivationDtype dtype);

class EncoderClassifier {
 public:
  // `ops`: the backend every operation and tensor belongs to (nullptr: the CPU); the factory must build
  // Linears that backend runs (the CPU ones, or cuda_linear_factory's on the same GPU).
  EncoderClassifier(EncoderParams params, const LinearFactory& factory,
                    ActivationDtype activations = ActivationDtype::f32, std::shared_ptr<GraphOps> ops = nullptr);

  // ids, mask: [batch, seq] row-major host memory (mask 1 = token, 0 = padding); logits: [batch,
  // num_labels] host memory, written when forward returns. seq must not exceed max_position_embeddings
  // and every id must be < vocab_size (else an error). On a GPU the ids and mask are copied in, the
  // graph runs on the backend's stream and the logits are copied out.
  void forward(const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq, float* logits) const;
  // On the CPU a batch runs through the whole model in passes of whole sequences, about
  // kCpuTokensPerPass tokens each (at least one sequence): the activations of a pass stay near the caches
  // and are allocated once, so the cost per token does not grow with the batch. On a GPU, one pass.
  static constexpr int64_t kCpuTokensPerPass = 1024;
  int64_t sequences_per_pass(int64_t batch, int64_t seq) const;
  // One unpadded sequence through the model a part at a time (calibration, model/calibration/encoder_calibration.h):
  // embed writes its [seq, hidden] embeddings (after their LayerNorm) into host memory x, forward_block
  // runs block i (0 .. num_blocks() − 1) on x in place, every token attending to every other.
  void embed(const int32_t* ids, int64_t seq, float* x) const;
  void forward_block(int64_t i, float* x, int64_t seq) const;
  int64_t num_blocks() const { return static_cast<int64_t>(layers_.size()); }
  // forward() timed by the backend: from before the ids are copied in to after the logits are copied
  // out (CUDA events on the GPU, the steady clock on the CPU); returns the milliseconds.
  double forward_timed(const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq, float* logits) const;
  // Waits for everything the backend has queued.
  void synchronize() const { ops_->synchronize(); }
  Device device() const { return ops_->device(); }
  std::string device_name() const { return ops_->device_name(); }
  // The kernels of the operations other than the Linears, e.g. "qjoule:cuda: embedding_sum, add_layer_norm,
  // attention, gelu_erf, tanh".
  std::string nongemm_path() const;

  const EncoderConfig& config() const { return config_; }
  ActivationDtype activation_dtype() const { return activations_; }
  // How the non-GEMM operations ran: "f32" or "bf16 (emulated: ...)".
  std::string activation_path() const;
  // False when part of the run is emulated (bf16 activations), so its speed must not be reported
  // as that of a native pipeline.
  bool speed_representative() const { return activations_ == ActivationDtype::f32; }
  std::vector<LinearReport> linear_reports() const;
  // "format kernel_path" -> how many Linears ran it: what every result prints as the kernels that ran.
  // Fused Q, K, V Linears are counted apart, their key ending in kFusedQkvMark: DistilBERT-base in int8
  // gives {"int8 onednn:...:u8s8s32", 18}, {"int8 onednn:...:u8s8s32 [q+k+v fused]", 6} (6 blocks × 3
  // of its 36 Linears) and the FP32 head's {"fp32 ...", 2}.
  std::map<std::string, int> kernel_path_counts() const;
  static constexpr const char* kFusedQkvMark = " [q+k+v fused]";
  // Bytes held in memory: every Linear as packed + embeddings, norms and other FP32 tensors.
  std::size_t bytes_held() const;
  std::size_t fp32_bytes() const;  // the same model held entirely in FP32

 private:
  struct OwnedLinear {
    std::unique_ptr<kernels::Linear> linear;
    std::string name;
    explicit operator bool() const { return linear != nullptr; }
  };
  struct Layer {
    OwnedLinear qkv;      // Q, K and V as one Linear [3·hidden], when fused
    OwnedLinear q, k, v;  // otherwise
    OwnedLinear o, ffn_in, ffn_out;
    Tensor attn_gamma, attn_beta, ffn_gamma, ffn_beta;
  };
  struct NamedLinear {
    std::string name;
    const kernels::Linear* linear;
    bool fused_qkv = false;
  };

  // One pass's inputs and activations (forward() allocates them once for its largest pass).
  struct PassBuffers {
    Tensor ids, mask, x, qkv, ctx, tmp, ffn, cls, pooled;
  };
  // The buffers of the last forward, kept for the next one of the same pass size: a block allocated
  // and freed on every call left a hole in the heap that smaller allocations took, so the next block
  // came from fresh memory and a run's peak grew by a block (SST-2 DistilBERT-mini, b64: 10 MB).
  // A forward that finds them in use (another thread's) allocates its own.
  struct Workspace {
    std::mutex mutex;
    int64_t rows = 0, per_pass = 0;
    PassBuffers buffers;
  };
  PassBuffers pass_buffers(int64_t per_pass, int64_t seq) const;
  void forward_pass(const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq, float* logits,
                    const PassBuffers& buffers) const;
  void check_ids(const int32_t* ids, int64_t batch, int64_t seq) const;
  void embed_pass(const Tensor& ids, int64_t rows, int64_t seq, const Tensor& x) const;
  void block_pass(const Layer& layer, const PassBuffers& b, const Tensor& mask, int64_t batch, int64_t seq) const;
  void round_activations(const Tensor& x, int64_t n) const;
  void linear(const OwnedLinear& l, const Tensor& x, int64_t m, const Tensor& y) const;

  std::shared_ptr<GraphOps> ops_;  // first: destroyed after every tensor it allocated
  EncoderConfig config_;
  ActivationDtype activations_ = ActivationDtype::f32;
  Tensor word_embeddings_, position_embeddings_, token_type0_;  // token type 0's row only (BERT)
  Tensor embedding_gamma_, embedding_beta_;
  std::vector<Layer> layers_;
  OwnedLinear head_dense_, classifier_;
  std::vector<NamedLinear> all_linears_;
  std::unique_ptr<Workspace> workspace_ = std::make_unique<Workspace>();  // after ops_: freed before it
};

// The tokens of one CPU pass (EncoderClassifier::sequences_per_pass): kCpuTokensPerPass, or
// QJOULE_TOKENS_PER_PASS where set (benchmarks: a large value runs every batch in one pass); a value
// that is not a positive integer is one line naming it.
int64_t cpu_tokens_per_pass();

// Loads `dir` (config.json + safetensors) into an EncoderClassifier.
EncoderClassifier load_encoder_classifier(const std::filesystem::path& dir,
                                          const LinearFactory& factory = fp32_linear_factory());

}  // namespace qjoule::model
