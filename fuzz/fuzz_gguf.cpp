// libFuzzer target: a GGUF file (io/gguf.h, the reader that checks what `qjoule export --to gguf` writes).
// A bad file must end in qjoule::Error (never read past the mapping, never crash); one that reads has
// every tensor's bytes walked.
#include <cstddef>
#include <cstdint>

#include "fuzz_input_file.h"
#include "qjoule/error.h"
#include "qjoule/io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const auto path = qjoule::fuzz::write_input("model.gguf", data, size);
  try {
    const auto g = qjoule::io::read_gguf(path);
    uint32_t sum = 0;
    for (const auto& [name, t] : g.tensors)
      for (uint64_t i = 0; i < t.nbytes; i += 64) sum += static_cast<uint32_t>(t.data[i]);
    (void)sum;
  } catch (const qjoule::Error&) {
  }
  return 0;
}
