#include "qjoule/model/prequantized/checkpoint_quantization.h"

#include <fmt/format.h>

#include "qjoule/model/prequantized/bnb_quant_state.h"
#include "qjoule/error.h"
#include "qjoule/io/config_json.h"

namespace qjoule::model {
namespace {

using json = nlohmann::json;
using io::bool_field;
using io::read_config_json;
using io::string_field;

// An integer field: `fallback` when absent or null, else an integer or one line naming it.
int int_field(const json& object, const char* field, int fallback, const std::string& where) {
  const auto it = object.find(field);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_number_integer())
    fail("{}{} = {}, expected an integer", where, field, it->dump(-1, ' ', false, json::error_handler_t::replace));
  return it->get<int>();
}

constexpr const char* kWhatQjouleReads =
    "qjoule reads FP32, FP16 and BF16 safetensors (and quantizes them itself, --precision) and 4-bit GPTQ "
    "(act-order too), AWQ gemm and bitsandbytes nf4 checkpoints of Llama, Mistral and Qwen2 decoders and BERT and "
    "DistilBERT classifiers; give the unquantized model or one of those";

}  // namespace

std::string CheckpointQuantization::describe() const {
  if (method == "bitsandbytes")
    return fmt::format("bitsandbytes {}-bit {}{}", bits, bnb_quant_type, bnb_double_quant ? " with double quant" : "");
  std::string out = fmt::format("{} {}-bit, group_size {}", method, bits, group_size);
  if (method == "gptq")
    out += fmt::format(", {}, desc_act {}, {} zeros", sym ? "sym" : "asym", desc_act ? "true" : "false",
                       checkpoint_format == "gptq_v2" ? "gptq_v2" : "gptq (v1)");
  if (method == "awq") out += fmt::format(", version {}", checkpoint_format);
  return out;
}

std::optional<CheckpointQuantization> read_checkpoint_quantization(const json& config, const std::string& where) {
  const auto found = config.find("quantization_config");
  // bitsandbytes' older configs put load_in_4bit at the top level.
  if ((found == config.end() || found->is_null()) && bool_field(config, "load_in_4bit", false, where)) {
    CheckpointQuantization q;
    q.method = "bitsandbytes";
    q.bnb_quant_type = string_field(config, "bnb_4bit_quant_type", "fp4", where);
    q.bnb_double_quant = bool_field(config, "bnb_4bit_use_double_quant", false, where);
    return q;
  }
  if (found == config.end() || found->is_null()) return std::nullopt;
  if (!found->is_object())
    fail("{}quantization_config = {}, expected an object", where,
         found->dump(-1, ' ', false, json::error_handler_t::replace));
  const json& qc = *found;
  const std::string at = where + "quantization_config.";
  CheckpointQuantization q;
  q.method = string_field(qc, "quant_method", "", at);
  if (q.method.empty() && (qc.contains("load_in_4bit") || qc.contains("bnb_4bit_quant_type")))
    q.method = "bitsandbytes";
  if (q.method == "gptq" || q.method == "awq") {
    q.bits = int_field(qc, "bits", q.method == "awq" ? int_field(qc, "w_bit", 4, at) : 4, at);
    q.group_size = int_field(qc, "group_size", q.method == "awq" ? int_field(qc, "q_group_size", 128, at) : 128, at);
    if (q.bits != 4 && q.bits != 8)
      fail("{}bits = {}: a {} checkpoint of {}-bit codes; qjoule's kernels hold 4-bit (and 8-bit) codes", at, q.bits,
           q.method, q.bits);
    if (q.group_size != -1 && q.group_size < 1)
      fail("{}group_size = {}, expected -1 (one group per row) or a positive number of weights", at, q.group_size);
    if (q.method == "gptq") {
      q.sym = bool_field(qc, "sym", true, at);
      q.desc_act = bool_field(qc, "desc_act", false, at);
      q.checkpoint_format = string_field(qc, "checkpoint_format", "gptq", at);
      if (q.checkpoint_format != "gptq" && q.checkpoint_format != "gptq_v2")
        fail("{}checkpoint_format = '{}', expected gptq or gptq_v2", at, q.checkpoint_format);
    } else {
      q.checkpoint_format = string_field(qc, "version", "gemm", at);
      if (!bool_field(qc, "zero_point", true, at))
        fail("{}zero_point = false: AWQ without zero points; expected true (AWQ's gemm layout)", at);
    }
  } else if (q.method == "bitsandbytes") {
    if (bool_field(qc, "load_in_8bit", false, at))
      fail("{}load_in_8bit = true: bitsandbytes LLM.int8() checkpoints are not read; expected load_in_4bit with nf4",
           at);
    q.bnb_quant_type = string_field(qc, "bnb_4bit_quant_type", "fp4", at);
    q.bnb_double_quant = bool_field(qc, "bnb_4bit_use_double_quant", false, at);
    if (q.bnb_quant_type != "nf4")
      fail("{}bnb_4bit_quant_type = '{}': bitsandbytes {} is not read; expected nf4 (qjoule's nf4 / nf4:dq)", at,
           q.bnb_quant_type, q.bnb_quant_type);
  } else {
    fail("{}quant_method = '{}' is not a method qjoule knows; expected gptq, awq or bitsandbytes", at,
         q.method.empty() ? std::string("(absent)") : q.method);
  }
  return q;
}

