// libFuzzer target: model.safetensors.index.json next to two small valid shards. A bad index must end
// in qjoule::Error (never open a file outside the folder, never crash).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fuzz_input_file.h"
#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const bool shards_written = [] {
    const std::vector<float> a{1.0f, 2.0f}, b{3.0f};
    qjoule::io::write_safetensors(qjoule::fuzz::work_dir() / "s1.safetensors",
                                  {{"a", qjoule::io::DType::F32, {2}, std::as_bytes(std::span(a))}});
    qjoule::io::write_safetensors(qjoule::fuzz::work_dir() / "s2.safetensors",
                                  {{"b", qjoule::io::DType::F32, {1}, std::as_bytes(std::span(b))}});
    return true;
  }();
  (void)shards_written;
  qjoule::fuzz::write_input("model.safetensors.index.json", data, size);
  try {
    const auto ck = qjoule::io::Checkpoint::open(qjoule::fuzz::work_dir());
    for (const auto& [name, tensor] : ck.tensors()) (void)ck.to_f32(name);
  } catch (const qjoule::Error&) {
  }
  return 0;
}
