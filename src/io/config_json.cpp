#include "qjoule/io/config_json.h"

#include <fstream>

#include "qjoule/error.h"
#include "qjoule/io/json_error_text.h"

namespace qjoule::io {

nlohmann::json read_config_json(const std::filesystem::path& dir) {
  const auto path = dir / "config.json";
  std::ifstream in(path);
  if (!in) fail("{}: cannot open (a Hugging Face model folder needs config.json)", path.string());
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: malformed JSON ({}), expected a JSON object", path.string(), io::json_error_text(e));
  }
  if (!config.is_object()) fail("{}: found a JSON {}, expected a JSON object", path.string(), config.type_name());
  return config;
}

std::string string_field(const nlohmann::json& object, const char* field, const std::string& fallback,
                         const std::string& where) {
  const auto it = object.find(field);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_string()) fail("{}{} = {}, expected a string", where, field, it->dump());
  return it->get<std::string>();
}

bool bool_field(const nlohmann::json& object, const char* field, bool fallback, const std::string& where) {
  const auto it = object.find(field);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail("{}{} = {}, expected true or false", where, field, it->dump());
  return it->get<bool>();
}

}  // namespace qjoule::io
