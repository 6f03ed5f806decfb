// What the calibration tests share: token sequences (uniform, or text-like: few ids carry most tokens),
// a layer policy from a precision, and the mean KL of a model's next-token distributions from another's.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <span>
#include <random>
#include <string>
#include <vector>

#include "decoder_fixtures.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/quant/layer_policy.h"

namespace qjoule::test {

inline std::vector<std::vector<int32_t>> random_sequences(int n, int len, int32_t vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(n), std::vector<int32_t>(static_cast<size_t>(len)));
  for (auto& s : out)
    for (auto& t : s) t = id(rng);
  return out;
}

// Sequences as text has them: a few dozen ids carry most tokens (Zipf weights over 48 of the
// vocabulary), so the Linears' inputs span few directions, where calibration has something to use.
inline std::vector<std::vector<int32_t>> text_like_sequences(int n, int len, int32_t vocab, unsigned seed) {
  std::mt19937 rng(seed), pick(7);  // the same 48 ids for every seed
  std::vector<int32_t> ids(48);
  std::vector<double> weights(48);
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = std::uniform_int_distribution<int32_t>(0, vocab - 1)(pick);
    weights[i] = 1.0 / double(i + 1);
  }
  std::discrete_distribution<size_t> which(weights.begin(), weights.end());
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(n), std::vector<int32_t>(static_cast<size_t>(len)));
  for (auto& s : out)
    for (auto& t : s) t = ids[which(rng)];
  return out;
}

inline quant::LayerPolicy policy(const std::string& precision) {
  quant::LayerPolicyOptions o;
  o.precision = precision;
  return quant::LayerPolicy::parse(o);
}

inline double mean_kl(const model::DecoderLM& base, const model::DecoderLM& q,
                      const std::vector<std::vector<int32_t>>& seqs) {
  const int64_t vocab = base.config().vocab_size;
  double kl = 0.0;
  int64_t count = 0;
  for (const auto& s : seqs) {
    const int64_t n = int64_t(s.size());
    std::vector<float> a(size_t(n * vocab)), b(a.size());
    auto ca = base.make_cache(n), cb = q.make_cache(n);
    base.forward(s.data(), n, ca, a.data());
    q.forward(s.data(), n, cb, b.data());
    for (int64_t t = 0; t < n; ++t) {
      const float* la = a.data() + t * vocab;
      const float* lb = b.data() + t * vocab;
      double ma = -1e300, mb = -1e300, za = 0.0, zb = 0.0;
      for (int64_t v = 0; v < vocab; ++v) ma = std::max(ma, double(la[v])), mb = std::max(mb, double(lb[v]));
      for (int64_t v = 0; v < vocab; ++v) za += std::exp(la[v] - ma), zb += std::exp(lb[v] - mb);
      for (int64_t v = 0; v < vocab; ++v) {
        const double lpa = la[v] - ma - std::log(za), lpb = lb[v] - mb - std::log(zb);
        kl += std::exp(lpa) * (lpa - lpb);
      }
      ++count;
    }
  }
  return kl / double(count);
}

// A copy of fixture `name` in a temporary folder `as`, every tensor as F32 after `change(tensor, values)`.
template <class Change>
std::filesystem::path rewritten_fixture(const std::string& name, const std::string& as, Change change) {
  const auto src = io::Checkpoint::open(decoder_fixture(name));
  const auto dir = temp_dir(as);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* f : {"config.json", "tokenizer.json"})
    std::filesystem::copy_file(decoder_fixture(name) / f, dir / f);
  std::vector<std::vector<float>> values;
  std::vector<io::TensorToWrite> tensors;
  for (const auto& [tensor, view] : src.tensors()) {
    values.push_back(src.to_f32(tensor));
    change(tensor, values.back());
  }
  std::size_t i = 0;
  for (const auto& [tensor, view] : src.tensors()) {
    const auto& v = values[i++];
    tensors.push_back({tensor, io::DType::F32, view.shape, std::as_bytes(std::span<const float>(v))});
  }
  io::write_safetensors(dir / "model.safetensors", tensors);
  return dir;
}

}  // namespace qjoule::test
