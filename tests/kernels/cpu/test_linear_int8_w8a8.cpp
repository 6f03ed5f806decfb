// INT8 W8A8 dynamic linear (oneDNN u8×s8→s32) against its scalar integer twin and against FP32.
// Budgets:
//   vs linear_int8_w8a8_ref: 1e-6 · max|ref| — the codes and integer dot products are identical and
//     both sides evaluate the same FP32 dequantization expression, so any saturated or dropped
//     product (≥ 1 unit of scale_i·scale_j ≈ 1e-5 · max|y| here) would exceed it.
//   vs FP32: per element, the rigorous quantization bound
//     ½·s_w(j)·Σ|x| + ½·s_x(i)·Σ|w_j| + ¼·s_x(i)·s_w(j)·K  (+1e-4 for FP32 rounding).
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/gemv_u8s8s32_avx512_vnni.h"

#include "random_data.h"

#include "qjoule/error.h"
#include "qjoule/kernels/linear_onednn_lowp.h"

namespace {

using namespace qjoule::kernels;

using qjoule::test::random_vector;

TEST(LinearInt8W8A8OneDnn, MatchesIntegerReferenceAndStaysWithinQuantizationBound) {
  const int qmax = int8_w8a8_weight_qmax();
  for (auto [m, out, in] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 7, 5}, {13, 64, 48}, {128, 96, 256}, {3, 1, 1}, {70, 300, 768}}) {
    auto x = random_vector(size_t(m * in), 1);
    auto w = random_vector(size_t(out * in), 2, 0.05f);
    auto b = random_vector(size_t(out), 3);
    x[0] = 25.0f;  // an activation outlier, as transformers have
    for (bool with_bias : {false, true}) {
      const float* bias = with_bias ? b.data() : nullptr;
      auto lin = make_linear_int8_w8a8(w.data(), bias, out, in, "test.weight");
      std::vector<float> y(size_t(m * out)), ref(y.size()), f32(y.size());
      lin->forward(x.data(), m, y.data());
      linear_int8_w8a8_ref(x.data(), m, w.data(), bias, out, in, qmax, ref.data());
      linear_f32_ref(x.data(), m, w.data(), bias, out, in, f32.data());
      float max_ref = 0.0f;
      for (float v : ref) max_ref = std::max(max_ref, std::fabs(v));
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_NEAR(y[i], ref[i], 1e-6f * max_ref) << "m=" << m << " out=" << out << " in=" << in << " i=" << i;
      }
      for (int64_t i = 0; i < m; ++i) {
        float sx = 0.0f, ax = 0.0f;
        for (int64_t k = 0; k < in; ++k) {
          sx += std::fabs(x[size_t(i * in + k)]);
          ax = std::max(ax, std::fabs(x[size_t(i * in + k)]));
        }
        for (int64_t j = 0; j < out; ++j) {
          float sw = 0.0f, aw = 0.0f;
          for (int64_t k = 0; k < in; ++k) {
            sw += std::fabs(w[size_t(j * in + k)]);
            aw = std::max(aw, std::fabs(w[size_t(j * in + k)]));
          }
          const float step_x = ax / 127.0f, step_w = aw / float(qmax);
          const float bound = 0.5f * step_w * sx + 0.5f * step_x * sw + 0.25f * step_x * step_w * float(in) + 1e-4f;
          ASSERT_NEAR(y[size_t(i * out + j)], f32[size_t(i * out + j)], bound) << "i=" << i << " j=" << j;
        }
      }
      EXPECT_EQ(lin->format(), "int8");
      const std::string path = lin->kernel_path();
      // qjoule's VNNI GEMV for m <= 4 where the CPU has AVX512_VNNI, oneDNN's matmul otherwise.
      const std::string decode =
          qjoule::kernels::cpu_supports_avx512_vnni() ? "qjoule:avx512_vnni:u8s8s32_gemv,m>4:" : "";
      EXPECT_EQ(path.rfind(decode + "onednn:", 0), 0u) << path;
      EXPECT_NE(path.find(":u8s8s32"), std::string::npos) << path;
      EXPECT_EQ(path.ends_with(":w7bit"), qmax == 63) << path;
      EXPECT_EQ(lin->bytes_held(), size_t(out * in) + size_t(out) * (4 + 4 + 4));
    }
  }
}

