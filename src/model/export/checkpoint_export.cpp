#include "qjoule/model/export/checkpoint_export.h"

#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/config_reconciler.h"
#include "qjoule/error.h"
#include "qjoule/io/output_folder.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/encoder_config.h"
#include "qjoule/quant/element_math.h"
#include "qjoule/quant/fp16_convert.h"
#include "qjoule/quant/quantize_int4.h"
#include "qjoule/quant/quantize_nf4.h"

namespace qjoule::model {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The tensors being written: names, shapes and bytes, the bytes either owned here (quantized or
// converted) or pointing into the source's map (copied as stored).
class OutputTensors {
 public:
  template <class T>
  void add(const std::string& name, io::DType dtype, std::vector<int64_t> shape, std::vector<T> values) {
    auto bytes = std::make_unique<std::vector<std::byte>>(values.size() * sizeof(T));
    std::memcpy(bytes->data(), values.data(), bytes->size());
    tensors_.push_back({name, dtype, std::move(shape), std::span<const std::byte>(*bytes)});
    owned_.push_back(std::move(bytes));
  }
  void add_stored(const io::TensorView& t) {
    tensors_.push_back({t.name, t.dtype, t.shape, std::span<const std::byte>(t.data, t.nbytes)});
  }
  const std::vector<io::TensorToWrite>& tensors() const { return tensors_; }

 private:
  std::vector<io::TensorToWrite> tensors_;
  std::vector<std::unique_ptr<std::vector<std::byte>>> owned_;
};

// A transformer-block Linear's weight: a decoder's q/k/v/o, gate/up/down_proj (a mixture's experts' too, and
// Mixtral's w1 / w2 / w3), or any 2-D weight of a BERT (encoder.layer.N) or DistilBERT (transformer.layer.N)
// layer; never embeddings, heads, lm_head or a mixture's router (mlp.gate, block_sparse_moe.gate).
bool is_block_linear_weight(const std::string& name, const io::TensorView& t) {
  if (t.shape.size() != 2 || !name.ends_with(".weight")) return false;
  if (name.find("vision_tower.") != std::string::npos) return false;  // a multimodal model's image encoder
  if (name.find(".encoder.layer.") != std::string::npos || name.find(".transformer.layer.") != std::string::npos)
    return true;
  if (name.find(".block_sparse_moe.experts.") != std::string::npos) return true;
  for (const char* part : {".q_proj.", ".k_proj.", ".v_proj.", ".o_proj.", ".gate_proj.", ".up_proj.", ".down_proj.",
                           ".qkv_proj.", ".gate_up_proj."})
    if (name.find(part) != std::string::npos) return true;
  return false;
}

bool is_float(io::DType d) {
  return d == io::DType::F32 || d == io::DType::F16 || d == io::DType::BF16 || d == io::DType::F64;
}

// GPTQ v2 (model/prequantized/prequantized_linear.h) from qjoule's own int4 blocks (round-to-nearest's, or a
// calibration's: groups contiguous in both, so g_idx is column / G, act-order's static groups included).
template <class Block>
void add_gptq_codes(OutputTensors& out, const std::string& linear, const quant::BlockMatrix<Block>& m) {
  constexpr int G = Block::kSize;
  constexpr bool asym = std::is_same_v<Block, quant::BlockInt4Asym<G>>;
  const int64_t rows = m.rows, cols = m.cols;
  const int64_t groups = m.blocks_per_row();
  std::vector<uint32_t> qweight(static_cast<std::size_t>(cols / 8 * rows), 0);
  std::vector<uint32_t> qzeros(static_cast<std::size_t>(groups * rows / 8), 0);
  std::vector<uint16_t> scales(static_cast<std::size_t>(groups * rows));
  for (int64_t o = 0; o < rows; ++o)
    for (int64_t g = 0; g < groups; ++g) {
      const Block& b = m.row(o)[g];
      uint32_t zero = quant::kInt4SymZero;
      if constexpr (asym) zero = b.zero;
      scales[static_cast<std::size_t>(g * rows + o)] = b.d;
      qzeros[static_cast<std::size_t>(g * (rows / 8) + o / 8)] |= zero << (4 * (o % 8));
      for (int64_t k = 0; k < G && g * G + k < cols; ++k) {
        const int64_t i = g * G + k;
        const auto u = static_cast<uint32_t>(quant::int4_nibble(b.qs, k));
        qweight[static_cast<std::size_t>((i / 8) * rows + o)] |= u << (4 * (i % 8));
      }
    }
  std::vector<int32_t> g_idx(static_cast<std::size_t>(cols));
  for (int64_t i = 0; i < cols; ++i) g_idx[static_cast<std::size_t>(i)] = static_cast<int32_t>(i / G);
  out.add(linear + ".qweight", io::DType::I32, {cols / 8, rows}, std::move(qweight));
  out.add(linear + ".qzeros", io::DType::I32, {groups, rows / 8}, std::move(qzeros));
  out.add(linear + ".scales", io::DType::F16, {groups, rows}, std::move(scales));
  out.add(linear + ".g_idx", io::DType::I32, {cols}, std::move(g_idx));
}

template <class Block>
void add_gptq_linear(OutputTensors& out, const std::string& linear, const std::vector<float>& w, int64_t rows,
                     int64_t cols) {
  add_gptq_codes(out, linear, quant::quantize_matrix_int4<Block>(w.data(), rows, cols, linear + ".weight"));
}

void add_gptq(OutputTensors& out, const quant::FormatSpec& spec, const std::string& linear, const std::vector<float>& w,
              int64_t rows, int64_t cols) {
  const bool asym = spec.int4_asymmetric;
  switch (spec.group_size) {
    case 32:
      return asym ? add_gptq_linear<quant::BlockInt4Asym<32>>(out, linear, w, rows, cols)
                  : add_gptq_linear<quant::BlockInt4Sym<32>>(out, linear, w, rows, cols);
    case 64:
      return asym ? add_gptq_linear<quant::BlockInt4Asym<64>>(out, linear, w, rows, cols)
                  : add_gptq_linear<quant::BlockInt4Sym<64>>(out, linear, w, rows, cols);
    default:
      return asym ? add_gptq_linear<quant::BlockInt4Asym<128>>(out, linear, w, rows, cols)
                  : add_gptq_linear<quant::BlockInt4Sym<128>>(out, linear, w, rows, cols);
  }
}

// bitsandbytes Params4bit + packed QuantState (model/prequantized/bnb_nf4_linear.h) from qjoule's nf4 blocks.
template <class Matrix>
std::vector<uint8_t> nf4_codes(const Matrix& m) {
  std::vector<uint8_t> codes(m.blocks.size() * sizeof(m.blocks[0].qs));
  for (std::size_t b = 0; b < m.blocks.size(); ++b)
    std::memcpy(codes.data() + b * sizeof(m.blocks[b].qs), m.blocks[b].qs, sizeof(m.blocks[b].qs));
  return codes;
}

void add_bnb(OutputTensors& out, bool double_quant, const std::string& linear, const std::vector<float>& w,
             int64_t rows, int64_t cols, const std::string& dtype) {
  const std::string base = linear + ".weight";
  const auto n = static_cast<int64_t>(w.size());
  json state = {{"quant_type", "nf4"}, {"blocksize", quant::kNf4BlockSize}, {"dtype", dtype}, {"shape", {rows, cols}}};
  const std::vector<float> table(quant::kNf4Table.begin(), quant::kNf4Table.end());
  if (!double_quant) {
    const auto m = quant::quantize_matrix_nf4(w.data(), rows, cols, base);
    std::vector<float> absmax(m.blocks.size());
    for (std::size_t b = 0; b < m.blocks.size(); ++b) absmax[b] = m.blocks[b].absmax;
    out.add(base, io::DType::U8, {n / 2, 1}, nf4_codes(m));
    const auto blocks = static_cast<int64_t>(absmax.size());
    out.add(base + ".absmax", io::DType::F32, {blocks}, std::move(absmax));
    out.add(base + ".quant_map", io::DType::F32, {16}, table);
  } else {
    const auto m = quant::quantize_matrix_nf4_double(w.data(), rows, cols, base);
    std::vector<uint8_t> codes(m.blocks.size());
    for (std::size_t b = 0; b < m.blocks.size(); ++b) codes[b] = m.blocks[b].absmax_code;
    const auto& map = quant::dynamic_map_signed();
    out.add(base, io::DType::U8, {n / 2, 1}, nf4_codes(m));
    const auto blocks = static_cast<int64_t>(codes.size());
    out.add(base + ".absmax", io::DType::U8, {blocks}, std::move(codes));
    out.add(base + ".quant_map", io::DType::F32, {16}, table);
    out.add(base + ".nested_absmax", io::DType::F32, {static_cast<int64_t>(m.absmax_scales.size())}, m.absmax_scales);
    out.add(base + ".nested_quant_map", io::DType::F32, {256}, std::vector<float>(map.begin(), map.end()));
    state["nested_blocksize"] = quant::kNf4DoubleQuantGroup;
    state["nested_dtype"] = "float32";
    state["nested_offset"] = m.absmax_mean;
  }
  const std::string text = state.dump();
  out.add(base + ".quant_state.bitsandbytes__nf4", io::DType::U8, {static_cast<int64_t>(text.size())},
          std::vector<uint8_t>(text.begin(), text.end()));
}

// fp16 / bf16: a floating tensor converted, round to nearest even.
void add_converted(OutputTensors& out, const io::Checkpoint& ck, const io::TensorView& t, io::DType to) {
  const auto values = ck.to_f32(t.name);
  ck.release(t.name);
  std::vector<uint16_t> bits(values.size());
  for (std::size_t k = 0; k < values.size(); ++k)
    bits[k] = to == io::DType::F16 ? quant::fp32_to_fp16_bits(values[k]) : element::f32_to_bf16_bits(values[k]);
  out.add(t.name, to, t.shape, std::move(bits));
}

std::string torch_dtype_of(io::DType d) {
  switch (d) {
    case io::DType::F16: return "float16";
    case io::DType::BF16: return "bfloat16";
    default: return "float32";
  }
}

void check_output_folder(const fs::path& out) {
  if (fs::exists(out) && !fs::is_directory(out))
    fail("--out {}: exists and is not a folder; expected a new or empty folder", out.string());
  if (fs::exists(out) && !fs::is_empty(out))
    fail("--out {}: the folder holds files already; expected a new or empty folder (export never overwrites a model)",
         out.string());
}

}  // namespace

ExportSummary export_checkpoint(const fs::path& model, const quant::FormatSpec& spec, const fs::path& out,
                                const std::function<void(int64_t, int64_t, const std::string&)>& progress,
                                const CalibratedInt4* calibrated) {
  const std::string asked = quant::to_string(spec);
  const bool int4 = spec.format == quant::Format::int4, nf4 = spec.format == quant::Format::nf4;
  const bool plain = spec.format == quant::Format::fp16 || spec.format == quant::Format::bf16;
  if ((!int4 && !nf4 && !plain) || spec.emulate || spec.int4_int8_activations)
    fail("--precision {}: no checkpoint layout holds it; qjoule exports {}", asked, kExportableSpecs);
  if (quant::needs_calibration(spec) && calibrated == nullptr)
    fail("--precision {}: {}'s codes come from calibration; expected --calib FILE (or {}, round-to-nearest)", asked,
         quant::calibration_method(spec), quant::to_string(quant::round_to_nearest(spec)));
  check_output_folder(out);
  json config = read_config_json(model);
  const std::string where = (model / "config.json").string();
  const auto ck = io::Checkpoint::open(model);
  if (config.contains("quantization_config") && !config["quantization_config"].is_null())
    fail(
        "{}: the model is pre-quantized already (quantization_config); export reads an unquantized FP32, FP16 or "
        "BF16 checkpoint",
        where);
  const bool four_bit = int4 || nf4;
  if (four_bit) {
    const auto family = model_family(model);
    if (family == ModelFamily::Unknown)
      fail(
          "{}: --precision {} exports a Llama, Mistral, Qwen2 or Qwen3 decoder or a BERT or DistilBERT classifier "
          "(GPTQ and bitsandbytes layouts); this model is none ({} export any model)",
          where, asked, "fp16 and bf16");
    if (family == ModelFamily::Encoder) (void)load_encoder_config(model, ck);  // a classifier qjoule reads
    if (family == ModelFamily::Decoder && load_decoder_config(model, ck).arch == DecoderArch::Gpt2)
      fail(
          "{}: --precision {}: GPT-2's Conv1D layers have no GPTQ or bitsandbytes layout qjoule writes; fp16 and "
          "bf16 export it",
          where, asked);
  }
  // Every shape checked before anything is written.
  for (const auto& [name, t] : ck.tensors()) {
    if (!four_bit || !is_block_linear_weight(name, t)) continue;
    const int64_t rows = t.shape[0], cols = t.shape[1];
    if (int4 && (rows % 8 != 0 || cols % 8 != 0))
      fail("{}: tensor '{}' is {}: GPTQ packs 8 codes per int32, so both dimensions must be multiples of 8",
           t.file.string(), name, t.shape_string());
    if (nf4 && cols % quant::kNf4BlockSize != 0)
      fail(
          "{}: tensor '{}' is {}: bitsandbytes' blocks of 64 run over the flattened weight, so in_features must be a "
          "multiple of 64",
          t.file.string(), name, t.shape_string());
  }

  // Gemma's norms were read as 1 + w (DecoderConfig::norm_offset_one): written back as w.
  const bool norm_offset_one = calibrated != nullptr && model_family(model) == ModelFamily::Decoder &&
                               load_decoder_config(model, ck).norm_offset_one;
  ExportSummary summary;
  const io::DType plain_dtype = spec.format == quant::Format::fp16 ? io::DType::F16 : io::DType::BF16;
  OutputTensors tensors;
  const auto total = static_cast<int64_t>(ck.tensors().size());
  int64_t done = 0;
  for (const auto& [name, t] : ck.tensors()) {
    const std::string stem = name.substr(0, name.rfind('.'));
    const bool weight = name.ends_with(".weight"), bias = name.ends_with(".bias");
    if (calibrated != nullptr && weight && calibrated->codes.count(stem) != 0) {  // calibrated codes as they are
      std::visit([&](const auto& m) { add_gptq_codes(tensors, stem, m); }, calibrated->codes.at(stem));
      ++summary.quantized;
    } else if (calibrated != nullptr && weight && calibrated->fp32_weights.count(stem) != 0) {
      tensors.add(name, io::DType::F32, t.shape, calibrated->fp32_weights.at(stem));  // a router with AWQ's scales
      ++summary.copied;
    } else if (calibrated != nullptr && bias && calibrated->biases.count(stem) != 0) {
      tensors.add(name, io::DType::F32, t.shape, calibrated->biases.at(stem));  // AWQ's scales in V's / up's rows
      ++summary.copied;
    } else if (calibrated != nullptr && (weight || bias) && calibrated->norms.count(stem) != 0) {
      const auto& n = calibrated->norms.at(stem);  // AWQ's scales folded into the norm
      std::vector<float> values = weight ? n.gamma : n.beta;
      if (weight && norm_offset_one)  // Gemma stores w for a norm applied as 1 + w
        for (float& g : values) g -= 1.0f;
      tensors.add(name, io::DType::F32, t.shape, values);
      ++summary.copied;
    } else if (four_bit && is_block_linear_weight(name, t)) {
      const auto w = ck.to_f32(name);
      ck.release(name);
      const std::string linear = name.substr(0, name.size() - std::string(".weight").size());
      if (int4)
        add_gptq(tensors, spec, linear, w, t.shape[0], t.shape[1]);
      else
        add_bnb(tensors, spec.nf4_double_quant, linear, w, t.shape[0], t.shape[1], torch_dtype_of(t.dtype));
      ++summary.quantized;
    } else if (plain && is_float(t.dtype)) {
      add_converted(tensors, ck, t, plain_dtype);
      ++summary.copied;
    } else {
      tensors.add_stored(t);
      ++summary.copied;
    }
    if (progress) progress(++done, total, name);
  }
  io::create_output_folder(out, "--out");
  io::write_safetensors(out / "model.safetensors", tensors.tensors(), {{"format", "pt"}});
  summary.bytes = fs::file_size(out / "model.safetensors");

  if (int4) {
    config["quantization_config"] = {
        {"quant_method", "gptq"},       {"bits", 4},         {"group_size", spec.group_size},
        {"sym", !spec.int4_asymmetric}, {"desc_act", false}, {"checkpoint_format", "gptq_v2"}};
    summary.layout =
        fmt::format("GPTQ (gptq_v2 zeros, group_size {}, {})", spec.group_size, spec.int4_asymmetric ? "asym" : "sym");
  } else if (nf4) {
    config["quantization_config"] = {{"quant_method", "bitsandbytes"},
                                     {"load_in_4bit", true},
                                     {"load_in_8bit", false},
                                     {"bnb_4bit_quant_type", "nf4"},
                                     {"bnb_4bit_use_double_quant", spec.nf4_double_quant},
                                     {"bnb_4bit_compute_dtype", "float32"},
                                     {"llm_int8_skip_modules", {"lm_head"}}};
    summary.layout = spec.nf4_double_quant ? "bitsandbytes nf4 with double quant" : "bitsandbytes nf4";
  } else {
    config["torch_dtype"] = torch_dtype_of(plain_dtype);
    summary.layout = fmt::format("safetensors {}", asked);
  }
  std::ofstream(out / "config.json") << config.dump(2) << "\n";
  for (const char* file : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                           "generation_config.json", "vocab.txt", "tokenizer.model"})
    if (fs::exists(model / file)) fs::copy_file(model / file, out / file);
  return summary;
}

}  // namespace qjoule::model
