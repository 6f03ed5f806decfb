#include "qjoule/quant/smoothquant.h"

#include <algorithm>
#include <cmath>

#include "qjoule/error.h"

namespace qjoule::quant {
namespace {

void check_maxima(const std::vector<float>& v, const char* what) {
  for (size_t j = 0; j < v.size(); ++j) {
    if (!std::isfinite(v[j]) || v[j] < 0.0f) {
      fail("smoothquant: {} [{}] = {}; expected a finite abs-max >= 0", what, j, v[j]);
    }
  }
}

}  // namespace

void accumulate_channel_absmax(const float* x, int64_t rows, int64_t cols, std::vector<float>& running) {
  if (running.empty()) running.assign(static_cast<size_t>(cols), 0.0f);
  if (static_cast<int64_t>(running.size()) != cols) {
    fail("smoothquant calibration: activation has {} channels; expected {} as in earlier batches", cols,
         running.size());
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const float a = std::fabs(x[i * cols + j]);
      if (!std::isfinite(a)) fail("smoothquant calibration: activation [{}, {}] = {}; expected finite values", i, j, a);
      running[static_cast<size_t>(j)] = std::max(running[static_cast<size_t>(j)], a);
    }
  }
}

void accumulate_weight_input_absmax(const float* W, int64_t out, int64_t in, std::vector<float>& running) {
  if (running.empty()) running.assign(static_cast<size_t>(in), 0.0f);
  if (static_cast<int64_t>(running.size()) != in) {
    fail("smoothquant: weight has {} input columns; expected {} (linears sharing one input must agree)", in,
         running.size());
  }
  for (int64_t j = 0; j < out; ++j) {
    for (int64_t k = 0; k < in; ++k) {
      const float a = std::fabs(W[j * in + k]);
      if (!std::isfinite(a)) fail("smoothquant: weight [{}, {}] = {}; expected finite values", j, k, a);
      running[static_cast<size_t>(k)] = std::max(running[static_cast<size_t>(k)], a);
    }
  }
}

std::vector<float> smoothquant_scales(const std::vector<float>& act_absmax, const std::vector<float>& weight_absmax,
                                      float alpha) {
  if (!(alpha >= 0.0f && alpha <= 1.0f))
    fail("--smoothquant: alpha {} is out of range; expected 0 <= alpha <= 1", alpha);
  if (act_absmax.size() != weight_absmax.size()) {
    fail("smoothquant: {} activation maxima but {} weight maxima; expected one of each per input channel",
         act_absmax.size(), weight_absmax.size());
  }
  check_maxima(act_absmax, "activation abs-max");
  check_maxima(weight_absmax, "weight abs-max");
  std::vector<float> s(act_absmax.size());
  for (size_t j = 0; j < s.size(); ++j) {
    const double a = act_absmax[j], w = weight_absmax[j];
    if (a == 0.0 || w == 0.0) {
      s[j] = 1.0f;
      continue;
    }
    const double v = std::pow(a, double(alpha)) / std::pow(w, 1.0 - double(alpha));
    s[j] = static_cast<float>(std::clamp(v, double(kSmoothMin), double(kSmoothMax)));
  }
  return s;
}

void fold_smoothing_into_layernorm(float* gamma, float* beta, const std::vector<float>& s) {
  for (size_t j = 0; j < s.size(); ++j) {
    gamma[j] /= s[j];
    if (beta != nullptr) beta[j] /= s[j];
  }
}

void scale_linear_input_columns(float* W, int64_t out, int64_t in, const std::vector<float>& s) {
  if (static_cast<int64_t>(s.size()) != in) {
    fail("smoothquant: {} smoothing factors for a linear with {} input columns; expected equal", s.size(), in);
  }
  for (int64_t j = 0; j < out; ++j)
    for (int64_t k = 0; k < in; ++k) W[j * in + k] *= s[static_cast<size_t>(k)];
}

}  // namespace qjoule::quant
