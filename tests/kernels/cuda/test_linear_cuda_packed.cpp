// make_linear_cuda_int4_packed: int4 codes handed in (GPTQ's, AWQ's) run on the GPU as make_linear_cuda's
// int4 layers run the same codes. Its checks of the codes come before the GPU and run everywhere; on a GPU
// the layer built from codes gives the outputs, label and bytes of the layer built from the weights whose
// round-to-nearest codes they are (bit for bit: the same blocks uploaded, the same kernels).
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/linear_cuda.h"
#include "qjoule/quant/format_spec.h"
#include "qjoule/quant/quantize_int4.h"
#include "random_data.h"

namespace qjoule::kernels {
namespace {

using test::error_of;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(CudaLinearPacked, CodesAreCheckedBeforeTheGpu) {
  const auto w = test::random_vector(4 * 64, 3, 0.05f);
  auto codes = quant::quantize_matrix_int4<quant::BlockInt4Sym<32>>(w.data(), 4, 64, "t");
  codes.blocks.pop_back();
  EXPECT_THAT(error_of([&] { make_linear_cuda_int4_packed(codes, nullptr, "model.layers.0.mlp.up_proj"); }),
              AllOf(HasSubstr("tensor 'model.layers.0.mlp.up_proj': 7 packed blocks of 32 weights for [4, 64]"),
                    HasSubstr("one block per 32 weights of each row"), Not(HasSubstr("\n"))));
  // A partial last group runs on the CPU; the CUDA kernels need whole groups.
  const auto partial = quant::quantize_matrix_int4<quant::BlockInt4Asym<64>>(w.data(), 2, 96, "t");
  EXPECT_THAT(error_of([&] { make_linear_cuda_int4_packed(partial, nullptr, "t.weight"); }),
              HasSubstr("in_features 96 is not a multiple of the int4 group size 64"));
}

TEST(CudaLinearPacked, WeightsAloneNeverRunUnderACalibratedName) {
  const std::vector<float> w(4 * 128, 0.25f);
  for (const std::string spec : {"int4:g=128:gptq", "int4:g=32:awq"}) {
    EXPECT_THAT(
        error_of([&] { make_linear_cuda(quant::parse_format_spec(spec), w.data(), nullptr, 4, 128, "t.weight"); }),
        AllOf(HasSubstr("tensor 't.weight'"), HasSubstr("needs calibration inputs")))
        << spec;
    // The format itself runs on CUDA (calibrated codes come through make_linear_cuda_int4_packed).
    EXPECT_NO_THROW(check_cuda_format(quant::parse_format_spec(spec), "--precision " + spec));
  }
}

TEST(CudaLinearPacked, WithoutAGpuTheCodesSayWhy) {
  const CudaDeviceStatus& s = cuda_device_status();
  if (s.usable) GTEST_SKIP() << "this machine has a usable GPU";
  const auto w = test::random_vector(8 * 128, 5, 0.05f);
  const auto codes = quant::quantize_matrix_int4<quant::BlockInt4Sym<128>>(w.data(), 8, 128, "t");
  EXPECT_THAT(error_of([&] { make_linear_cuda_int4_packed(codes, nullptr, "lm.weight"); }),
              AllOf(HasSubstr("tensor 'lm.weight'"),
                    HasSubstr(s.built ? "no usable GPU: " + s.reason : std::string("without the CUDA backend"))));
}

template <class Block>
void expect_codes_run_as_the_weights(int64_t m, int64_t out, int64_t in) {
  const auto w = test::random_vector(static_cast<std::size_t>(out * in), 7, 0.05f);
  const auto x = test::random_vector(static_cast<std::size_t>(m * in), 8);
  const auto bias = test::random_vector(static_cast<std::size_t>(out), 9);
  quant::FormatSpec f = quant::parse_format_spec("int4");
  f.group_size = Block::kSize;
  f.int4_asymmetric = std::is_same_v<Block, quant::BlockInt4Asym<Block::kSize>>;
  const auto from_weights = make_linear_cuda(f, w.data(), bias.data(), out, in, "t.weight");
  const auto from_codes =
      make_linear_cuda_int4_packed(quant::quantize_matrix_int4<Block>(w.data(), out, in, "t"), bias.data(), "t.weight");
  EXPECT_EQ(from_codes->format(), from_weights->format());
  EXPECT_EQ(from_codes->kernel_path_for(m), from_weights->kernel_path_for(m));
  EXPECT_EQ(from_codes->bytes_held(), from_weights->bytes_held());
  std::vector<float> a(static_cast<std::size_t>(m * out)), b(a.size());
  from_weights->forward(x.data(), m, a.data());
  from_codes->forward(x.data(), m, b.data());
  EXPECT_EQ(a, b) << "m=" << m << " out=" << out << " in=" << in;
}

TEST(CudaLinearPackedGpu, CodesRunBitForBitAsTheWeightsWhoseCodesTheyAre) {
  const CudaDeviceStatus& s = cuda_device_status();
  if (!s.usable) GTEST_SKIP() << "no usable GPU: " << s.reason;
  for (const int64_t m : {1, 3, 17}) {
    expect_codes_run_as_the_weights<quant::BlockInt4Sym<32>>(m, 96, 256);
    expect_codes_run_as_the_weights<quant::BlockInt4Asym<64>>(m, 40, 5632);
    expect_codes_run_as_the_weights<quant::BlockInt4Sym<128>>(m, 256, 2048);
  }
}

}  // namespace
}  // namespace qjoule::kernels
