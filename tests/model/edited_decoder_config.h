// A copy of a decoder fixture whose config.json a test edits, and its config as load_decoder_config reads
// it: the decoder config tests' one way to try a field.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "decoder_fixtures.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_config.h"

namespace qjoule::test {

// The fixture copied to a temporary folder named after `test`, its config.json edited by `edit`.
inline std::filesystem::path edited_decoder_copy(const std::string& fixture, const std::string& test,
                                                 const std::function<void(nlohmann::json&)>& edit) {
  namespace fs = std::filesystem;
  const auto dir = temp_dir("decoder_config_" + test);
  fs::copy(decoder_fixture(fixture), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  nlohmann::json config;
  std::ifstream(dir / "config.json") >> config;
  edit(config);
  std::ofstream(dir / "config.json") << config.dump(2);
  return dir;
}

inline model::DecoderConfig load_config(const std::filesystem::path& dir) {
  return model::load_decoder_config(dir, io::Checkpoint::open(dir));
}

}  // namespace qjoule::test
