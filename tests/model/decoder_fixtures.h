// The tiny decoder fixtures (tests/fixtures/decoders, written by tools/make_tiny_decoder_fixtures.py and,
// for the architectures checked against Hugging Face transformers itself, tools/make_hf_decoder_fixtures.py)
// and their reference logits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_lm.h"
#include "test_paths.h"

namespace qjoule::test {

inline const std::vector<std::string>& decoder_fixture_names() {
  static const std::vector<std::string> names = {"tiny-llama",     "tiny-qwen2",   "tiny-qwen3", "tiny-gemma3",
                                                 "tiny-phi3",      "tiny-llama32", "tiny-gpt2",  "tiny-mixtral",
                                                 "tiny-qwen3-moe", "tiny-olmoe"};
  return names;
}

// The mixture-of-experts fixtures: the CPU backend runs them, the CUDA backend says it does not yet.
inline bool moe_fixture(const std::string& name) {
  return name == "tiny-mixtral" || name == "tiny-qwen3-moe" || name == "tiny-olmoe";
}

// How many of the model's layers are a mixture of experts (0 for a dense model).
inline int64_t moe_layers(const model::DecoderConfig& c) { return c.moe_layer_count(); }

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

// The `steps` tokens greedy decoding gives after `prompt`: the prompt prefilled, then each token (the argmax,
// the first on ties) decoded through the KV cache, as transformers' generate(do_sample=False) does.
inline std::vector<int32_t> greedy_tokens(const model::DecoderLM& m, const std::vector<int32_t>& prompt,
                                          std::size_t steps) {
  auto cache = m.make_cache();
  std::vector<float> logits(static_cast<std::size_t>(m.config().vocab_size));
  m.forward(prompt.data(), static_cast<int64_t>(prompt.size()), cache, logits.data(),
            static_cast<int64_t>(prompt.size()) - 1);
  std::vector<int32_t> tokens;
  for (std::size_t step = 0; step < steps; ++step) {
    const auto best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    tokens.push_back(best);
    m.forward(&best, 1, cache, logits.data());
  }
  return tokens;
}

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
