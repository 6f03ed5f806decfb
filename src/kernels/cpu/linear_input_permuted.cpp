#include "qjoule/kernels/linear_input_permuted.h"

#include <string>

#include <fmt/format.h>

#include "qjoule/error.h"

namespace qjoule::kernels {
namespace {

void gather(const std::vector<int32_t>& perm, const float* x, int64_t m, float* xp) {
  const auto in = static_cast<int64_t>(perm.size());
  for (int64_t t = 0; t < m; ++t) {
    const float* row = x + t * in;
    float* out = xp + t * in;
    for (int64_t j = 0; j < in; ++j) out[j] = row[perm[static_cast<std::size_t>(j)]];
  }
}

class InputPermutedLinear final : public Linear {
 public:
  InputPermutedLinear(std::unique_ptr<Linear> inner, std::vector<int32_t> perm)
      : inner_(std::move(inner)), perm_(std::move(perm)) {}

  void forward(const float* x, int64_t m, float* y) const override {
    thread_local std::vector<float> gathered;  // reused across calls: no allocation per forward
    gathered.resize(static_cast<std::size_t>(m) * perm_.size());
    gather(perm_, x, m, gathered.data());
    inner_->forward(gathered.data(), m, y);
  }
  int64_t in_features() const override { return inner_->in_features(); }
  int64_t out_features() const override { return inner_->out_features(); }
  std::string format() const override { return inner_->format(); }
  std::string kernel_path() const override { return "gather(act-order)+" + inner_->kernel_path(); }
  std::size_t bytes_held() const override { return inner_->bytes_held() + perm_.size() * sizeof(int32_t); }

 private:
  std::unique_ptr<Linear> inner_;
  std::vector<int32_t> perm_;
};

}  // namespace

std::unique_ptr<Linear> make_linear_input_permuted(std::unique_ptr<Linear> inner, std::vector<int32_t> perm,
                                                   const std::string& tensor_name) {
  const int64_t in = inner->in_features();
  if (static_cast<int64_t>(perm.size()) != in)
    fail("{}: an input permutation of {} entries for a Linear of {} inputs", tensor_name, perm.size(), in);
  std::vector<bool> seen(perm.size(), false);
  for (std::size_t j = 0; j < perm.size(); ++j) {
    const int32_t i = perm[j];
    if (i < 0 || i >= in || seen[static_cast<std::size_t>(i)])
      fail("{}: input permutation entry {} is {}, expected each of 0 to {} once", tensor_name, j, i, in - 1);
    seen[static_cast<std::size_t>(i)] = true;
  }
  return std::make_unique<InputPermutedLinear>(std::move(inner), std::move(perm));
}

}  // namespace qjoule::kernels
