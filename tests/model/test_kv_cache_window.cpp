// A sliding-window layer's KV cache as a ring of its last positions (KvCache, DecoderLM::make_cache with a
// rewind): tiny-gemma3 (windows 8, 8 and one full layer, checked against transformers over 40 tokens)
// decodes and prefills in chunks over rings with the logits of the whole cache, within 2e-5 (the ring
// sums a window's keys in another order), and within transformers' 1e-4; the ring holds the window's
// rows, not the context's; going back further than it holds is one line.
#include <cstdint>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "decoder_fixtures.h"
#include "edited_decoder_config.h"
#include "error_of.h"
#include "qjoule/model/decoder_lm.h"

namespace qjoule::model {
namespace {

using ::testing::HasSubstr;

float max_abs_diff(const float* a, const float* b, std::size_t n) {
  float m = 0.0f;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// The logits of every token of `ids`, forwarded in chunks of `chunk` tokens through `cache`.
std::vector<float> chunked(const DecoderLM& m, const std::vector<int32_t>& ids, int64_t chunk, KvCache& cache) {
  const int64_t v = m.config().vocab_size, n = static_cast<int64_t>(ids.size());
  std::vector<float> out(static_cast<std::size_t>(n * v));
  for (int64_t t = 0; t < n; t += chunk) {
    const int64_t c = std::min(chunk, n - t);
    m.forward(ids.data() + t, c, cache, out.data() + t * v);
  }
  return out;
}

TEST(KvCacheWindow, RingsGiveTheWholeCachesLogitsAndTransformers) {
  const auto ref = test::read_decoder_reference("tiny-gemma3");
  const auto m = load_decoder_lm(test::decoder_fixture("tiny-gemma3"));
  const auto n = static_cast<int64_t>(ref.ids.size());
  ASSERT_EQ(m.config().layer_window, (std::vector<int64_t>{8, 8, 0}));
  ASSERT_GE(n, 40);
  auto whole = m.make_cache(n);
  const auto expected = chunked(m, ref.ids, n, whole);
  for (const auto& [chunk, rewind] : std::vector<std::pair<int64_t, int64_t>>{{1, 0}, {1, 3}, {5, 0}, {13, 2}}) {
    auto ring = m.make_cache(n, rewind);
    EXPECT_EQ(ring.rows(0), 8 + rewind);
    EXPECT_EQ(ring.rows(2), n) << "the full layer holds every position";
    const auto got = chunked(m, ref.ids, chunk, ring);
    EXPECT_LE(max_abs_diff(got.data(), expected.data(), got.size()), 2e-5f) << "chunks of " << chunk;
    EXPECT_LE(max_abs_diff(got.data(), ref.logits.data(), got.size()), 1e-4f) << "transformers";
  }
  // The ring holds the windows' rows: 8 + 8 + 40 where the whole cache holds 3 × 40.
  const auto kv_row = static_cast<std::size_t>(m.config().kv_dim()) * 2 * sizeof(float);
  EXPECT_EQ(m.make_cache(n, 0).bytes(), (8 + 8 + static_cast<std::size_t>(n)) * kv_row);
  EXPECT_EQ(whole.bytes(), 3 * static_cast<std::size_t>(n) * kv_row);
}

TEST(KvCacheWindow, GoingBackIsAsFarAsTheRingHolds) {
  const auto ref = test::read_decoder_reference("tiny-gemma3");
  const auto m = load_decoder_lm(test::decoder_fixture("tiny-gemma3"));
  const int64_t v = m.config().vocab_size;
  auto ring = m.make_cache(40, 4);  // rows 12: positions 8 .. 19 held after 20 tokens
  std::vector<int32_t> ids(ref.ids.begin(), ref.ids.begin() + 20);
  auto first = chunked(m, ids, 1, ring);
  ring.truncate(15);  // the token at 15 reads 8 .. 14
  std::vector<float> again(static_cast<std::size_t>(5 * v));
  m.forward(ids.data() + 15, 5, ring, again.data());
  EXPECT_LE(max_abs_diff(again.data(), first.data() + 15 * v, again.size()), 2e-5f) << "decoded again from 15";
  EXPECT_THAT(test::error_of([&] { ring.truncate(14); }),
              HasSubstr("cannot go back to 14 tokens of the 20 it holds: its sliding-window layers keep the last "
                        "positions only, back to 15 tokens"));
  ring.truncate(0);  // always: nothing to read
  EXPECT_EQ(ring.size(), 0);
}

// A ring made for one window serves no model of another: one line naming the layer and both windows.
TEST(KvCacheWindow, ARingForAnotherWindowIsOneLine) {
  const auto m = load_decoder_lm(test::decoder_fixture("tiny-gemma3"));
  const auto wider = load_decoder_lm(test::edited_decoder_copy("tiny-gemma3", "kv_ring_window_10",
                                                               [](nlohmann::json& c) { c["sliding_window"] = 10; }));
  auto ring = m.make_cache(40, 0);
  const int32_t id = 1;
  std::vector<float> logits(static_cast<std::size_t>(m.config().vocab_size));
  EXPECT_THAT(test::error_of([&] { wider.forward(&id, 1, ring, logits.data()); }),
              HasSubstr("the KV cache's layer 0 is a ring for a window of 8, the model's is 10"));
}

}  // namespace
}  // namespace qjoule::model
