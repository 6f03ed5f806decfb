// The tiny decoder fixtures (tests/fixtures/decoders, written by tools/make_tiny_decoder_fixtures.py and,
// for the architectures checked against Hugging Face transformers itself, tools/make_hf_decoder_fixtures.py)
// and their reference logits.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "qjoule/io/safetensors.h"
#include "test_paths.h"

namespace qjoule::test {

inline const std::vector<std::string>& decoder_fixture_names() {
  static const std::vector<std::string> names = {"tiny-llama", "tiny-qwen2",   "tiny-qwen3", "tiny-gemma3",
                                                 "tiny-phi3",  "tiny-llama32", "tiny-gpt2"};
  return names;
}

inline std::filesystem::path decoder_fixture(const std::string& name) { return fixtures_dir() / "decoders" / name; }

struct DecoderReference {
  std::vector<int32_t> ids;
  std::vector<float> logits;  // [ids.size(), vocab]
  int64_t vocab = 0;
};

inline DecoderReference read_decoder_reference(const std::string& name) {
  const auto ck = io::Checkpoint::open(decoder_fixture(name) / "reference.safetensors");
  DecoderReference r;
  const auto& ids = ck.at("token_ids");
  r.ids.resize(static_cast<size_t>(ids.numel()));
  std::memcpy(r.ids.data(), ids.data, ids.nbytes);
  r.logits = ck.to_f32("logits");
  r.vocab = ck.at("logits").shape.at(1);
  return r;
}

// transformers' greedy continuation (tools/make_hf_decoder_fixtures.py's fixtures only): the prompt and
// the tokens generate() gave after it.
struct GreedyReference {
  std::vector<int32_t> prompt, tokens;
};

inline GreedyReference read_greedy_reference(const std::string& name) {
  const auto ck = io::Checkpoint::open(decoder_fixture(name) / "reference.safetensors");
  const auto ints = [&](const char* tensor) {
    const auto& t = ck.at(tensor);
    std::vector<int32_t> v(static_cast<size_t>(t.numel()));
    std::memcpy(v.data(), t.data, t.nbytes);
    return v;
  };
  return {ints("greedy_prompt"), ints("greedy_ids")};
}

}  // namespace qjoule::test