TEST(LinearInt8W8A8OneDnn, ZeroInputRowGivesBias) {
  const int64_t out = 5, in = 40;
  auto w = random_vector(size_t(out * in), 4);
  auto b = random_vector(size_t(out), 5);
  std::vector<float> x(size_t(2 * in), 0.0f);
  x[in + 3] = 1.0f;
  auto lin = make_linear_int8_w8a8(w.data(), b.data(), out, in, "t");
  std::vector<float> y(size_t(2 * out));
  lin->forward(x.data(), 2, y.data());
  for (int64_t j = 0; j < out; ++j) EXPECT_EQ(y[size_t(j)], b[size_t(j)]);
}

TEST(LinearInt8W8A8OneDnn, RejectsNonFiniteWeightsAndActivationsNamingTheTensor) {
  std::vector<float> w(6 * 8, 0.5f), x(8, 1.0f), y(6);
  w[9] = std::numeric_limits<float>::quiet_NaN();
  try {
    make_linear_int8_w8a8(w.data(), nullptr, 6, 8, "layer.1.ffn.lin1.weight");
    FAIL() << "NaN weight accepted";
  } catch (const qjoule::Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer.1.ffn.lin1.weight"), std::string::npos) << e.what();
  }
  w[9] = 0.5f;
  auto lin = make_linear_int8_w8a8(w.data(), nullptr, 6, 8, "layer.1.ffn.lin1.weight");
  x[2] = std::numeric_limits<float>::infinity();
  try {
    lin->forward(x.data(), 1, y.data());
    FAIL() << "Inf activation accepted";
  } catch (const qjoule::Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer.1.ffn.lin1.weight"), std::string::npos) << e.what();
  }
}

TEST(LinearInt8W8A8OneDnn, SmoothQuantAtRunTimeMatchesReferenceAndHelpsOutlierChannels) {
  // Channel 3 of every token is an outlier (×40), the classic case SmoothQuant addresses.
  const int64_t m = 32, out = 48, in = 96;
  auto x = random_vector(size_t(m * in), 6);
  auto w = random_vector(size_t(out * in), 7, 0.05f);
  for (int64_t i = 0; i < m; ++i) x[size_t(i * in + 3)] *= 40.0f;
  std::vector<float> s(static_cast<size_t>(in));
  for (int64_t k = 0; k < in; ++k) {  // alpha 0.5 from the data
    float ax = 0.0f, aw = 0.0f;
    for (int64_t i = 0; i < m; ++i) ax = std::max(ax, std::fabs(x[size_t(i * in + k)]));
    for (int64_t j = 0; j < out; ++j) aw = std::max(aw, std::fabs(w[size_t(j * in + k)]));
    s[size_t(k)] = std::sqrt(ax) / std::sqrt(aw);
  }
  auto plain = make_linear_int8_w8a8(w.data(), nullptr, out, in, "t");
  auto smooth = make_linear_int8_w8a8(w.data(), nullptr, out, in, "t", s.data());
  EXPECT_TRUE(smooth->kernel_path().ends_with(":smoothed")) << smooth->kernel_path();
  EXPECT_EQ(smooth->bytes_held(), plain->bytes_held() + size_t(in) * 4);
  std::vector<float> y_plain(size_t(m * out)), y_smooth(y_plain.size()), ref(y_plain.size()), f32(y_plain.size());
  plain->forward(x.data(), m, y_plain.data());
  smooth->forward(x.data(), m, y_smooth.data());
  linear_int8_w8a8_ref(x.data(), m, w.data(), nullptr, out, in, int8_w8a8_weight_qmax(), ref.data(), s.data());
  linear_f32_ref(x.data(), m, w.data(), nullptr, out, in, f32.data());
  float max_ref = 0.0f;
  for (float v : ref) max_ref = std::max(max_ref, std::fabs(v));
  double err_plain = 0.0, err_smooth = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_NEAR(y_smooth[i], ref[i], 1e-6f * max_ref) << i;
    err_plain += std::pow(double(y_plain[i]) - f32[i], 2.0);
    err_smooth += std::pow(double(y_smooth[i]) - f32[i], 2.0);
  }
  EXPECT_LT(err_smooth, 0.5 * err_plain) << "smoothing should at least halve the squared error here";
  std::vector<float> bad = s;
  bad[5] = 0.0f;
  EXPECT_THROW(make_linear_int8_w8a8(w.data(), nullptr, out, in, "t", bad.data()), qjoule::Error);
}

}  // namespace
