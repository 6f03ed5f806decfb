// libFuzzer target: tokenizer.json, read as a WordPiece and as a BPE tokenizer; one that loads
// encodes and decodes a fixed text. A bad file must end in qjoule::Error.
#include <cstddef>
#include <cstdint>

#include "fuzz_input_file.h"
#include "qjoule/error.h"
#include "qjoule/tokenize/bpe_tokenizer.h"
#include "qjoule/tokenize/wordpiece_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const auto path = qjoule::fuzz::write_input("tokenizer.json", data, size);
  try {
    const auto t = qjoule::tokenize::WordPieceTokenizer::from_tokenizer_json(path);
    (void)t.encode("Hello, world! Ünïcode 123", 32);
  } catch (const qjoule::Error&) {
  }
  try {
    const auto t = qjoule::tokenize::BpeTokenizer::from_tokenizer_json(qjoule::fuzz::work_dir());
    const auto ids = t.encode("Hello, world! Ünïcode 123");
    (void)t.decode(ids);
  } catch (const qjoule::Error&) {
  }
  return 0;
}
