// libFuzzer target: a labelled dataset, read as .tsv and as .jsonl. A bad file must end in
// qjoule::Error.
#include <cstddef>
#include <cstdint>

#include "fuzz_input_file.h"
#include "qjoule/dataset.h"
#include "qjoule/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  for (const char* name : {"dataset.tsv", "dataset.jsonl"}) {
    const auto path = qjoule::fuzz::write_input(name, data, size);
    try {
      (void)qjoule::eval::load_dataset(path);
    } catch (const qjoule::Error&) {
    }
  }
  return 0;
}
