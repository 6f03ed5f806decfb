// `qjoule export --to gguf`: an unquantized Llama, Mistral, Qwen2, Qwen3, Gemma 3 or Phi-3 decoder, or a
// Mixtral, Qwen3-MoE or OLMoE mixture, written as one GGUF file (io/gguf.h) that llama.cpp loads, in the GGUF
// type that holds a qjoule format bit for bit:
//   int4:g=32:sym  Q4_0 for the transformer-block Linears: qjoule's own codes and FP16 scales, only the
//                  nibble order differs (Q4_0 byte j = weight j (low nibble) | weight j + 16 (high));
//                  calibrated (int4:g=32:sym:gptq, :awq, :gptq:actorder, whose groups stay contiguous)
//                  the same, from calibration's codes, with the norms and biases AWQ changed;
//                  embeddings and lm_head as stored (F16, BF16, F32), norms and biases F32
//   mxfp4          MXFP4 for the same Linears: the same E8M0 scales and E2M1 codes (Q4_0's nibble order)
//   nvfp4          NVFP4 for them: four 16-blocks' E4M3 scales and codes a GGML block of 64, the FP32 tensor
//                  scale as "<name>.scale" ({1}; a mixture's {experts}, one per expert), which llama.cpp
//                  multiplies the product by
//   fp16, bf16     F16 / BF16 for every matrix, norms and biases F32
// A mixture's router stays F32 (qjoule runs it in FP32); its experts go into llama.cpp's stacked tensors
// (blk.N.ffn_gate_exps / ffn_up_exps / ffn_down_exps, ne = {in, out, experts}), Mixtral as llama.cpp's llama,
// Qwen3-MoE as qwen3moe, OLMoE as olmoe (with its head written out when tied: olmoe reads no tied head).
//   fp32           F32
// Tensors get llama.cpp's names (token_embd, blk.N.attn_q, ffn_gate, output_norm, output, ...); Llama's Q
// and K rows are permuted as llama.cpp's converter does (heads' rotary halves interleaved: GGUF's rope
// is the interleaved one), Qwen2's are not (its rope is the NeoX one, as Hugging Face's). llama3 rope
// scaling becomes the rope_freqs tensor, linear scaling rope.scaling.* keys; other scalings are refused.
// The tokenizer goes into the metadata: byte-level BPE as llama.cpp's "gpt2" model (tokens, types,
// merges), SentencePiece-style BPE (byte fallback) as its "llama" model with each token scored by its
// merge rank. Streams one Linear at a time; refusals (spec, architecture, shapes, existing file) come
// before anything is written.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "qjoule/model/calibrated_int4.h"
#include "qjoule/quant/format_spec.h"

namespace qjoule::model {

inline constexpr const char* kGgufExportableSpecs =
    "int4:g=32:sym (Q4_0), mxfp4 (MXFP4), nvfp4 (NVFP4), fp16, bf16, fp32";
// qjoule's own metadata keys: the source's config.json and tokenizer.json, verbatim (gguf_import.h).
inline constexpr const char* kGgufConfigKey = "qjoule.hf_config_json";
inline constexpr const char* kGgufTokenizerKey = "qjoule.hf_tokenizer_json";

struct GgufExportSummary {
  std::string architecture;  // "llama", "qwen2"
  std::string tensor_type;   // "Q4_0", "F16", ...
  std::string tokenizer;     // "gpt2", "llama"
  int64_t tensors = 0;
  int64_t quantized = 0;  // Linears in a quantized type (a stacked tensor's experts each)
  uint64_t bytes = 0;
};

// Every refusal of export_gguf (spec, architecture, shapes, existing file) without writing: `export` runs it
// before calibrating.
void check_gguf_export(const std::filesystem::path& model, const quant::FormatSpec& spec,
                       const std::filesystem::path& out);

// `calibrated`: a calibrated spec's codes (int4:g=32:sym:gptq, :awq, ...: Q4_0 too), with the norms and biases
// AWQ changed; required for such a spec (else one line), ignored otherwise.
GgufExportSummary export_gguf(const std::filesystem::path& model, const quant::FormatSpec& spec,
                              const std::filesystem::path& out,
                              const std::function<void(int64_t, int64_t, const std::string&)>& progress = {},
                              const CalibratedInt4* calibrated = nullptr);

}  // namespace qjoule::model
