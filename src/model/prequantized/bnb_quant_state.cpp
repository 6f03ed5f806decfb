#include "qjoule/model/prequantized/bnb_quant_state.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "qjoule/error.h"

namespace qjoule::model {
namespace {

using json = nlohmann::json;

constexpr const char* kStatePrefix = ".weight.quant_state.bitsandbytes__";

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// A field of the quant-state JSON: present and of the expected kind, or one line.
const json& state_field(const json& state, const char* field, bool (json::*is)() const noexcept, const char* expected,
                        const io::TensorView& t) {
  const auto it = state.find(field);
  if (it == state.end())
    fail("{}: tensor '{}' (bitsandbytes' quant state) has no '{}', expected {}", t.file.string(), t.name, field,
         expected);
  if (!((*it).*is)())
    fail("{}: tensor '{}' (bitsandbytes' quant state) has {} = {}, expected {}", t.file.string(), t.name, field,
         dump(*it), expected);
  return *it;
}

}  // namespace

std::string bnb_quant_state_tensor(const io::Checkpoint& ck, const std::string& name) {
  for (const char* type : {"nf4", "fp4"})
    if (ck.contains(name + kStatePrefix + type)) return name + kStatePrefix + type;
  return "";
}

BnbQuantState read_bnb_quant_state(const io::Checkpoint& ck, const std::string& name) {
  const std::string tensor = bnb_quant_state_tensor(ck, name);
  if (tensor.empty()) {
    if (ck.contains(name + ".weight"))
      fail(
          "{}: Linear '{}' is not 4-bit: its weight is {} {} with no '{}nf4' tensor; qjoule reads bitsandbytes "
          "checkpoints whose every transformer-block Linear is 4-bit (none in llm_int8_skip_modules)",
          ck.at(name + ".weight").file.string(), name, io::dtype_name(ck.at(name + ".weight").dtype),
          ck.at(name + ".weight").shape_string(), name + kStatePrefix);
    fail(
        "{}: tensor '{}{}nf4' is missing: a bitsandbytes 4-bit Linear holds weight, weight.absmax, weight.quant_map "
        "and that quant state",
        ck.source().string(), name, kStatePrefix);
  }
  const auto& t = ck.at(tensor);
  if (t.dtype != io::DType::U8 || t.shape.size() != 1)
    fail("{}: tensor '{}' is {} {}, expected a 1-D U8 tensor (bitsandbytes' quant state, JSON bytes)", t.file.string(),
         tensor, io::dtype_name(t.dtype), t.shape_string());
  const std::string text(reinterpret_cast<const char*>(t.data), t.nbytes);
  json state;
  try {
    state = json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: tensor '{}' is not JSON ({}), expected bitsandbytes' quant state", t.file.string(), tensor, e.what());
  }
  if (!state.is_object())
    fail("{}: tensor '{}' holds {}, expected a JSON object (bitsandbytes' quant state)", t.file.string(), tensor,
         dump(state).substr(0, 60));
  BnbQuantState s;
  s.quant_type = state_field(state, "quant_type", &json::is_string, "\"nf4\"", t).get<std::string>();
  if (s.quant_type != "nf4")
    fail("{}: tensor '{}' says quant_type '{}': bitsandbytes {} is not read; expected nf4 (qjoule's nf4 / nf4:dq)",
         t.file.string(), tensor, s.quant_type, s.quant_type);
  s.blocksize = state_field(state, "blocksize", &json::is_number_integer, "an integer", t).get<int64_t>();
  s.dtype = state_field(state, "dtype", &json::is_string, "a dtype name", t).get<std::string>();
  const json& shape = state_field(state, "shape", &json::is_array, "[out_features, in_features]", t);
  if (shape.size() != 2 || !shape[0].is_number_integer() || !shape[1].is_number_integer())
    fail("{}: tensor '{}' has shape = {}, expected [out_features, in_features]", t.file.string(), tensor, dump(shape));
  s.out = shape[0].get<int64_t>();
  s.in = shape[1].get<int64_t>();
  s.nested = state.contains("nested_blocksize") || state.contains("nested_offset");
  if (s.nested) {
    s.nested_blocksize =
        state_field(state, "nested_blocksize", &json::is_number_integer, "an integer", t).get<int64_t>();
    const double offset = state_field(state, "nested_offset", &json::is_number, "a number", t).get<double>();
    s.nested_offset = static_cast<float>(offset);
    if (!std::isfinite(s.nested_offset))
      fail("{}: tensor '{}' has nested_offset = {}, expected a finite number", t.file.string(), tensor, offset);
  }
  return s;
}

}  // namespace qjoule::model
