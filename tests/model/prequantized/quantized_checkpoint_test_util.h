// What the pre-quantized checkpoint tests share (test_prequantized_linear, test_python_quantized_checkpoints,
// test_checkpoint_export): a decoder's logits on a fixed prompt, the Linear factory of one precision spec,
// and the relative RMS difference of two logit vectors.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/quantization_plan.h"
#include "test_paths.h"

namespace qjoule::test {

// Logits of all 24 positions of a fixed pseudo-random prompt.
inline std::vector<float> prompt_logits(const model::DecoderLM& m) {
  std::vector<int32_t> ids;
  for (int i = 0; i < 24; ++i) ids.push_back(static_cast<int32_t>((i * 97 + 13) % m.config().vocab_size));
  std::vector<float> logits(ids.size() * static_cast<std::size_t>(m.config().vocab_size));
  auto cache = m.make_cache(static_cast<int64_t>(ids.size()));
  m.forward(ids.data(), static_cast<int64_t>(ids.size()), cache, logits.data(), 0);
  return logits;
}

// Every Linear in `precision` (a format spec); `exclude` (--quant-exclude) keeps those FP32, e.g. "lm_head"
// where two checkpoints store their heads in different types.
inline model::LinearFactory precision_factory(const std::string& precision, const std::string& exclude = "") {
  quant::LayerPolicyOptions po;
  po.precision = precision;
  po.exclude = exclude;
  return model::quantized_linear_factory(quant::LayerPolicy::parse(po), {});
}

// Debian's python3, which runs the numpy packers in tools/ (python3-numpy: scripts/install-deps.sh).
inline constexpr const char* kDebianPython = "/usr/bin/python3";

// Whether it is there with numpy (the tests that need it skip, saying so, without).
inline bool have_numpy() {
  static const bool ok = std::filesystem::exists(kDebianPython) &&
                         std::system((std::string(kDebianPython) + " -c 'import numpy' 2>/dev/null").c_str()) == 0;
  return ok;
}

// A script of tools/ in the checkout.
inline std::filesystem::path tool_script(const std::string& name) {
  return fixtures_dir().parent_path().parent_path() / "tools" / name;
}

// ||a - b|| / ||b||.
inline double relative_rms(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace qjoule::test
