// A decoder's work a token as the roofline counts it: a sliding-window layer's attention reads at most
// its window's keys and values (tiny-gemma3: windows 8, 8 and one full layer), a full layer every earlier
// token's.
#include <gtest/gtest.h>

#include "bench/roofline_work.h"
#include "qjoule/model/decoder_lm.h"
#include "test_paths.h"

namespace qjoule::bench {
namespace {

TEST(DecoderRooflineWork, ASlidingWindowLayerReadsAtMostItsWindowOfKeys) {
  const auto m = model::load_decoder_lm(test::fixtures_dir() / "decoders" / "tiny-gemma3");
  const auto& c = m.config();
  ASSERT_EQ(c.layer_window, (std::vector<int64_t>{8, 8, 0}));
  double linears = 0.0;
  for (const auto& l : m.linear_reports()) linears += static_cast<double>(l.bytes_held);
  const double row = static_cast<double>(c.hidden_size) * 4.0;    // one FP32 embedding row
  const double kv = 2.0 * static_cast<double>(c.kv_dim()) * 4.0;  // a key and a value, FP32
  // Steps at contexts 21 .. 24: the windowed layers read 8 keys each, the full one 22.5 on average.
  EXPECT_DOUBLE_EQ(decoder_decode_bytes_per_token(m, 20, 4), linears + row + kv * (8.0 + 8.0 + 22.5));
  // Contexts 5 .. 10: a window of 8 reads 5, 6, 7, 8, 8, 8 (7 on average); the full layer 7.5.
  EXPECT_DOUBLE_EQ(decoder_decode_bytes_per_token(m, 4, 6), linears + row + kv * (7.0 + 7.0 + 7.5));
  // Within the window every layer reads the whole context.
  EXPECT_DOUBLE_EQ(decoder_decode_bytes_per_token(m, 2, 4), linears + row + kv * 3 * 4.5);
  // A prefill of 16: positions 0 .. 15 read 1 .. 16 keys, at most 8 in a window (6.25 on average).
  const auto prefill = decoder_prefill_work(m, 16);
  const auto full = decoder_prefill_work(m, 8);
  EXPECT_DOUBLE_EQ(prefill.fp32_flops_per_token, 4.0 * static_cast<double>(c.q_dim()) * (6.25 + 6.25 + 8.5));
  EXPECT_DOUBLE_EQ(full.fp32_flops_per_token, 4.0 * static_cast<double>(c.q_dim()) * 3 * 4.5);
}

}  // namespace
}  // namespace qjoule::bench
