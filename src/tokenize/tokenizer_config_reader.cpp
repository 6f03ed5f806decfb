// Reads BertTokenizer's options from a Hugging Face tokenizer_config.json.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "qjoule/error.h"
#include "qjoule/io/json_error_text.h"
#include "tokenize/file_bytes.h"
#include "tokenize/tokenizer_spec.h"

namespace qjoule::tokenize {
namespace {

using nlohmann::json;

std::optional<bool> optional_bool(const json& doc, const char* key, const std::string& file) {
  const auto it = doc.find(key);
  if (it == doc.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) {
    fail("{}: '{}' is {} (a JSON {}), expected true or false", file, key, it->dump(), it->type_name());
  }
  return it->get<bool>();
}

}  // namespace

WordPieceOptions read_tokenizer_config(const std::filesystem::path& path) {
  const std::string file = path.string();
  json doc;
  try {
    doc = json::parse(read_file_bytes(path, "tokenizer config"));
  } catch (const json::exception& e) {
    fail("{}: malformed JSON ({}), expected a tokenizer_config.json object", file, io::json_error_text(e));
  }
  if (!doc.is_object()) fail("{}: found a JSON {}, expected an object", file, doc.type_name());
  WordPieceOptions options;
  options.lowercase = optional_bool(doc, "do_lower_case", file).value_or(true);
  // BertTokenizer: strip_accents None follows do_lower_case.
  options.strip_accents = optional_bool(doc, "strip_accents", file).value_or(options.lowercase);
  options.tokenize_chinese_chars = optional_bool(doc, "tokenize_chinese_chars", file).value_or(true);
  return options;
}

}  // namespace qjoule::tokenize
