// libFuzzer target: a safetensors file (header length, JSON header, data). A bad file must end in
// qjoule::Error; every tensor of a file that opens must convert (or fail cleanly) without a crash.
#include <cstddef>
#include <cstdint>

#include "fuzz_input_file.h"
#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const auto path = qjoule::fuzz::write_input("model.safetensors", data, size);
  try {
    const auto ck = qjoule::io::Checkpoint::open(path);
    for (const auto& [name, tensor] : ck.tensors()) {
      if (tensor.numel() > (1 << 20)) continue;  // the reader checked its bytes; converting is not the point
      try {
        (void)ck.to_f32(name);
        ck.release(name);
      } catch (const qjoule::Error&) {
      }
    }
  } catch (const qjoule::Error&) {
  }
  return 0;
}
