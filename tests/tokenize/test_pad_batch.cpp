#include <gtest/gtest.h>

#include "qjoule/tokenize/batch.h"

namespace qjoule::tokenize {
namespace {

TEST(PadBatch, PadsToLongestWithMask) {
  const Batch batch = pad_batch({{101, 7, 102}, {101, 102}, {101, 5, 6, 102}}, 0);
  EXPECT_EQ(batch.batch_size, 3u);
  EXPECT_EQ(batch.seq_len, 4u);
  EXPECT_EQ(batch.input_ids, (std::vector<int32_t>{101, 7, 102, 0, 101, 102, 0, 0, 101, 5, 6, 102}));
  EXPECT_EQ(batch.attention_mask, (std::vector<int32_t>{1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 1}));
}

TEST(PadBatch, UsesTheGivenPadId) {
  const Batch batch = pad_batch({{1}, {1, 2}}, 9);
  EXPECT_EQ(batch.input_ids, (std::vector<int32_t>{1, 9, 1, 2}));
}

TEST(PadBatch, EmptyListGivesEmptyBatch) {
  const Batch batch = pad_batch({}, 0);
  EXPECT_EQ(batch.batch_size, 0u);
  EXPECT_EQ(batch.seq_len, 0u);
  EXPECT_TRUE(batch.input_ids.empty());
  EXPECT_TRUE(batch.attention_mask.empty());
}

}  // namespace
}  // namespace qjoule::tokenize
