// A decoder language model and its tokenizer, loaded for a device: what `qjoule ppl` and `generate`
// run (the CLI turns their flags into the layer policy; the loading is this module's).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/calibrated_int4.h"
#include "qjoule/quant/layer_policy.h"
#include "qjoule/tokenize/bpe_tokenizer.h"

namespace qjoule::model {

struct LoadedDecoder {
  DecoderLM model;
  tokenize::BpeTokenizer tokenizer;
  bool on_gpu = false;
  std::string unused_tensors;  // unused_tensors_warning() of the checkpoint ("" when every tensor is used)
  std::string calibration;     // how calibrated Linears were made (the header's line), "" when none were
};

// The checkpoint and tokenizer.json of `dir`, the Linears built per `policy` on top of `defaults`, one
// at a time from the memory-mapped checkpoint, on the CPU (`gpu` < 0) or on GPU `gpu` (already checked
// with kernels::require_cuda_device: every weight and the KV cache there). A tokenizer whose vocabulary
// is larger than the model's is an error naming both sizes.
// `calibrated` (not null): the Linears it holds codes for are built from them (calibrated_linear_factory.h); CPU
// only (a GPU is one line).
LoadedDecoder load_decoder(const std::filesystem::path& dir, int gpu, const quant::LayerPolicy& policy,
                           std::shared_ptr<CalibratedInt4> calibrated = nullptr);

}  // namespace qjoule::model
