// A Hugging Face config.json (and the JSON objects inside it): the file parsed as one object, and its
// string and boolean fields read with one-line errors that name the file, the field and what was found.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace qjoule::io {

// config.json parsed as an object, or an error naming the file.
nlohmann::json read_config_json(const std::filesystem::path& dir);

// `object[field]` as a string, `fallback` when absent or null; any other type is one line,
// "<where><field> = <value>, expected a string", `where` naming the file and the object inside it
// (e.g. "DIR/config.json: rope_scaling.").
std::string string_field(const nlohmann::json& object, const char* field, const std::string& fallback,
                         const std::string& where);
// The same for true / false.
bool bool_field(const nlohmann::json& object, const char* field, bool fallback, const std::string& where);

}  // namespace qjoule::io
