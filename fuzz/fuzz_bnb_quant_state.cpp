// libFuzzer target: bitsandbytes' quant state (model/prequantized/bnb_quant_state.h), the JSON a 4-bit checkpoint
// stores as the U8 tensor NAME.weight.quant_state.bitsandbytes__nf4. Each input becomes that tensor's
// bytes in a one-tensor safetensors file; a bad one must end in qjoule::Error.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_input_file.h"
#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/prequantized/bnb_quant_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;  // safetensors has no empty U8 [0] here worth writing
  const auto path = qjoule::fuzz::work_dir() / "model.safetensors";
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  qjoule::io::write_safetensors(
      path, {{"l.weight.quant_state.bitsandbytes__nf4", qjoule::io::DType::U8, {static_cast<int64_t>(size)}, bytes}});
  try {
    const auto ck = qjoule::io::Checkpoint::open(path);
    const auto state = qjoule::model::read_bnb_quant_state(ck, "l");
    (void)state;
  } catch (const qjoule::Error&) {
  }
  return 0;
}
