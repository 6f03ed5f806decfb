// make_linear_mxfp4 / make_linear_nvfp4 (kernels mxfp4_f32, nvfp4_f32, their BF16 GEMVs, the x16 kernel on
// repacked panels, AVX2 and the scalar twin; the rows' x16 GEMV: test_fp4_repacked.cpp) vs linear_mxfp4_ref / linear_nvfp4_ref, every ISA level and decode GEMV, widths with
// partial last blocks. Budgets: weight_only_test_util.h (the x16 GEMV's E2M1 table, 2·E2M1, is exact: no
// weight term). Quantization error vs FP32 weights (Gaussian x and W): relative RMS < 0.13.
#include <cmath>
#include <cstring>
#include <limits>

#include <gmock/gmock.h>

#include "error_of.h"

#include "qjoule/error.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "qjoule/quant/quantize_fp4.h"
#include "weight_only_test_util.h"

namespace {

using namespace qjoule;
using qjoule::test::Shape;

struct Fp4Case {
  const char* name;
  int block;            // weights a block
  size_t block_bytes;   // bytes a block
  size_t tensor_bytes;  // bytes a tensor besides its blocks
  std::unique_ptr<kernels::Linear> (*make)(const float*, const float*, int64_t, int64_t, const std::string&);
  void (*ref)(const float*, int64_t, const float*, const float*, int64_t, int64_t, const std::string&, float*);
};

const Fp4Case kCases[] = {
    {"mxfp4", 32, 17, 0, &kernels::make_linear_mxfp4, &kernels::linear_mxfp4_ref},
    {"nvfp4", 16, 9, 4, &kernels::make_linear_nvfp4, &kernels::linear_nvfp4_ref},
};

void expect_matches_reference(const Fp4Case& c, Shape s, unsigned seed) {
  const auto x = test::normal_vector(size_t(s.m * s.in), seed);
  const auto w = test::normal_vector(size_t(s.out * s.in), seed + 1, 0.05f);
  const auto b = test::normal_vector(size_t(s.out), seed + 2);
  const float* bias = s.out % 2 == 0 ? b.data() : nullptr;
  std::vector<float> ref(size_t(s.m * s.out));
  c.ref(x.data(), s.m, w.data(), bias, s.out, s.in, "t.weight", ref.data());
  const auto scale = test::budget_scale(x, w, bias, s);
  for (const auto& [isa, decode] : test::isas_and_decodes()) {
    test::ScopedIsa scoped(isa);
    test::ScopedWeightOnlyDecode scoped_decode(decode);
    auto lin = c.make(w.data(), bias, s.out, s.in, "t.weight");
    std::vector<float> y(ref.size());
    lin->forward(x.data(), s.m, y.data());
    test::expect_within_budget(y, ref, scale, s, lin->kernel_path());
    EXPECT_EQ(lin->format(), c.name);
    EXPECT_EQ(lin->kernel_path(), kernels::repacked_x16_kernel_path(isa, c.name, std::string(decode) == "x16"));
    const size_t blocks = size_t(s.out * ((s.in + c.block - 1) / c.block));
    EXPECT_EQ(lin->bytes_held(), blocks * c.block_bytes + c.tensor_bytes + (bias ? size_t(s.out) * 4 : 0));
  }
}

TEST(LinearFp4, MatchesReferenceAcrossShapesAndIsas) {
  for (const auto& c : kCases) {
    for (Shape s : {Shape{1, 7, 128}, Shape{3, 33, 192}, Shape{64, 50, 320}, Shape{9, 20, 1088}, Shape{300, 6, 64},
                    Shape{2, 300, 256}, Shape{4, 16, 2048}}) {
      SCOPED_TRACE(c.name);
      expect_matches_reference(c, s, 10);
    }
  }
}

// Any width: a row's last block may be partial, and a width need not be a multiple of the 128-weight chunk
// (the AVX-512 kernels' tail) nor of 64 (the AVX2 kernel's): 16, 48 (NVFP4 blocks only), 100, 331, 2880.
TEST(LinearFp4, AnyWidthWithAPartialLastBlockMatchesReference) {
  for (const auto& c : kCases) {
    for (int64_t in : {16, 48, 96, 100, 331, 2880}) {
      for (int64_t m : {1, 2, 5}) {
        SCOPED_TRACE(std::string(c.name) + " in=" + std::to_string(in));
        expect_matches_reference(c, Shape{m, 6, in}, 41);
      }
    }
  }
}

// What the kernels multiply by is the format's decoded value (dequantize_row_*_ref): x picking one column
// gives it back, decode and prefill, every ISA; MXFP4 exactly, and on weights on its grid (E2M1 times a power
// of two) that is the weight itself; NVFP4 within 4 ULP (its kernels fold the tensor's scale into the
// block's: one more rounding, fp4_scales.h).
TEST(LinearFp4, KernelsMultiplyByTheDecodedWeights) {
  const int64_t out = 4, in = 256;
  std::vector<float> w(size_t(out * in));
  for (size_t i = 0; i < w.size(); ++i) w[i] = quant::kE2M1Table[i % 16] * 0.25f;
  std::vector<float> decoded[2] = {std::vector<float>(w.size()), std::vector<float>(w.size())};
  const auto mx = quant::quantize_matrix_mxfp4(w.data(), out, in, "t");
  const auto nv = quant::quantize_matrix_nvfp4(w.data(), out, in, "t");
  for (int64_t o = 0; o < out; ++o) {
    quant::dequantize_row_mxfp4_ref(mx.row(o), in, decoded[0].data() + o * in);
    quant::dequantize_row_nvfp4_ref(nv.row(o), in, nv.tensor_scale, decoded[1].data() + o * in);
  }
  EXPECT_EQ(decoded[0], w);
  std::vector<float> x(size_t(5 * in), 0.0f);
  for (int64_t i = 0; i < 5; ++i) x[size_t(i * in + i * 3)] = 1.0f;  // picks column 3i of each row of W
  for (int f = 0; f < 2; ++f) {
    const auto& c = kCases[f];
    for (const auto& [isa, decode] : test::isas_and_decodes()) {
      test::ScopedIsa scoped(isa);
      test::ScopedWeightOnlyDecode scoped_decode(decode);
      auto lin = c.make(w.data(), nullptr, out, in, "t.weight");
      for (int64_t m : {1, 5}) {
        std::vector<float> y(size_t(m * out));
        lin->forward(x.data(), m, y.data());
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t o = 0; o < out; ++o) {
            const float want = decoded[f][size_t(o * in + i * 3)], got = y[size_t(i * out + o)];
            if (f == 0) {
              EXPECT_EQ(got, want) << c.name << " " << lin->kernel_path();
            } else {
              EXPECT_FLOAT_EQ(got, want) << c.name << " " << lin->kernel_path();
            }
          }
        }
      }
    }
  }
}

