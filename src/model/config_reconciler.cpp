#include "config_reconciler.h"

#include <fstream>
#include <set>

#include "qjoule/error.h"

namespace qjoule::model {

std::optional<int64_t> ConfigReconciler::int_field(const char* field) const {
  auto it = config_.find(field);
  if (it == config_.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) fail("{}: field '{}' is {}, expected an integer", path_, field, it->dump());
  return it->get<int64_t>();
}

double ConfigReconciler::positive_number_field(const char* field, double fallback) const {
  const auto v = number_field(field);
  if (!v) return fallback;
  if (!(*v > 0.0)) fail("{}: {} = {}, expected a positive number", path_, field, *v);
  return *v;
}

std::optional<double> ConfigReconciler::number_field(const char* field) const {
  auto it = config_.find(field);
  if (it == config_.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) fail("{}: field '{}' is {}, expected a number", path_, field, it->dump());
  return it->get<double>();
}

int64_t ConfigReconciler::reconcile(const char* field, const std::string& tensor_name, std::size_t dim) {
  const auto& t = tensor(tensor_name);
  if (t.shape.size() <= dim)
    fail("{}: tensor '{}' has shape {}, expected at least {} dimensions", t.file.string(), tensor_name,
         t.shape_string(), dim + 1);
  const int64_t from_tensor = t.shape[dim];
  const auto from_config = int_field(field);
  if (!from_config) {
    inferred_.push_back(field);
    return from_tensor;
  }
  if (*from_config != from_tensor)
    fail("{}: {} = {}, but tensor '{}' has shape {} (so {} = {})", path_, field, *from_config, tensor_name,
         t.shape_string(), field, from_tensor);
  return *from_config;
}

int64_t ConfigReconciler::reconcile_value(const char* field, int64_t found, const std::string& source) {
  const auto from_config = int_field(field);
  if (!from_config) {
    inferred_.push_back(field);
    return found;
  }
  if (*from_config != found) fail("{}: {} = {}, but {} give {}", path_, field, *from_config, source, found);
  return *from_config;
}

int64_t count_layers(const io::Checkpoint& ck, const std::string& layer_prefix) {
  std::set<int64_t> ids;
  for (const auto& [name, view] : ck.tensors()) {
    if (name.rfind(layer_prefix, 0) != 0) continue;
    const auto rest = name.substr(layer_prefix.size());
    const auto dot = rest.find('.');
    try {
      std::size_t used = 0;
      const auto index = std::stoll(rest.substr(0, dot), &used);
      if (used == rest.substr(0, dot).size()) ids.insert(index);
    } catch (const std::exception&) {
    }
  }
  return static_cast<int64_t>(ids.size());
}

void require_token_id_in_vocab(const std::filesystem::path& config_path, const char* field, std::optional<int64_t> id,
                               int64_t vocab) {
  if (id && (*id < 0 || *id >= vocab))
    fail("{}: {} = {} is outside the vocabulary [0, {}) of the embeddings", config_path.string(), field, *id, vocab);
}

}  // namespace qjoule::model
