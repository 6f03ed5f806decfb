// What `qjoule ppl` and `qjoule generate` share: their quantization flags and --device turned into the
// model module's load_decoder (qjoule/model/decoder_loading.h), and the header lines both print.
#pragma once

#include <string>

#include "cli/calibration_options.h"
#include "cli/quant_options.h"
#include "qjoule/model/decoder_loading.h"

namespace qjoule::cli {

// The decoder of `dir` with the flags' formats on `device` ("cpu", or "cuda[:N]", checked first, so
// that a machine without a usable GPU or driver says so in one line before anything loads); a
// checkpoint's unused tensors are a warning on stderr. A calibrated precision (int4:...:gptq) is
// calibrated first, on `calib`'s text (calibration_options.h).
model::LoadedDecoder load_decoder_for(const std::string& dir, const QuantArgs& quant, const std::string& device,
                                      const CalibrationArgs& calib = {});

// The help text of `--device` for the decoder commands.
inline constexpr const char* kDecoderDeviceHelp =
    "cpu, or cuda / cuda:N: the whole model and its KV cache on GPU N (formats fp32, tf32, fp16, bf16, int8, fp8, "
    "int4, nf4; where the CUDA backend is built and a GPU is usable)";

// "model      DIR (LlamaForCausalLM: 2 layers, hidden 64, heads 4/2, vocab 560, positions 128)"
// "precision  int8: <kernel summary>"  "size       ... held in memory (... as FP32)"
void print_decoder_header(const std::string& dir, const model::LoadedDecoder& d, const QuantArgs& quant);

}  // namespace qjoule::cli