std::optional<CheckpointQuantization> checkpoint_quantization_of(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(dir / "config.json", ec)) return std::nullopt;
  return read_checkpoint_quantization(read_config_json(dir), (dir / "config.json").string() + ": ");
}

std::optional<CheckpointQuantization> readable_checkpoint_quantization(const std::filesystem::path& dir,
                                                                       const json& config,
                                                                       const io::Checkpoint& checkpoint,
                                                                       bool reads_prequantized,
                                                                       const std::string& family) {
  const std::string where = (dir / "config.json").string() + ": ";
  if (const auto q = read_checkpoint_quantization(config, where)) {
    const auto refuse = [&](const std::string& why) {
      fail("{}a pre-quantized checkpoint ({}): {}; {}", where, q->describe(), why, kWhatQjouleReads);
    };
    if (!reads_prequantized) refuse(fmt::format("{} models are read unquantized only", family));
    if (q->bits != 4) refuse(fmt::format("{}-bit codes are not read yet (4-bit only)", q->bits));
    if (q->method == "awq" && q->checkpoint_format != "gemm")
      refuse(fmt::format("AWQ version '{}' is not read (gemm only)", q->checkpoint_format));
    const int g = q->group_size;
    if (q->method != "bitsandbytes" && !(g == 32 || g == 64 || g == 128 || g == -1 || g % 128 == 0))
      refuse(
          fmt::format("group_size {} does not fit qjoule's int4 blocks (32, 64 or 128 weights; -1 or a multiple of "
                      "128 held as blocks of 128)",
                      g));
    return q;
  }
  for (const auto& [name, tensor] : checkpoint.tensors()) {
    if (name.ends_with(".qweight") || name.ends_with(".weight.absmax") ||
        name.find(".weight.quant_state.") != std::string::npos)
      fail(
          "{}: tensor '{}' ({} {}) is a packed quantized weight (GPTQ / AWQ qweight or bitsandbytes 4-bit), but "
          "config.json has no quantization_config saying how it was packed; {}",
          tensor.file.string(), name, io::dtype_name(tensor.dtype), tensor.shape_string(), kWhatQjouleReads);
  }
  return std::nullopt;
}

const io::TensorView& packed_tensor(const io::Checkpoint& ck, const CheckpointQuantization& q, const std::string& name,
                                    io::DType dtype) {
  if (!ck.contains(name))
    fail("{}: tensor '{}' is missing: a {} checkpoint's Linear holds qweight, qzeros and scales", ck.source().string(),
         name, q.describe());
  const auto& t = ck.at(name);
  if (t.dtype != dtype || t.shape.size() != 2)
    fail("{}: tensor '{}' is {} {}, expected a 2-D {} tensor ({})", t.file.string(), name, io::dtype_name(t.dtype),
         t.shape_string(), io::dtype_name(dtype), q.describe());
  return t;
}

bool is_prequantized_linear(const io::Checkpoint& ck, const std::string& name) {
  return ck.contains(name + ".qweight") || !bnb_quant_state_tensor(ck, name).empty();
}

std::pair<int64_t, int64_t> prequantized_linear_dims(const io::Checkpoint& ck, const CheckpointQuantization& q,
                                                     const std::string& name) {
  if (q.method == "bitsandbytes") {
    const BnbQuantState s = read_bnb_quant_state(ck, name);
    return {s.out, s.in};
  }
  const auto& qweight = packed_tensor(ck, q, name + ".qweight", io::DType::I32);
  if (q.method == "awq") return {qweight.shape[1] * 8, qweight.shape[0]};
  return {qweight.shape[1], qweight.shape[0] * 8};
}

}  // namespace qjoule::model
