// Reading back a GGUF file that `qjoule export --to gguf` wrote (model/export/gguf_export.h): `qjoule export
// --model FILE.gguf --out DIR` turns it into the Hugging Face folder qjoule loads, so that the round trip
// can be measured (`qjoule ppl --model DIR`):
//   * config.json and tokenizer.json: the originals, kept verbatim in the file's qjoule.hf_* keys;
//   * llama.cpp's names mapped back, Llama's Q / K rows un-permuted;
//   * Q4_0 matrices as a GPTQ checkpoint (gptq_v2, sym, group_size 32: the same codes, zero point 8 and
//     FP16 scales), which qjoule reads as int4:g=32:sym, the very blocks that were exported;
//   * F16, BF16 and F32 tensors in their own dtype.
// A GGUF written by another tool (no qjoule.hf_* keys: its tokenizer and configuration cannot be given
// back exactly) or holding other tensor types is refused in one line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace qjoule::model {

struct GgufImportSummary {
  std::string architecture;  // general.architecture
  int64_t tensors = 0, q4_0 = 0;
  std::string precision;  // what the folder's model runs as: "int4:g=32:sym", or "" for a plain one
};

// `out`: a new or empty folder.
GgufImportSummary import_gguf(const std::filesystem::path& gguf, const std::filesystem::path& out);

}  // namespace qjoule::model
