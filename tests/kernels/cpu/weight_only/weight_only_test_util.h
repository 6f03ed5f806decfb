// Shared helpers of the weight-only linear tests: random data, every ISA this CPU runs, and the
// comparison against the _ref twin with the budget every test states:
//   |y − y_ref| <= 1e-5 · (Σ_k |x_k · w_k| + |b|) + 1e-30     (FP32 vs double accumulation)
// except where the layer multiplies in BF16 (the avx512_bf16 level: the prefill's BF16 panel for m > 4
// rows, the 4-bit formats' BF16 GEMV for m <= 4): there x and the dequantized w are each rounded to BF16 (relative error <= 2^-9 each, so <= 2^-8 + 2^-18 per product)
// before FP32 accumulation, and the budget is kBf16PanelBudget = 2^-8 + 1e-5 instead; and where int4
// decodes on 16-bit integer activations ("qjoule:avx512_vnni:int4_x16", m <= 4): each x_k is off by at
// most max|x| of its 32-block / 65534 (2^-16 of the block's largest), so the budget adds
// 2^-15 · Σ_blocks max_b |x| · Σ_{k in b} |w_k| (twice the bound: |dequantized w| may exceed |w| by
// half a step) to the 1e-5 one (w8's "qjoule:avx512:w8_x16" as well); NF4's x16 GEMV ("..._x16" after "qjoule:avx512_vnni:nf4") rounds its
// table to 2^-14 of each 64-block's absmax as well: + 2^-13 · Σ_c max_c |w| · Σ_{k in c} |x_k| (twice,
// for nf4:dq's decoded absmax).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "random_data.h"

#include "kernels/cpu/gemv_u8s8s32_avx512_vnni.h"
#include "kernels/cpu/weight_only/panel_matmul.h"
#include "qjoule/kernels/linear_weight_only.h"

