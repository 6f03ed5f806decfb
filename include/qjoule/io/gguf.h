// GGUF, llama.cpp's model file (version 3, little-endian), written by `qjoule export --to gguf` and read
// back (checked) by the tests and the fuzz target. Layout, from the public specification (ggml's
// docs/gguf.md):
//   u32 magic "GGUF" (0x46554747), u32 version, u64 tensor count, u64 metadata count;
//   metadata: (string key, u32 value type, value)*, a string being u64 length + UTF-8 bytes, an array
//     u32 element type + u64 count + elements;
//   tensor infos: (string name, u32 n_dims, u64 ne[n_dims] (ne[0] the contiguous dimension, i.e. a
//     Hugging Face [out, in] weight is ne = {in, out}), u32 ggml type, u64 offset into the data)*;
//   padding to general.alignment (32 when absent), then the tensor data, each tensor at its offset
//   (a multiple of the alignment).
// Tensor types written (ggml's ggml-common.h and ggml-quants.c's dequantize_row_*), a block along ne[0]:
//   Q4_0   32 weights: FP16 scale d, 16 bytes of codes, byte j holding weight j in its low nibble and
//          weight j + 16 in its high nibble; w = (q − 8) · d.
//   MXFP4  32 weights: E8M0 scale e, then 16 bytes of E2M1 codes in Q4_0's nibble order; w = E2M1 · 2^(e − 127).
//   NVFP4  64 weights: 4 UE4M3 scales (one per 16), then 32 bytes of E2M1 codes, 8 a 16-weight sub-block in
//          Q4_0's nibble order within it (byte j: weight j low, j + 8 high); w = E2M1 · E4M3(d); the FP32 tensor
//          scale is a tensor of its own, "<name>.scale" ({1}, or {experts}), that multiplies the product.
//   F32, F16, BF16.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/io/mapped_file.h"

namespace qjoule::io {

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
inline constexpr uint32_t kGgufVersion = 3;
inline constexpr uint64_t kGgufAlignment = 32;

enum class GgufValueType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12
};

enum class GgmlType : uint32_t { f32 = 0, f16 = 1, q4_0 = 2, bf16 = 30, mxfp4 = 39, nvfp4 = 40 };
inline constexpr int64_t kQ4_0Block = 32;                                  // weights per Q4_0 block
inline constexpr int64_t kQ4_0BlockBytes = 18;                             // FP16 d + 16 bytes of codes
inline constexpr int64_t kGgmlMxfp4Block = 32, kGgmlMxfp4BlockBytes = 17;  // E8M0 + 16 bytes of codes
inline constexpr int64_t kGgmlNvfp4Block = 64, kGgmlNvfp4BlockBytes = 36;  // 4 UE4M3 + 32 bytes of codes

// "F32", "F16", "BF16", "Q4_0", "MXFP4", "NVFP4".
const char* ggml_type_name(GgmlType type);
// Weights a block of `type` holds (1 for F32, F16, BF16).
int64_t ggml_block_size(GgmlType type);
// Bytes of a tensor of `type` whose contiguous dimension is ne0 and that has `rows` rows; one line when
// ne0 does not fill whole blocks.
uint64_t ggml_tensor_bytes(GgmlType type, int64_t ne0, int64_t rows, const std::string& name);

class GgufWriter {
 public:
  void add_u32(const std::string& key, uint32_t value);
  void add_f32(const std::string& key, float value);
  void add_bool(const std::string& key, bool value);
  void add_string(const std::string& key, const std::string& value);
  void add_strings(const std::string& key, const std::vector<std::string>& values);
  void add_f32s(const std::string& key, const std::vector<float>& values);
  void add_i32s(const std::string& key, const std::vector<int32_t>& values);
  void add_bools(const std::string& key, const std::vector<bool>& values);
  // `ne`: dimensions, contiguous first; `data` must hold ggml_tensor_bytes() bytes and live until write().
  void add_tensor(const std::string& name, std::vector<int64_t> ne, GgmlType type, std::span<const std::byte> data);
  // Writes the file (header, metadata with general.alignment, tensor infos, aligned data), fsynced.
  void write(const std::filesystem::path& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> ne;
    GgmlType type;
    std::span<const std::byte> data;
  };
  std::vector<std::byte> metadata_;
  uint64_t metadata_count_ = 0;
  std::vector<Tensor> tensors_;
  void key(const std::string& k, GgufValueType type);
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> ne;  // contiguous first
  GgmlType type = GgmlType::f32;
  const std::byte* data = nullptr;
  uint64_t nbytes = 0;
};

// A GGUF file, mapped and checked: magic, version (2 or 3), every count, string, array and tensor
// within the file, known value and tensor types, offsets aligned and inside the data, tensors not
// overlapping. Metadata values as JSON (arrays as arrays; integers, floats, booleans, strings). A bad
// file fails in one line naming it, the item and what was found.
struct GgufFile {
  uint32_t version = 0;
  std::map<std::string, nlohmann::json> metadata;
  std::map<std::string, GgufTensor> tensors;
  std::shared_ptr<MappedFile> file;
};
GgufFile read_gguf(const std::filesystem::path& path);

}  // namespace qjoule::io
