#include "qjoule/eval/kl_base.h"

#include <cmath>
#include <cstring>
#include <fstream>

#include "qjoule/error.h"

namespace qjoule::eval {
namespace {

constexpr char kMagic[8] = {'Q', 'J', 'K', 'L', 'B', 'A', 'S', '1'};
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 4 * 8 + 8;

template <typename T>
void put(std::ofstream& out, const T& value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <typename T>
T get(const std::vector<char>& bytes, std::size_t& at) {
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof(T));
  at += sizeof(T);
  return value;
}

}  // namespace

double KlBase::ppl() const { return scored > 0 ? std::exp(nll_sum / static_cast<double>(scored)) : 0.0; }

void write_kl_base(const std::filesystem::path& path, const KlBase& base) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("--save-kl-base {}: cannot open the file for writing", path.string());
  out.write(kMagic, sizeof(kMagic));
  put(out, base.vocab_size);
  put(out, int32_t{0});
  put(out, base.ctx);
  put(out, base.stride);
  put(out, static_cast<int64_t>(base.token_ids.size()));
  put(out, base.scored);
  put(out, base.nll_sum);
  out.write(reinterpret_cast<const char*>(base.token_ids.data()),
            static_cast<std::streamsize>(base.token_ids.size() * sizeof(int32_t)));
  out.write(reinterpret_cast<const char*>(base.log_probs.data()),
            static_cast<std::streamsize>(base.log_probs.size() * sizeof(uint16_t)));
  out.close();
  if (!out) fail("--save-kl-base {}: writing failed (disk full?)", path.string());
}

KlBase read_kl_base(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("--kl-base {}: cannot open the file", path.string());
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto name = path.string();
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    fail("--kl-base {}: not a qjoule KL base (expected a file written by qjoule ppl --save-kl-base, magic QJKLBAS1)",
         name);
  std::size_t at = sizeof(kMagic);
  KlBase base;
  base.vocab_size = get<int32_t>(bytes, at);
  get<int32_t>(bytes, at);
  base.ctx = get<int64_t>(bytes, at);
  base.stride = get<int64_t>(bytes, at);
  const auto n_tokens = get<int64_t>(bytes, at);
  base.scored = get<int64_t>(bytes, at);
  base.nll_sum = get<double>(bytes, at);
  if (base.vocab_size <= 0 || n_tokens < 2 || base.scored < 1 || base.scored >= n_tokens || base.ctx < 2 ||
      base.stride < 1)
    fail("--kl-base {}: header is inconsistent (vocab {}, {} tokens, {} scored, ctx {}, stride {})", name,
         base.vocab_size, n_tokens, base.scored, base.ctx, base.stride);
  const auto expected = kHeaderBytes + static_cast<std::size_t>(n_tokens) * 4 +
                        static_cast<std::size_t>(base.scored) * static_cast<std::size_t>(base.vocab_size) * 2;
  if (bytes.size() != expected)
    fail("--kl-base {}: {} bytes, expected {} for {} tokens and {} scored × vocab {} (truncated or not a KL base)",
         name, bytes.size(), expected, n_tokens, base.scored, base.vocab_size);
  base.token_ids.resize(static_cast<size_t>(n_tokens));
  std::memcpy(base.token_ids.data(), bytes.data() + at, base.token_ids.size() * sizeof(int32_t));
  at += base.token_ids.size() * sizeof(int32_t);
  for (std::size_t i = 0; i < base.token_ids.size(); ++i)
    if (base.token_ids[i] < 0 || base.token_ids[i] >= base.vocab_size)
      fail("--kl-base {}: token id {} at index {} is outside the vocabulary of {} tokens", name, base.token_ids[i], i,
           base.vocab_size);
  base.log_probs.resize(static_cast<size_t>(base.scored) * static_cast<size_t>(base.vocab_size));
  std::memcpy(base.log_probs.data(), bytes.data() + at, base.log_probs.size() * sizeof(uint16_t));
  return base;
}

}  // namespace qjoule::eval