namespace qjoule::test {

inline std::vector<float> normal_vector(size_t n, unsigned seed, float sigma = 1.0f) {
  return qjoule::test::random_vector(n, seed, sigma);
}

inline constexpr double kBf16PanelBudget = 0x1p-8 + 1e-5;

// The ISA levels this run can test: scalar always, and every wider level the CPU runs unless
// QJOULE_FORCE_SCALAR forces the scalar path for the whole run.
inline std::vector<kernels::WeightOnlyIsa> runnable_isas() {
  std::vector<kernels::WeightOnlyIsa> isas{kernels::WeightOnlyIsa::scalar};
  kernels::set_force_scalar_kernels(false);
  const kernels::WeightOnlyIsa widest = kernels::weight_only_isa();
  for (auto level :
       {kernels::WeightOnlyIsa::avx2, kernels::WeightOnlyIsa::avx512, kernels::WeightOnlyIsa::avx512_bf16}) {
    if (widest >= level) isas.push_back(level);
  }
  return isas;
}

// The kernel path a layer built for `isa` reports; formats without an AVX-512 kernel (fp16)
// pass avx512_kernel = false and run avx2; 4-bit formats pass bf16_decode = true.
inline std::string expected_path(kernels::WeightOnlyIsa isa, const std::string& kernel, bool avx512_kernel = true,
                                 bool bf16_decode = false) {
  if (!avx512_kernel && isa > kernels::WeightOnlyIsa::avx2) isa = kernels::WeightOnlyIsa::avx2;
  return kernels::weight_only_kernel_path(isa, kernel, bf16_decode);
}

// The relative budget for a layer with this kernel path at m rows (see the top of this file).
inline double relative_budget(const std::string& kernel_path, int64_t m) {
  const bool bf16_decode = kernel_path.starts_with("qjoule:avx512_bf16:");
  const bool bf16_prefill = kernel_path.find(",m>4:bf16_panel") != std::string::npos;
  return (m > 4 ? bf16_prefill : bf16_decode) ? kBf16PanelBudget : 1e-5;
}
// The budget's factors on the activation and weight block maxima (BudgetScale::block_max,
// weight_block_max) for that path at m rows.
inline bool x16_decode(const std::string& kernel_path, int64_t m) {
  const std::string path = kernel_path.substr(0, kernel_path.find(' '));  // what may follow the path: " dq"
  const std::string decode = path.substr(0, path.find(",m>4:"));
  if (decode == path && decode.ends_with("_x16_repacked")) return true;  // one x16 kernel at every m
  return m <= 4 && (decode.ends_with("_x16") || decode.ends_with("_x16_repacked"));
}
inline double block_max_budget(const std::string& kernel_path, int64_t m) {
  return x16_decode(kernel_path, m) ? 0x1p-15 : 0.0;
}
// NF4's x16 kernels round the table's values: to 2^-14 of the absmax in the rows' GEMV (round(T · 2^13)),
// to 2^-13 in the repacked kernel (round(T · 2^12)); the budget is twice that.
inline double weight_block_max_budget(const std::string& kernel_path, int64_t m) {
  if (!x16_decode(kernel_path, m) || kernel_path.find(":nf4") == std::string::npos) return 0.0;
  return kernel_path.find("_x16_repacked") != std::string::npos ? 0x1p-12 : 0x1p-13;
}

// Makes layers built inside its scope use `isa` at most.
class ScopedIsa {
 public:
  explicit ScopedIsa(kernels::WeightOnlyIsa isa) { kernels::set_weight_only_isa_limit(isa); }
  ~ScopedIsa() { kernels::set_force_scalar_kernels(false); }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;
};

// Sets an environment variable for one scope and unsets it on leaving.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

// QJOULE_WEIGHT_ONLY_DECODE (x16 or float: which GEMV 4-bit layers built inside its scope decode on).
struct ScopedWeightOnlyDecode : ScopedEnv {
  explicit ScopedWeightOnlyDecode(const char* decode) : ScopedEnv("QJOULE_WEIGHT_ONLY_DECODE", decode) {}
};

// QJOULE_WEIGHT_ONLY_LAYOUT (repacked or rows).
struct ScopedWeightOnlyLayout : ScopedEnv {
  explicit ScopedWeightOnlyLayout(const char* layout) : ScopedEnv("QJOULE_WEIGHT_ONLY_LAYOUT", layout) {}
};

// Whether this CPU runs the kernels on repacked panels: an AVX-512 level with AVX512_VNNI.
inline bool repacked_kernels_run() {
  return kernels::weight_only_isa() >= kernels::WeightOnlyIsa::avx512 && kernels::cpu_supports_avx512_vnni();
}

// Whether `path` is that of a layer of `format` ("int4", "nf4", "nf4dq", "mxfp4", "nvfp4") repacked for the x16
// kernel: where its prefill (m > 4) multiplies the rows' panels (on AMX tiles), their path follows.
inline bool is_repacked_x16_path(const std::string& path, const std::string& format) {
  const std::string x16 = "qjoule:avx512_vnni:" + format + "_x16_repacked";
  if (!kernels::repacked_prefill_on_panels(kernels::weight_only_isa())) return path == x16;
  return path == x16 + ",m>4:" + kernels::avx512::panel_kernel_path();
}

// The repacked kernels' budget terms for output (i, o), x and w (dequantized) rows of K columns, K a multiple
// of 32: Σ_k |x_k · w_k| and Σ_b max_{k in b} |x_k| · Σ_{k in b} |w_k| over the 32-blocks b (the x16
// activations' term, to be taken at 2^-15: twice their bound).
struct X16BudgetTerms {
  double products = 0.0, blocks = 0.0;
};
inline X16BudgetTerms x16_budget_terms(const float* x, const float* w, int64_t K) {
  X16BudgetTerms t;
  for (int64_t b0 = 0; b0 < K; b0 += 32) {
    double xmax = 0.0, wsum = 0.0;
    for (int64_t k = b0; k < b0 + 32; ++k) {
      t.products += std::fabs(double(x[k]) * w[k]);
      xmax = std::max(xmax, std::fabs(double(x[k])));
      wsum += std::fabs(w[k]);
    }
    t.blocks += xmax * wsum;
  }
  return t;
}

struct Shape {
  int64_t m, out, in;
};

// Every ISA level, each with both decode GEMVs where it has two (4-bit: x16 on AVX512_VNNI and at the avx2
// level; w8: x16 at the avx2 and avx512 levels; and the FP32 / BF16 one that QJOULE_WEIGHT_ONLY_DECODE=float
// keeps: what CPUs without them run). w8: pass kernels::w8_x16_decode_available.
inline std::vector<std::pair<kernels::WeightOnlyIsa, const char*>> isas_and_decodes(
    bool (*available)(kernels::WeightOnlyIsa) = &kernels::any_x16_decode_available) {
  std::vector<std::pair<kernels::WeightOnlyIsa, const char*>> out;
  for (auto isa : test::runnable_isas()) {
    out.emplace_back(isa, "x16");
    if (available(isa)) out.emplace_back(isa, "float");
  }
  return out;
}

// Per output element: the budget's scales, Σ_k |x_k · w_k| + |b|, Σ_b max_{k in b} |x_k| · Σ_{k in b} |w_k|
// over the 32-blocks b of the row, and Σ_c max_{k in c} |w_k| · Σ_{k in c} |x_k| over its 64-blocks c
// (W: the FP32 weights).
struct BudgetScale {
  std::vector<double> products, block_max, weight_block_max;
};
inline BudgetScale budget_scale(const std::vector<float>& x, const std::vector<float>& w, const float* bias,
                                const Shape& s) {
  const size_t n = size_t(s.m * s.out);
  BudgetScale scale{std::vector<double>(n), std::vector<double>(n), std::vector<double>(n)};
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t o = 0; o < s.out; ++o) {
      double v = bias != nullptr ? std::fabs(bias[o]) : 0.0, blocks = 0.0;
      for (int64_t b = 0; b < s.in; b += 32) {
        double xmax = 0.0, wsum = 0.0;
        for (int64_t k = b; k < std::min(s.in, b + 32); ++k) {
          const double xk = x[size_t(i * s.in + k)], wk = w[size_t(o * s.in + k)];
          v += std::fabs(xk * wk);
          xmax = std::max(xmax, std::fabs(xk));
          wsum += std::fabs(wk);
        }
        blocks += xmax * wsum;
      }
      double weight_blocks = 0.0;
      for (int64_t c = 0; c < s.in; c += 64) {
        double wmax = 0.0, xsum = 0.0;
        for (int64_t k = c; k < std::min(s.in, c + 64); ++k) {
          wmax = std::max(wmax, double(std::fabs(w[size_t(o * s.in + k)])));
          xsum += std::fabs(x[size_t(i * s.in + k)]);
        }
        weight_blocks += wmax * xsum;
      }
      scale.weight_block_max[size_t(i * s.out + o)] = weight_blocks;
      scale.products[size_t(i * s.out + o)] = v;
      scale.block_max[size_t(i * s.out + o)] = blocks;
    }
  }
  return scale;
}

