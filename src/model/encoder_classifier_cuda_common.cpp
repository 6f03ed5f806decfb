// The parts of EncoderClassifierCuda that need no GPU and are the same in every build: the format of
// each Linear (the layer policy, as on the CPU) and the checks of forward()'s inputs.
#include "model/encoder_classifier_cuda_common.h"

#include "qjoule/error.h"
#include "qjoule/kernels/linear_cuda.h"

namespace qjoule::model {

CudaLinearFormats cuda_linear_formats(const quant::LayerPolicy& policy, const quant::FormatSpec& defaults) {
  return [policy, defaults](const LinearParams& p, bool in_block) {
    const auto format = quant::parse_format_spec(policy.resolve(p.name, in_block).format, defaults);
    kernels::check_cuda_format(format, "tensor '" + p.name + "'");
    return format;
  };
}

namespace cuda_model_detail {

void check_forward_inputs(const EncoderConfig& config, const int32_t* ids, int64_t batch, int64_t seq) {
  // EncoderClassifier::forward's checks, with its messages.
  if (batch <= 0 || seq <= 0) fail("forward: batch {} × sequence {} is empty", batch, seq);
  if (seq > config.max_positions)
    fail("forward: sequence length {} exceeds max_position_embeddings {}", seq, config.max_positions);
  const int64_t rows = batch * seq;
  for (int64_t i = 0; i < rows; ++i) {
    if (ids[i] < 0 || ids[i] >= config.vocab_size)
      fail("forward: token id {} at batch row {}, position {} is outside the vocabulary [0, {})", ids[i], i / seq,
           i % seq, config.vocab_size);
  }
}

bool fuses_qkv(const quant::FormatSpec& q, const quant::FormatSpec& k, const quant::FormatSpec& v) {
  if (k != q || v != q) return false;
  // fp8 has one scale per tensor and nf4:dq quantizes its absmax values in groups of 256 blocks: one
  // fused tensor would not hold the numbers of three.
  return q.format != quant::Format::fp8 && !(q.format == quant::Format::nf4 && q.nf4_double_quant);
}

std::string fused_name(const std::vector<std::string>& names) {
  const auto dot = names.front().rfind('.');
  const std::string prefix = dot == std::string::npos ? "" : names.front().substr(0, dot + 1);
  std::string out = names.front();
  for (std::size_t i = 1; i < names.size(); ++i)
    out += "+" + (names[i].starts_with(prefix) ? names[i].substr(prefix.size()) : names[i]);
  return out;
}

}  // namespace cuda_model_detail
}  // namespace qjoule::model