TEST(LinearFp4, QuantizationErrorVsFp32IsThatOf4Bits) {
  for (const auto& c : kCases) {
    const double err = test::quantization_error_vs_fp32(
        [&c](const float* w, int64_t out, int64_t in) { return c.make(w, nullptr, out, in, "t"); });
    RecordProperty(std::string("relative_rms ") + c.name, std::to_string(err));
    EXPECT_LT(err, 0.13) << c.name;
  }
}

TEST(LinearFp4, ANonFiniteWeightIsOneLineNamingTheTensor) {
  for (const auto& c : kCases) {
    std::vector<float> w(4 * 64, 0.1f);
    w[70] = std::numeric_limits<float>::quiet_NaN();
    const std::string what = test::error_of([&] { (void)c.make(w.data(), nullptr, 4, 64, "layers.0.mlp.up.weight"); });
    EXPECT_THAT(what, ::testing::HasSubstr("tensor 'layers.0.mlp.up.weight': NaN at [1, 6]")) << what;
    EXPECT_THAT(what, ::testing::HasSubstr(std::string("to quantize to ") + c.name)) << what;
  }
}

}  // namespace

namespace {

using namespace qjoule;

// Packed codes from elsewhere (a checkpoint's): a NaN or negative block scale, or a bad tensor scale, is one
// line naming the tensor and the block; the kernels never see it.
TEST(LinearFp4, APackedMatrixWithANanOrNegativeScaleIsOneLine) {
  std::vector<float> w(4 * 64, 0.1f);
  auto mx = quant::quantize_matrix_mxfp4(w.data(), 4, 64, "t");
  mx.blocks[3].scale_e8m0 = 0xFF;
  EXPECT_THAT(test::error_of([&] { (void)kernels::make_linear_mxfp4_packed(mx, nullptr, "experts.0.w1"); }),
              ::testing::HasSubstr("tensor 'experts.0.w1': NaN block scale (E8M0 0xFF) at [1, 1]; expected a power "
                                   "of two"));
  auto nv = quant::quantize_matrix_nvfp4(w.data(), 4, 64, "t");
  for (const uint8_t bad : {uint8_t{0x7F}, uint8_t{0xFF}, uint8_t{0xB8}}) {
    auto copy = nv;
    copy.blocks[5].scale_e4m3 = bad;
    const std::string what = test::error_of([&] { (void)kernels::make_linear_nvfp4_packed(copy, nullptr, "t.w"); });
    EXPECT_THAT(what, ::testing::HasSubstr("tensor 't.w': block scale E4M3 0x")) << what;
    EXPECT_THAT(what, ::testing::HasSubstr("at [1, 1]; expected a finite scale >= 0")) << what;
  }
  nv.tensor_scale = std::numeric_limits<float>::infinity();
  EXPECT_THAT(test::error_of([&] { (void)kernels::make_linear_nvfp4_packed(nv, nullptr, "t.w"); }),
              ::testing::HasSubstr("tensor 't.w': tensor scale inf; expected a finite scale > 0"));
}

// Multiplies layer `make()` (built at every ISA level and decode GEMV) by x = e_k for every `step`-th k of
// its one output row and hands (got, ref[k], kernel path, k) to `expect`.
template <class Make, class Expect>
void expect_each_column(const Make& make, const std::vector<float>& ref, int64_t step, const Expect& expect) {
  const int64_t in = static_cast<int64_t>(ref.size());
  for (const auto& [isa, decode] : test::isas_and_decodes()) {
    test::ScopedIsa scoped(isa);
    test::ScopedWeightOnlyDecode scoped_decode(decode);
    const auto lin = make();
    for (int64_t k = 0; k < in; k += step) {
      std::vector<float> x(size_t(in), 0.0f), y(1);
      x[size_t(k)] = 1.0f;
      lin->forward(x.data(), 1, y.data());
      expect(y[0], ref[size_t(k)], lin->kernel_path(), k);
    }
  }
}

// NVFP4's vector decoding of the E4M3 scales equals the table's for every finite non-negative byte, the
// subnormal ones included: each byte is a scale of its own block.
TEST(LinearFp4, EveryE4m3ScaleDecodesAsTheReference) {
  const int64_t out = 1, in = 128 * 16;  // one row of 16 chunks: 128 blocks
  std::vector<float> w(size_t(in), 0.0f);
  auto nv = quant::quantize_matrix_nvfp4(w.data(), out, in, "t");
  for (int64_t j = 0; j < nv.blocks_per_row(); ++j) {
    nv.blocks[size_t(j)].scale_e4m3 = static_cast<uint8_t>(j % 127);  // 0x00 .. 0x7E
    for (auto& q : nv.blocks[size_t(j)].qs) q = 0x27;                 // codes 2 and 7: 1 and 6
  }
  nv.tensor_scale = 0.75f;
  std::vector<float> ref(static_cast<size_t>(in));
  quant::dequantize_row_nvfp4_ref(nv.row(0), in, nv.tensor_scale, ref.data());
  expect_each_column([&] { return kernels::make_linear_nvfp4_packed(nv, nullptr, "t"); }, ref, 37,
                     [](float got, float want, const std::string& path, int64_t k) {
                       EXPECT_FLOAT_EQ(got, want) << path << " k=" << k;
                     });
}

// MXFP4's vector decoding of the E8M0 scales equals the reference's, 2^-127 (byte 0, subnormal) included
// (exactly, but on the x16 GEMV: within 1e-4).
TEST(LinearFp4, EveryE8m0ScaleDecodesAsTheReference) {
  const int64_t in = 32 * 232;  // blocks with scale bytes 0 .. 231 (2^-127 .. 2^104: products stay finite)
  std::vector<float> w(size_t(in), 0.0f);
  auto mx = quant::quantize_matrix_mxfp4(w.data(), 1, in, "t");
  for (int64_t j = 0; j < mx.blocks_per_row(); ++j) {
    mx.blocks[size_t(j)].scale_e8m0 = static_cast<uint8_t>(j);
    for (auto& q : mx.blocks[size_t(j)].qs) q = 0x2F;  // codes 2 and 15: 1 and −6
  }
  std::vector<float> ref(static_cast<size_t>(in));
  quant::dequantize_row_mxfp4_ref(mx.row(0), in, ref.data());
  expect_each_column([&] { return kernels::make_linear_mxfp4_packed(mx, nullptr, "t"); }, ref, 29,
                     [](float got, float want, const std::string& path, int64_t k) {
                       // The x16 GEMV's activation 1 is 32767 · (1 / 32767): not exact, and subnormal results keep
                       // fewer bits.
                       if (test::x16_decode(path, 1)) {
                         EXPECT_NEAR(got, want, 1e-4 * std::fabs(want)) << path << " k=" << k;
                       } else {
                         EXPECT_EQ(got, want) << path << " k=" << k;
                       }
                     });
}

// AVX512_VBMI's code gather (one vpermt2b over a chunk's blocks) reads the same bytes as the loads it replaces:
// every ISA level and decode GEMV gives the same outputs bit for bit with it and without, on rows whose last
// chunk is partial (its masked load stops at the row's end) and on matrices of one row (nothing read past it).
TEST(LinearFp4, TheVbmiCodeGatherGivesThePlainKernelsOutputsBitForBit) {
  if (!kernels::fp4_codes_by_vbmi()) GTEST_SKIP() << "this CPU has no AVX512_VBMI (or AVX-512)";
  for (const auto& c : kCases) {
    for (Shape s : {Shape{1, 1, 128}, Shape{1, 37, 1088}, Shape{3, 20, 2880}, Shape{40, 9, 640}}) {
      const auto x = test::normal_vector(size_t(s.m * s.in), 5);
      const auto w = test::normal_vector(size_t(s.out * s.in), 6, 0.05f);
      for (const auto& [isa, decode] : test::isas_and_decodes()) {
        test::ScopedIsa scoped(isa);
        test::ScopedWeightOnlyDecode scoped_decode(decode);
        auto lin = c.make(w.data(), nullptr, s.out, s.in, "t.weight");
        std::vector<float> with(size_t(s.m * s.out)), without(with.size());
        lin->forward(x.data(), s.m, with.data());
        kernels::set_fp4_codes_by_vbmi(false);
        lin->forward(x.data(), s.m, without.data());
        kernels::set_fp4_codes_by_vbmi(true);
        EXPECT_EQ(std::memcmp(with.data(), without.data(), with.size() * sizeof(float)), 0)
            << c.name << " " << lin->kernel_path() << " m " << s.m << " out " << s.out << " in " << s.in;
      }
    }
  }
}

}  // namespace
