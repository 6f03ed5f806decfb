// Reads integer fields of a Hugging Face config.json and reconciles them with the checkpoint's tensor
// shapes (shared by the encoder and decoder configs): a field missing from config.json comes from the
// tensor and is recorded as inferred; a field that disagrees with the tensor is an error naming both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/io/config_json.h"
#include "qjoule/io/safetensors.h"

namespace qjoule::model {

// config.json and its string and boolean fields, read as io/config_json.h reads them (the readers of a
// pre-quantized checkpoint's quantization_config, below this folder, read them too).
using io::bool_field;
using io::read_config_json;
using io::string_field;

class ConfigReconciler {
 public:
  ConfigReconciler(std::filesystem::path config_path, const nlohmann::json& config, const io::Checkpoint& ck,
                   std::vector<std::string>& inferred_fields)
      : path_(config_path.string()), config_(config), ck_(ck), inferred_(inferred_fields) {}

  // The field as an integer, nullopt when absent or null; any other type is an error.
  std::optional<int64_t> int_field(const char* field) const;
  // The field as a number, nullopt when absent or null.
  std::optional<double> number_field(const char* field) const;
  // The field as a number > 0 (a norm epsilon, RoPE's theta), `fallback` when absent or null; zero, a
  // negative number or a non-number is an error naming the file, the field and the value.
  double positive_number_field(const char* field, double fallback) const;
  const io::TensorView& tensor(const std::string& name) const { return ck_.at(name); }
  const std::string& path() const { return path_; }
  void mark_inferred(std::string field) { inferred_.push_back(std::move(field)); }

  // Takes `field` from config.json when present, else from the tensor's dimension `dim`; both present
  // and different is an error naming both.
  int64_t reconcile(const char* field, const std::string& tensor_name, std::size_t dim);
  // The same with a value found elsewhere (`source` says where, in the error).
  int64_t reconcile_value(const char* field, int64_t found, const std::string& source);

 private:
  std::string path_;
  const nlohmann::json& config_;
  const io::Checkpoint& ck_;
  std::vector<std::string>& inferred_;
};

// A token id the model uses (bos, eos, pad) from `config_path`: absent is fine; outside [0, vocab) is an
// error naming the file, the field and the id.
void require_token_id_in_vocab(const std::filesystem::path& config_path, const char* field, std::optional<int64_t> id,
                               int64_t vocab);

// How many distinct layer indices appear in tensor names "<layer_prefix><index>.…".
int64_t count_layers(const io::Checkpoint& ck, const std::string& layer_prefix);

}  // namespace qjoule::model
