// libFuzzer target: config.json, read as a decoder's and as an encoder classifier's configuration
// against a real checkpoint (the tiny-llama and tiny-bert fixtures), so the reconciliation with tensor
// shapes runs too. A bad file must end in qjoule::Error.
#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "fuzz_input_file.h"
#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/encoder_config.h"

namespace {

namespace fs = std::filesystem;

// A folder holding `fixture`'s model.safetensors, for config.json inputs to sit beside.
fs::path model_dir(const char* name, const char* fixture) {
  const fs::path dir = qjoule::fuzz::work_dir() / name;
  fs::create_directories(dir);
  fs::copy_file(fs::path(QJOULE_FIXTURES) / fixture / "model.safetensors", dir / "model.safetensors",
                fs::copy_options::overwrite_existing);
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const fs::path decoder = model_dir("decoder", "decoders/tiny-llama");
  static const fs::path encoder = model_dir("encoder", "tiny-bert");
  static const auto decoder_checkpoint = qjoule::io::Checkpoint::open(decoder);
  static const auto encoder_checkpoint = qjoule::io::Checkpoint::open(encoder);
  for (const auto& dir : {decoder, encoder}) {
    (void)qjoule::fuzz::write_input(fs::path(dir.filename()) / "config.json", data, size);
    try {
      (void)qjoule::model::model_family(dir);
    } catch (const qjoule::Error&) {
    }
  }
  try {
    (void)qjoule::model::load_decoder_config(decoder, decoder_checkpoint);
  } catch (const qjoule::Error&) {
  }
  try {
    (void)qjoule::model::load_encoder_config(encoder, encoder_checkpoint);
  } catch (const qjoule::Error&) {
  }
  return 0;
}
