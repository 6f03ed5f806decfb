#include "bench/roofline_work.h"

#include <algorithm>
#include <map>

#include "qjoule/model/decoder_lm.h"

namespace qjoule::bench {
namespace {

// Heads that see one token per sequence (DistilBERT's pre_classifier / classifier, BERT's pooler; a
// decoder's lm_head in prefill).
bool is_head(const std::string& name) {
  return name.find("classifier") != std::string::npos || name.find("pooler") != std::string::npos ||
         name == "lm_head" || name.ends_with(".lm_head");
}

double multiply_adds(const model::LinearReport& l) { return static_cast<double>(l.fp32_bytes) / sizeof(float); }

// The keys the decode steps' attention reads, summed over the layers, a step on average: the step at
// context c (prompt + 1 .. prompt + steps) reads c keys in a full layer and min(c, w) in a window of w.
double mean_keys_read(const model::DecoderConfig& cfg, int64_t prompt, int64_t steps) {
  const double mean_context = static_cast<double>(prompt) + (static_cast<double>(steps) + 1.0) / 2.0;
  double keys = 0.0;
  for (int64_t layer = 0; layer < cfg.num_layers; ++layer) {
    const int64_t w = cfg.window(layer);
    if (w <= 0 || w >= prompt + steps) {
      keys += mean_context;
      continue;
    }
    double sum = 0.0;
    for (int64_t c = prompt + 1; c <= prompt + steps; ++c) sum += static_cast<double>(std::min(c, w));
    keys += steps > 0 ? sum / static_cast<double>(steps) : static_cast<double>(std::min(prompt + 1, w));
  }
  return keys;
}

// The compute type that did most of the products: the FLOP-weighted majority of the Linears' types.
limits::ComputeType dominant_type(const std::map<limits::ComputeType, double>& flops) {
  limits::ComputeType best = limits::ComputeType::fp32;
  double most = -1.0;
  for (const auto& [type, f] : flops)
    if (f > most) best = type, most = f;
  return best;
}

}  // namespace

limits::ComputeType prefill_compute_type(const std::string& kernel_path) {
  std::string prefill = kernel_path;
  if (const auto at = prefill.find("m>4:"); at != std::string::npos) prefill = prefill.substr(at + 4);
  // The CUDA backend's cuBLASLt types (the 4-bit formats' prefill multiplies FP16 panels).
  if (prefill.find("cublaslt") != std::string::npos) {
    if (prefill.find("f16_cublaslt") != std::string::npos || prefill.find("cublaslt:f16") != std::string::npos)
      return limits::ComputeType::fp16;
    if (prefill.find("cublaslt:tf32") != std::string::npos) return limits::ComputeType::tf32;
    if (prefill.find("cublaslt:bf16") != std::string::npos) return limits::ComputeType::bf16;
    if (prefill.find("cublaslt:s8") != std::string::npos) return limits::ComputeType::int8;
    if (prefill.find("cublaslt:e4m3") != std::string::npos) return limits::ComputeType::fp8;
    return limits::ComputeType::fp32;
  }
  // qjoule's integer kernels: int4 on INT8 activations ("int4_s8", "int4_s8_repacked") and on 16-bit ones at
  // every m ("int4_x16_repacked", "mxfp4_x16_repacked", "nvfp4_x16_repacked": two vpdpbusd a product;
  // "nf4_x16_repacked", "nf4dq_x16_repacked": one vpdpwssd a pair, as many products an instruction; so at most
  // half of this roof). At the avx512_bf16 level a repacked layer's prefill runs panels instead
  // ("..._x16_repacked,m>4:bf16_panel+...": the text after "m>4:", counted below).
  if (prefill.starts_with("qjoule:") &&
      (prefill.find("_s8") != std::string::npos || prefill.ends_with("_x16_repacked")))
    return limits::ComputeType::int8;
  // oneDNN names the ISA of the implementation that ran: "..._amx" (oneDNN 3: avx512_core_amx) or
  // "..._amx_int8" / "..._amx_bf16" (oneDNN 2: avx512_core_bf16_amx_int8): AMX tiles did the products.
  const bool tiles = prefill.find("_amx") != std::string::npos;
  if (prefill.find("u8s8") != std::string::npos || prefill.find("s8s8") != std::string::npos ||
      prefill.find("amx_int8") != std::string::npos)
    return tiles ? limits::ComputeType::amx_int8 : limits::ComputeType::int8;
  if (prefill.find("bf16_panel") != std::string::npos || prefill.find("bf16bf16") != std::string::npos ||
      prefill.find("amx_bf16") != std::string::npos)
    return tiles ? limits::ComputeType::amx_bf16 : limits::ComputeType::bf16;
  return limits::ComputeType::fp32;
}

limits::PhaseWork encoder_phase_work(const model::EncoderClassifier& m, int64_t batch, int64_t seq) {
  const auto& cfg = m.config();
  const double tokens_per_pass = static_cast<double>(m.sequences_per_pass(batch, seq) * seq);
  std::map<limits::ComputeType, double> flops_by_type;
  limits::PhaseWork w;
  for (const auto& l : m.linear_reports()) {
    const double flops = 2.0 * multiply_adds(l) / (is_head(l.name) ? static_cast<double>(seq) : 1.0);
    w.flops_per_token += flops;
    flops_by_type[prefill_compute_type(l.kernel_path)] += flops;
    w.bytes_per_token += static_cast<double>(l.bytes_held) / tokens_per_pass;
  }
  // QKᵀ and P·V over the sequence: 2 × 2 × seq × hidden per token and layer, in FP32.
  w.fp32_flops_per_token = 4.0 * static_cast<double>(seq * cfg.hidden_size * cfg.num_layers);
  w.flops_per_token += w.fp32_flops_per_token;
  w.compute = dominant_type(flops_by_type);
  return w;
}

limits::PhaseWork decoder_prefill_work(const model::DecoderLM& m, int64_t seq, int64_t logits_rows) {
  const auto& cfg = m.config();
  std::map<limits::ComputeType, double> flops_by_type;
  limits::PhaseWork w;
  const double head_share = static_cast<double>(logits_rows) / static_cast<double>(seq);
  for (const auto& l : m.linear_reports()) {
    const double flops = 2.0 * multiply_adds(l) * (is_head(l.name) ? head_share : l.token_share);
    w.flops_per_token += flops;
    flops_by_type[prefill_compute_type(l.kernel_path)] += flops;
    w.bytes_per_token += static_cast<double>(l.bytes_held) / static_cast<double>(seq);
  }
  // Causal attention, in FP32: a token at position i attends to i + 1 keys ((seq + 1) / 2 on average),
  // at most a sliding window's.
  w.fp32_flops_per_token = 4.0 * mean_keys_read(cfg, 0, seq) * static_cast<double>(cfg.q_dim());
  w.flops_per_token += w.fp32_flops_per_token;
  w.compute = dominant_type(flops_by_type);
  return w;
}

double decoder_decode_bytes_per_token(const model::DecoderLM& m, int64_t prompt, int64_t steps) {
  const auto& cfg = m.config();
  double bytes = 0.0;
  // A mixture's expert Linears: the top-k experts' share of them (token_share), the bytes a step reads.
  for (const auto& l : m.linear_reports()) bytes += static_cast<double>(l.bytes_held) * l.token_share;
  // The token's embedding row, as held.
  bytes += static_cast<double>(cfg.hidden_size) * (m.embeddings_format() == "bf16" ? 2.0 : 4.0);
  // Keys and values of every earlier position a layer reads (a sliding window's last w), FP32.
  bytes += 2.0 * static_cast<double>(cfg.kv_dim()) * mean_keys_read(cfg, prompt, steps) * sizeof(float);
  return bytes;
}

double decoder_decode_flops_per_token(const model::DecoderLM& m, int64_t prompt, int64_t steps) {
  const auto& cfg = m.config();
  double flops = 0.0;
  for (const auto& l : m.linear_reports()) flops += 2.0 * multiply_adds(l) * l.token_share;
  return flops + 4.0 * mean_keys_read(cfg, prompt, steps) * static_cast<double>(cfg.q_dim());
}

}  // namespace qjoule::bench
