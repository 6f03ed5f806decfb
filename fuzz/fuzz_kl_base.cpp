// libFuzzer target: a KL base file (`qjoule ppl --kl-base`, `qjoule bench --text`'s FP32 reference,
// eval/kl_base.h). A bad file must end in qjoule::Error (never read past the mapping, never crash);
// one that reads is walked row by row as a comparison would.
#include <cstddef>
#include <cstdint>

#include "fuzz_input_file.h"
#include "qjoule/error.h"
#include "qjoule/eval/kl_base.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const auto path = qjoule::fuzz::write_input("base.qjkl", data, size);
  try {
    const auto base = qjoule::eval::read_kl_base(path);
    uint32_t sum = 0;
    const uint16_t* rows = base.rows();
    for (int64_t i = 0; i < base.scored * base.vocab_size; ++i) sum += rows[i];
    for (const int32_t id : base.token_ids) sum += static_cast<uint32_t>(id);
    (void)sum;
    (void)base.ppl();
  } catch (const qjoule::Error&) {
  }
  return 0;
}