// Checks |y − y_ref| <= relative_budget(what, m) · products + block_max_budget(what, m) · block_max +
// weight_block_max_budget(what, m) · weight_block_max + 1e-30 element by element (`what` starts with the layer's kernel path).
inline void expect_within_budget(const std::vector<float>& y, const std::vector<float>& y_ref, const BudgetScale& scale,
                                 const Shape& s, const std::string& what) {
  const double rel = relative_budget(what, s.m), per_block = block_max_budget(what, s.m);
  const double per_weight_block = weight_block_max_budget(what, s.m);
  for (size_t at = 0; at < y.size(); ++at) {
    ASSERT_LE(std::fabs(double(y[at]) - y_ref[at]), rel * scale.products[at] + per_block * scale.block_max[at] +
                                                        per_weight_block * scale.weight_block_max[at] + 1e-30)
        << what << " m=" << s.m << " out=" << s.out << " in=" << s.in << " at [" << at / size_t(s.out) << ", "
        << at % size_t(s.out) << "]: " << y[at] << " vs " << y_ref[at];
  }
}

// Quantization error of a format: relative RMS of a layer's output against the FP32 product with the
// original weights, on Gaussian x (σ = 1) and W (σ = 0.05), m = 16, out = 64, in = 768, no bias.
// make(W, out, in) builds the layer.
template <class Make>
double quantization_error_vs_fp32(const Make& make) {
  const Shape s{16, 64, 768};
  const auto x = normal_vector(size_t(s.m * s.in), 21);
  const auto w = normal_vector(size_t(s.out * s.in), 22, 0.05f);
  const auto lin = make(w.data(), s.out, s.in);
  std::vector<float> y(size_t(s.m * s.out)), y32(y.size());
  lin->forward(x.data(), s.m, y.data());
  kernels::linear_f32_ref(x.data(), s.m, w.data(), nullptr, s.out, s.in, y32.data());
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < y.size(); ++i) {
    num += (double(y[i]) - y32[i]) * (double(y[i]) - y32[i]);
    den += double(y32[i]) * y32[i];
  }
  return std::sqrt(num / den);
}

}  // namespace qjoule::test
