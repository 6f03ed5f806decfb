#include "qjoule/model/export/gguf_import.h"

#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/export/gguf_tensor_names.h"
#include "qjoule/error.h"
#include "qjoule/io/output_folder.h"
#include "qjoule/io/gguf.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/export/gguf_export.h"

namespace qjoule::model {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The Hugging Face name of a llama.cpp tensor that gguf_export writes, "" for the RoPE factors (computed
// from config.json's rope_scaling again).
std::string hf_name(const std::string& g, const std::string& arch) {
  if (g == "rope_freqs.weight" || g == "rope_factors_long.weight" || g == "rope_factors_short.weight") return "";
  if (auto hf = hf_tensor_name(g, arch)) return *hf;
  fail("tensor '{}' is not one that qjoule's GGUF export writes", g);
}

// Llama's Q / K rows back in Hugging Face's order: GGUF row h·d + 2i + j is row h·d + j·d/2 + i.
// `row_bytes` per row; rows = ne[1] (or ne[0] for a bias).
std::vector<std::byte> unpermute(const std::byte* data, int64_t rows, uint64_t row_bytes, int64_t heads) {
  std::vector<std::byte> out(static_cast<std::size_t>(rows) * row_bytes);
  const int64_t d = rows / heads, half = d / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::memcpy(out.data() + static_cast<std::size_t>(h * d + j * half + i) * row_bytes,
                    data + static_cast<std::size_t>(h * d + 2 * i + j) * row_bytes, row_bytes);
  return out;
}

std::string metadata_string(const io::GgufFile& g, const std::string& key, const fs::path& path) {
  const auto it = g.metadata.find(key);
  if (it == g.metadata.end() || !it->second.is_string())
    fail(
        "{}: no '{}': a GGUF file that qjoule's export did not write (its configuration and tokenizer cannot be "
        "given back exactly); qjoule reads back its own GGUF exports",
        path.string(), key);
  return it->second.get<std::string>();
}

int64_t metadata_int(const io::GgufFile& g, const std::string& key, const fs::path& path) {
  const auto it = g.metadata.find(key);
  if (it == g.metadata.end() || !it->second.is_number_integer())
    fail("{}: metadata '{}' is {}, expected an integer", path.string(), key,
         it == g.metadata.end() ? std::string("absent") : it->second.dump());
  return it->second.get<int64_t>();
}

}  // namespace

GgufImportSummary import_gguf(const fs::path& gguf, const fs::path& out) {
  if (fs::exists(out) && (!fs::is_directory(out) || !fs::is_empty(out)))
    fail("--out {}: holds files already; expected a new or empty folder", out.string());
  const auto g = io::read_gguf(gguf);
  const std::string config_text = metadata_string(g, kGgufConfigKey, gguf);
  const std::string tokenizer_text = metadata_string(g, kGgufTokenizerKey, gguf);
  GgufImportSummary summary;
  summary.architecture =
      g.metadata.count("general.architecture") != 0 && g.metadata.at("general.architecture").is_string()
          ? g.metadata.at("general.architecture").get<std::string>()
          : "";
  const std::string& arch = summary.architecture;
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3" && arch != "gemma3" && arch != "phi3" &&
      arch != "qwen3moe" && arch != "olmoe")
    fail(
        "{}: general.architecture '{}', expected llama, qwen2, qwen3, gemma3, phi3, qwen3moe or olmoe (what qjoule's "
        "GGUF export writes)",
        gguf.string(), arch);
  const int64_t heads = metadata_int(g, arch + ".attention.head_count", gguf);
  const int64_t kv_heads = metadata_int(g, arch + ".attention.head_count_kv", gguf);

  json config;
  try {
    config = json::parse(config_text);
  } catch (const json::exception& e) {
    fail("{}: '{}' is not JSON ({})", gguf.string(), kGgufConfigKey, e.what());
  }
  // olmoe's head is written out when tied (llama.cpp's olmoe reads no tied one): tied again here.
  const bool tied = config.is_object() && config.value("tie_word_embeddings", false);

