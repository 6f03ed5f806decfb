// GraphOps::rope_store_kv on the CPU backend: its default (rope, then store_kv) gives the values of the
// two operations called apart, bit for bit, with the position as an argument or from the position
// source; an argument too small for what it reads is one line naming it.
#include <cstdint>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "qjoule/model/graph_ops.h"
#include "random_data.h"

namespace qjoule::model {
namespace {

using test::error_of;
using ::testing::HasSubstr;

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.size()); }

TEST(GraphOps, RopeStoreKvEqualsRopeThenStoreKv) {
  const auto ops = make_cpu_graph_ops();
  const int64_t q_heads = 3, kv_heads = 1, half = 2, head_dim = 2 * half, n = 2, past = 1;
  const int64_t row = (q_heads + 2 * kv_heads) * head_dim + 3, kv_stride = kv_heads * head_dim + 1;
  const int64_t cache_floats = (past + n + 1) * kv_stride;
  const Tensor freq = ops->upload({1.0f, 0.01f}, "inv_freq");
  const auto qkv = test::random_vector(static_cast<std::size_t>(n * row), 5);
  for (const bool from_source : {false, true}) {
    SCOPED_TRACE(from_source ? "position from the source" : "position as an argument");
    const Tensor x1 = ops->upload(qkv, "qkv"), x2 = ops->upload(qkv, "qkv");
    const Tensor k1 = ops->upload(std::vector<float>(cache_floats, -1.0f), "k"),
                 v1 = ops->upload(std::vector<float>(cache_floats, -1.0f), "v");
    const Tensor k2 = ops->upload(std::vector<float>(cache_floats, -1.0f), "k"),
                 v2 = ops->upload(std::vector<float>(cache_floats, -1.0f), "v");
    const int64_t q_cols = q_heads * head_dim, kv_cols = kv_heads * head_dim;
    ops->rope(x1, n, row, q_heads + kv_heads, past, freq, 1.0f);
    ops->store_kv(x1.slice(q_cols, x1.size() - q_cols), x1.slice(q_cols + kv_cols, x1.size() - q_cols - kv_cols), row,
                  k1, v1, kv_stride, past, n, kv_cols);
    const Tensor position = ops->empty(DType::i32, 1, "position");
    *position.i32() = static_cast<int32_t>(past);
    if (from_source) ops->set_position_source(position);
    ops->rope_store_kv(x2, n, row, q_heads, kv_heads, from_source ? 0 : past, freq, 1.0f, k2, v2, kv_stride);
    ops->set_position_source({});
    EXPECT_EQ(values(x2), values(x1));
    EXPECT_EQ(values(k2), values(k1));
    EXPECT_EQ(values(v2), values(v1));
    EXPECT_NE(values(k2)[past * kv_stride], -1.0f) << "the key stored at the position";
  }
  const Tensor x = ops->upload(qkv, "qkv"), small = ops->upload(std::vector<float>(4, 0.0f), "small");
  const Tensor cache = ops->upload(std::vector<float>(cache_floats, 0.0f), "cache");
  EXPECT_THAT(error_of([&] {
                ops->rope_store_kv(x, n + 1, row, q_heads, kv_heads, past, freq, 1.0f, cache, cache, kv_stride);
              }),
              HasSubstr("RoPE + KV cache store: q | k | v holds 46 elements, the operation reads 66"));
  EXPECT_THAT(
      error_of([&] { ops->rope_store_kv(x, n, row, q_heads, kv_heads, past, freq, 1.0f, small, cache, kv_stride); }),
      HasSubstr("RoPE + KV cache store: the key cache holds 4 elements, the operation reads 14"));
  EXPECT_THAT(
      error_of([&] { ops->rope_store_kv(x, n, row, q_heads, kv_heads, past, freq, 1.0f, cache, small, kv_stride); }),
      HasSubstr("RoPE + KV cache store: the value cache holds 4 elements, the operation reads 14"));
}

}  // namespace
}  // namespace qjoule::model
