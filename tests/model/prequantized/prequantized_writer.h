// Writes a copy of a decoder fixture as a GPTQ or AWQ checkpoint, from the public layouts
// (model/prequantized/prequantized_linear.h repeats them): each block Linear's codes, scales and zeros packed into
// qweight / qzeros / scales (/ g_idx), every other tensor as it was, config.json with its
// quantization_config. The codes come from `codes_of`: qjoule's own quantizer (so that an import can be
// compared bit for bit with qjoule's format on the same codes) or a test's own rule (one group per
// row). It also returns the FP32 weights the codes decode to, W = (u − z) · s, computed here from
// what it wrote, for an independent comparison.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <span>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/io/safetensors.h"
#include "qjoule/quant/fp16_convert.h"
#include "qjoule/quant/quantize_int4.h"

namespace qjoule::test {

// One Linear's codes u[o, i] in [0, 15], and per group g of its inputs: scale s[g, o] (FP16 bits) and
// zero z[g, o].
struct LinearCodes {
  int64_t out = 0, in = 0, groups = 0;
  std::vector<uint8_t> u;       // [out, in]
  std::vector<uint16_t> scale;  // [groups, out]
  std::vector<int> zero;        // [groups, out]
};

struct PrequantizedLayout {
  std::string method = "gptq";      // or "awq"
  int group_size = 128;             // as written in config.json (-1: one group per row)
  bool sym = false;                 // gptq
  bool v2 = true;                   // gptq: checkpoint_format gptq_v2 (zeros as is) or gptq (z − 1)
  bool g_idx = true;                // gptq: write g_idx
  bool g_idx_out_of_order = false;  // gptq: swap g_idx's first and last entries (a broken checkpoint)
};

// qjoule's own quantizer's codes for one Linear, read back out of its blocks (one group per block).
template <class Block>
LinearCodes qjoule_codes(const std::string& name, const std::vector<float>& w, int64_t out, int64_t in) {
  constexpr bool asym = std::is_same_v<Block, quant::BlockInt4Asym<Block::kSize>>;
  const auto m = quant::quantize_matrix_int4<Block>(w.data(), out, in, name);
  LinearCodes c{out, in, m.blocks_per_row(), {}, {}, {}};
  c.u.resize(static_cast<std::size_t>(out * in));
  c.scale.resize(static_cast<std::size_t>(c.groups * out));
  c.zero.resize(static_cast<std::size_t>(c.groups * out));
  for (int64_t o = 0; o < out; ++o)
    for (int64_t b = 0; b < c.groups; ++b) {
      const Block& block = m.row(o)[b];
      c.scale[static_cast<std::size_t>(b * out + o)] = block.d;
      if constexpr (asym) {
        c.zero[static_cast<std::size_t>(b * out + o)] = block.zero;
      } else {
        c.zero[static_cast<std::size_t>(b * out + o)] = quant::kInt4SymZero;
      }
      for (int64_t k = 0; k < Block::kSize && b * Block::kSize + k < in; ++k) {
        const uint8_t byte = block.qs[k / 2];
        c.u[static_cast<std::size_t>(o * in + b * Block::kSize + k)] = k % 2 == 0 ? byte >> 4 : byte & 15;
      }
    }
  return c;
}

inline bool is_block_linear(const std::string& name) {
  for (const char* part : {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"})
    if (name.find(std::string(".") + part + ".weight") != std::string::npos) return true;
  return false;
}

// Writes `dst` from `src`; returns, by Linear name, the FP32 weights the codes decode to.
inline std::map<std::string, std::vector<float>> write_prequantized_copy(
    const std::filesystem::path& src, const std::filesystem::path& dst, const PrequantizedLayout& layout,
    const std::function<LinearCodes(const std::string& name, const std::vector<float>& w, int64_t out, int64_t in)>&
        codes_of) {
  namespace fs = std::filesystem;
  fs::create_directories(dst);
  const auto ck = io::Checkpoint::open(src);
  std::vector<std::vector<std::byte>> storage;
  std::vector<io::TensorToWrite> tensors;
  std::map<std::string, std::vector<float>> decoded;
  const auto add = [&](const std::string& name, io::DType dtype, std::vector<int64_t> shape, const void* data,
                       std::size_t bytes) {
    storage.emplace_back(bytes);
    std::memcpy(storage.back().data(), data, bytes);
    tensors.push_back({name, dtype, std::move(shape), std::span<const std::byte>(storage.back())});
  };
  storage.reserve(ck.tensors().size() * 5);
  const bool awq = layout.method == "awq";
  constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // word nibble k holds output 8·w + kAwqOrder[k]
  for (const auto& [name, t] : ck.tensors()) {
    if (!is_block_linear(name)) {  // as stored (GPTQ and AWQ checkpoints keep the head in its own type)
      add(name, t.dtype, t.shape, t.data, t.nbytes);
      continue;
    }
    const auto w = ck.to_f32(name);
    const std::string linear = name.substr(0, name.size() - std::string(".weight").size());
    const int64_t out = t.shape[0], in = t.shape[1];
    const LinearCodes c = codes_of(linear, w, out, in);
    std::vector<int32_t> qweight(static_cast<std::size_t>(in * out / 8), 0);
    std::vector<int32_t> qzeros(static_cast<std::size_t>(c.groups * out / 8), 0);
    const auto group_of = [&](int64_t i) { return layout.group_size == -1 ? 0 : i / layout.group_size; };
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        const uint32_t u = c.u[static_cast<std::size_t>(o * in + i)];
        if (awq) {
          int k = 0;
          while (kAwqOrder[k] != o % 8) ++k;
          qweight[static_cast<std::size_t>(i * (out / 8) + o / 8)] |= static_cast<int32_t>(u << (4 * k));
        } else {
          qweight[static_cast<std::size_t>((i / 8) * out + o)] |= static_cast<int32_t>(u << (4 * (i % 8)));
        }
      }
    for (int64_t g = 0; g < c.groups; ++g)
      for (int64_t o = 0; o < out; ++o) {
        const int z = c.zero[static_cast<std::size_t>(g * out + o)];
        const uint32_t stored = static_cast<uint32_t>((layout.method == "gptq" && !layout.v2 ? z - 1 : z) & 15);
        int k = static_cast<int>(o % 8);
        if (awq) {
          k = 0;
          while (kAwqOrder[k] != o % 8) ++k;
        }
        qzeros[static_cast<std::size_t>(g * (out / 8) + o / 8)] |= static_cast<int32_t>(stored << (4 * k));
      }
    std::vector<float>& d = decoded[linear];
    d.resize(static_cast<std::size_t>(out * in));
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        const int64_t g = group_of(i);
        d[static_cast<std::size_t>(o * in + i)] =
            static_cast<float>(c.u[static_cast<std::size_t>(o * in + i)] -
                               c.zero[static_cast<std::size_t>(g * out + o)]) *
            quant::fp16_bits_to_fp32(c.scale[static_cast<std::size_t>(g * out + o)]);
      }
    if (awq)
      add(linear + ".qweight", io::DType::I32, {in, out / 8}, qweight.data(), qweight.size() * 4);
    else
      add(linear + ".qweight", io::DType::I32, {in / 8, out}, qweight.data(), qweight.size() * 4);
    add(linear + ".qzeros", io::DType::I32, {c.groups, out / 8}, qzeros.data(), qzeros.size() * 4);
    add(linear + ".scales", io::DType::F16, {c.groups, out}, c.scale.data(), c.scale.size() * 2);
    if (!awq && layout.g_idx) {
      std::vector<int32_t> g_idx(static_cast<std::size_t>(in));
      for (int64_t i = 0; i < in; ++i) g_idx[static_cast<std::size_t>(i)] = static_cast<int32_t>(group_of(i));
      if (layout.g_idx_out_of_order) std::swap(g_idx.front(), g_idx.back());
      add(linear + ".g_idx", io::DType::I32, {in}, g_idx.data(), g_idx.size() * 4);
    }
  }
  io::write_safetensors(dst / "model.safetensors", tensors);
  nlohmann::json config;
  std::ifstream(src / "config.json") >> config;
  if (awq)
    config["quantization_config"] = {{"quant_method", "awq"},
                                     {"bits", 4},
                                     {"group_size", layout.group_size},
                                     {"version", "gemm"},
                                     {"zero_point", true}};
  else
    config["quantization_config"] = {
        {"quant_method", "gptq"}, {"bits", 4},         {"group_size", layout.group_size},
        {"sym", layout.sym},      {"desc_act", false}, {"checkpoint_format", layout.v2 ? "gptq_v2" : "gptq"}};
  std::ofstream(dst / "config.json") << config.dump(2);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    if (fs::exists(src / file)) fs::copy_file(src / file, dst / file, fs::copy_options::overwrite_existing);
  return decoded;
}

}  // namespace qjoule::test
