// Loading a decoder language model and its tokenizer for `qjoule ppl` and `qjoule generate`, with
// the quantization options applied, and the header lines both print.
#pragma once

#include <string>

#include "cli/quant_options.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/tokenize/bpe_tokenizer.h"

namespace qjoule::cli {

struct LoadedDecoder {
  model::DecoderLM model;
  tokenize::BpeTokenizer tokenizer;
  bool on_gpu = false;
};

// The checkpoint and tokenizer.json of `dir`, the Linears built per the options, on `device` ("cpu",
// or "cuda[:N]": every weight and the KV cache on GPU N, checked first, so that a machine without a
// usable GPU or driver says so in one line before anything loads). A tokenizer whose vocabulary is
// larger than the model's is an error naming both sizes.
LoadedDecoder load_decoder(const std::string& dir, const QuantArgs& quant, const std::string& device = "cpu");

// The help text of `--device` for the decoder commands.
inline constexpr const char* kDecoderDeviceHelp =
    "cpu, or cuda / cuda:N: the whole model and its KV cache on GPU N (formats fp32, tf32, fp16, bf16, int8, fp8, "
    "int4, nf4; where the CUDA backend is built and a GPU is usable)";

// "model      DIR (LlamaForCausalLM: 2 layers, hidden 64, heads 4/2, vocab 560, positions 128)"
// "precision  int8: <kernel summary>"  "size       ... held in memory (... as FP32)"
void print_decoder_header(const std::string& dir, const LoadedDecoder& d, const QuantArgs& quant);

}  // namespace qjoule::cli