  std::vector<std::unique_ptr<std::vector<std::byte>>> owned;
  std::vector<io::TensorToWrite> tensors;
  const auto keep = [&](std::vector<std::byte> bytes) -> std::span<const std::byte> {
    owned.push_back(std::make_unique<std::vector<std::byte>>(std::move(bytes)));
    return {owned.back()->data(), owned.back()->size()};
  };
  for (const auto& [name, t] : g.tensors)
    if (t.type == io::GgmlType::mxfp4 || t.type == io::GgmlType::nvfp4)
      fail(
          "{}: tensor '{}' is {}: qjoule reads back its Q4_0, F16, BF16 and F32 exports (no checkpoint format "
          "it reads holds {}); run the file in llama.cpp",
          gguf.string(), name, io::ggml_type_name(t.type), io::ggml_type_name(t.type));
  // One matrix [out, in] under its Hugging Face name: as stored, or a Q4_0 one as GPTQ's tensors.
  const auto add_matrix = [&](const std::string& hf, const std::vector<int64_t>& shape, io::GgmlType type,
                              std::span<const std::byte> bytes) {
    ++summary.tensors;
    if (type != io::GgmlType::q4_0) {
      const io::DType dtype = type == io::GgmlType::f16    ? io::DType::F16
                              : type == io::GgmlType::bf16 ? io::DType::BF16
                                                           : io::DType::F32;
      tensors.push_back({hf, dtype, shape, bytes});
      return;
    }
    // Q4_0 [out, in] -> GPTQ (gptq_v2, sym, group 32): code u of input i, output o in bits 4·(i % 8) of
    // qweight[i / 8, o]; every zero 8; scales [groups, out] the blocks' d.
    ++summary.q4_0;
    const int64_t out_f = shape[0], in_f = shape[1], groups = in_f / io::kQ4_0Block;
    if (out_f % 8 != 0 || in_f % 8 != 0)
      fail("{}: tensor '{}' is [{}, {}]: GPTQ packs 8 codes per int32, so both must be multiples of 8", gguf.string(),
           hf, out_f, in_f);
    std::vector<uint32_t> qweight(static_cast<std::size_t>(in_f / 8 * out_f), 0);
    std::vector<uint16_t> scales(static_cast<std::size_t>(groups * out_f));
    for (int64_t o = 0; o < out_f; ++o)
      for (int64_t b = 0; b < groups; ++b) {
        const std::byte* block = bytes.data() + (o * groups + b) * io::kQ4_0BlockBytes;
        std::memcpy(&scales[static_cast<std::size_t>(b * out_f + o)], block, 2);
        for (int j = 0; j < 16; ++j) {
          const auto byte = static_cast<uint32_t>(block[2 + j]);
          for (const auto& [k, u] : {std::pair<int64_t, uint32_t>{j, byte & 15}, {j + 16, byte >> 4}}) {
            const int64_t i = b * io::kQ4_0Block + k;
            qweight[static_cast<std::size_t>((i / 8) * out_f + o)] |= u << (4 * (i % 8));
          }
        }
      }
    std::vector<uint32_t> qzeros(static_cast<std::size_t>(groups * out_f / 8), 0x88888888u);
    std::vector<int32_t> g_idx(static_cast<std::size_t>(in_f));
    for (int64_t i = 0; i < in_f; ++i) g_idx[static_cast<std::size_t>(i)] = static_cast<int32_t>(i / io::kQ4_0Block);
    const std::string linear = hf.substr(0, hf.size() - std::string(".weight").size());
    const auto as_bytes = [&](const auto& v) {
      std::vector<std::byte> b(v.size() * sizeof(v[0]));
      std::memcpy(b.data(), v.data(), b.size());
      return keep(std::move(b));
    };
    tensors.push_back({linear + ".qweight", io::DType::I32, {in_f / 8, out_f}, as_bytes(qweight)});
    tensors.push_back({linear + ".qzeros", io::DType::I32, {groups, out_f / 8}, as_bytes(qzeros)});
    tensors.push_back({linear + ".scales", io::DType::F16, {groups, out_f}, as_bytes(scales)});
    tensors.push_back({linear + ".g_idx", io::DType::I32, {in_f}, as_bytes(g_idx)});
  };
  for (const auto& [name, t] : g.tensors) {
    if (arch == "olmoe" && tied && name == "output.weight") continue;
    if (t.ne.size() == 3) {  // a mixture's experts, stacked: one tensor each again
      const uint64_t each = t.nbytes / static_cast<uint64_t>(t.ne[2]);
      for (int64_t e = 0; e < t.ne[2]; ++e) {
        const auto hf = hf_expert_tensor_name(name, e, arch);
        if (!hf) fail("{}: tensor '{}' has 3 dimensions and is not a mixture's experts", gguf.string(), name);
        add_matrix(*hf, {t.ne[1], t.ne[0]}, t.type,
                   std::span<const std::byte>(t.data + static_cast<uint64_t>(e) * each, each));
      }
      continue;
    }
    const std::string hf = hf_name(name, arch);
    if (hf.empty()) continue;
    // Gemma's norms as transformers stores them (w, applied as 1 + w): a - 1 for the exported a = 1 + w, so
    // the model read back applies 1 + (a - 1) = a, bit for bit, wherever a >= 0.5 (Sterbenz's lemma).
    if (arch == "gemma3" && t.ne.size() == 1 && t.type == io::GgmlType::f32 && name.ends_with("norm.weight")) {
      std::vector<float> w(static_cast<std::size_t>(t.ne[0]));
      std::memcpy(w.data(), t.data, w.size() * sizeof(float));
      for (float& value : w) value -= 1.0f;
      std::vector<std::byte> b(w.size() * sizeof(float));
      std::memcpy(b.data(), w.data(), b.size());
      tensors.push_back({hf, io::DType::F32, {t.ne[0]}, keep(std::move(b))});
      ++summary.tensors;
      continue;
    }
    const bool q_or_k = name.find(".attn_q.") != std::string::npos || name.find(".attn_k.") != std::string::npos;
    const int64_t rows = t.ne.size() >= 2 ? t.ne[1] : t.ne[0];
    const uint64_t row_bytes = t.nbytes / static_cast<uint64_t>(rows);
    std::span<const std::byte> bytes(t.data, t.nbytes);
    if (arch == "llama" && q_or_k)
      bytes = keep(unpermute(t.data, rows, row_bytes, name.find(".attn_q.") != std::string::npos ? heads : kv_heads));
    const std::vector<int64_t> shape =
        t.ne.size() >= 2 ? std::vector<int64_t>{t.ne[1], t.ne[0]} : std::vector<int64_t>{t.ne[0]};
    add_matrix(hf, shape, t.type, bytes);
  }
  // A multimodal checkpoint's text part (Gemma3ForConditionalGeneration: its config in text_config) was
  // exported under CausalLM names; back under its own (transformers 4.50's language_model. prefix).
  if (config.is_object() && config.contains("text_config"))
    for (io::TensorToWrite& t : tensors) t.name = "language_model." + t.name;
  if (summary.q4_0 > 0) {
    config["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4},
                                     {"group_size", 32},       {"sym", true},
                                     {"desc_act", false},      {"checkpoint_format", "gptq_v2"}};
    summary.precision = "int4:g=32:sym";
  }
  io::create_output_folder(out, "--out");
  io::write_safetensors(out / "model.safetensors", tensors, {{"format", "pt"}});
  std::ofstream(out / "config.json") << config.dump(2) << "\n";
  std::ofstream(out / "tokenizer.json", std::ios::binary) << tokenizer_text;
  return summary;
}

}  // namespace qjoule::model
