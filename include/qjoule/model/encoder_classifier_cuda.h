// A BERT or DistilBERT sequence classifier resident on one NVIDIA GPU: the same model as
// EncoderClassifier (encoder_classifier.h), operation for operation, with every weight on GPU N.
//
//   embeddings   word + position (+ token type 0) gather           qjoule:cuda:embedding_sum
//   LayerNorm    embeddings and after each residual add            qjoule:cuda:add_layer_norm
//   Linears      CudaLinear (linear_cuda.h), in the format the      cuBLASLt / qjoule 4-bit kernels
//                layer policy gives each one; Q, K and V as one
//                Linear [3·hidden] when they get the same format
//                (not fp8: one per-tensor scale; nor nf4:dq: its
//                absmax groups would straddle them)
//   attention    padding-mask softmax attention, one block per      qjoule:cuda:attention
//                (query, head, sequence)
//   GELU / ReLU  FFN activation                                    qjoule:cuda:gelu_erf / relu
//   head         [CLS] rows gathered on the device; pooler tanh     qjoule:cuda:tanh / relu
//                (BERT) or pre_classifier ReLU (DistilBERT), then
//                the classifier
//
// forward() copies the ids and mask in explicitly (through pinned host buffers), runs everything on
// the model's own stream, copies the logits out and waits: no tensor ever lives on another device.
// FP32 activations only (EncoderClassifier's bf16 activation emulation has no GPU twin).
//
// Without the CUDA backend (QJOULE_CUDA=OFF) this header still compiles and the constructor fails
// with one line saying so; without a usable GPU it fails with cuda_device_status()'s reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qjoule/kernels/make_linear.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/encoder_params.h"
#include "qjoule/quant/layer_policy.h"

namespace qjoule::model {

// The format of one Linear on the GPU; `in_block` as for LinearFactory.
using CudaLinearFormats = std::function<quant::FormatSpec(const LinearParams& params, bool in_block)>;

// The layer policy's decision for each Linear, parsed with kernels::parse_cuda_precision (so "tf32"
// and "fp8" are names too) on top of `defaults`: block Linears get --precision (or their rule), the
// head stays fp32, exactly as quantized_linear_factory decides on the CPU.
CudaLinearFormats cuda_linear_formats(const quant::LayerPolicy& policy, const quant::FormatSpec& defaults = {});

class EncoderClassifierCuda {
 public:
  // Builds every Linear with make_linear_cuda on GPU `device` and uploads the embeddings and norms.
  // Errors (no GPU, a format without a CUDA kernel, a shape the format cannot take) are one line.
  EncoderClassifierCuda(const EncoderParams& params, const CudaLinearFormats& formats, int device = 0);
  ~EncoderClassifierCuda();
  EncoderClassifierCuda(const EncoderClassifierCuda&) = delete;
  EncoderClassifierCuda& operator=(const EncoderClassifierCuda&) = delete;

  // As EncoderClassifier::forward, host pointers in and out: ids, mask [batch, seq] (1 = token,
  // 0 = padding), logits [batch, num_labels]. The same checks, with the same messages.
  void forward(const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq, float* logits) const;

  // forward() timed on the GPU: CUDA events recorded on the model's stream before the ids are copied in
  // and after the logits are copied out; returns the milliseconds between them.
  double forward_timed(const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq, float* logits) const;

  // Waits for everything queued on this model's GPU (the whole device, not only the model's stream).
  void synchronize() const;

  const EncoderConfig& config() const { return config_; }
  int device() const { return device_; }
  // "0: NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)"
  std::string device_name() const;

  std::vector<LinearReport> linear_reports() const;
  // As EncoderClassifier::kernel_path_counts: "format kernel_path" -> Linears, fused Q, K, V apart
  // (their key ending in kFusedQkvMark).
  std::map<std::string, int> kernel_path_counts() const;
  static constexpr const char* kFusedQkvMark = " [q+k+v fused]";
  // What runs besides the Linears, e.g. "qjoule:cuda:embedding_sum,add_layer_norm,attention,gelu_erf,tanh".
  std::string nongemm_path() const;
  // Device bytes of the parameters: every Linear as held + embeddings, norms (not the activations).
  std::size_t bytes_held() const;
  std::size_t fp32_bytes() const;  // the same model held entirely in FP32
  // Device bytes of the activation workspace, as large as the largest batch × sequence so far.
  std::size_t workspace_bytes() const;

 private:
  struct Impl;
  EncoderConfig config_;
  int device_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qjoule::model
