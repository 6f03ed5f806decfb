// A BF16 checkpoint's embeddings held as stored (GraphOps::embedding_bf16): each looked-up row widened to
// FP32 exactly and scaled, on the CPU and (where there is one) the GPU; a decoder of a BF16 checkpoint
// holds them so, at half the bytes, with the logits of the FP32 table.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "decoder_fixtures.h"
#include "error_of.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/graph_ops.h"
#include "qjoule/quant/element_math.h"

namespace qjoule::model {
namespace {

using ::testing::HasSubstr;

std::vector<float> lookup(GraphOps& ops, const std::vector<uint16_t>& table, const std::vector<int32_t>& ids,
                          int64_t hidden, float scale) {
  const Tensor word = ops.upload_bf16(table, "word");
  const Tensor id = ops.empty(DType::i32, static_cast<int64_t>(ids.size()), "ids");
  ops.copy_in(ids.data(), id);
  std::vector<float> host(ids.size() * static_cast<std::size_t>(hidden));
  const Tensor out = ops.host_output(host.data(), static_cast<int64_t>(host.size()), "out");
  ops.embedding_bf16(id, word, scale, hidden, out);
  ops.copy_out(out, host.data());
  return host;
}

TEST(EmbeddingBf16, RowsWidenExactlyAndScale) {
  const int64_t vocab = 5, hidden = 3;
  std::vector<uint16_t> table(vocab * hidden);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = element::f32_to_bf16_bits(0.37f * float(i) - 2.0f);
  const std::vector<int32_t> ids{4, 0, 2, 4};
  const auto cpu = make_cpu_graph_ops();
  const auto got = lookup(*cpu, table, ids, hidden, 1.5f);
  for (std::size_t r = 0; r < ids.size(); ++r)
    for (int64_t c = 0; c < hidden; ++c)
      EXPECT_EQ(got[r * hidden + c], element::bf16_bits_to_f32(table[ids[r] * hidden + c]) * 1.5f);
  // The table must be BF16 words: an FP32 one is one line.
  const Tensor f32 = cpu->upload({1, 2, 3}, "f32 table");
  const Tensor id = cpu->empty(DType::i32, 1, "ids"), out = cpu->empty(DType::f32, 3, "out");
  EXPECT_THAT(test::error_of([&] { cpu->embedding_bf16(id, f32, 1.0f, 3, out); }),
              HasSubstr("embeddings: the word embeddings holds f32 elements, expected bf16"));
  if (kernels::cuda_device_status().usable) {  // the GPU's kernel: the same values, bit for bit
    const auto gpu = make_cuda_graph_ops(0);
    EXPECT_EQ(lookup(*gpu, table, ids, hidden, 1.5f), got);
  }
}

// tiny-llama is a BF16 checkpoint: its embeddings held as stored, half the FP32 bytes, the same logits
// as transformers' FP32 ones (FullForwardMatchesPyTorchWithin1e4 checks those).
TEST(EmbeddingBf16, ABf16DecoderHoldsItsEmbeddingsAsStored) {
  const auto model = load_decoder_lm(test::decoder_fixture("tiny-llama"));
  const auto& c = model.config();
  const auto table = static_cast<std::size_t>(c.vocab_size * c.hidden_size);
  EXPECT_EQ(model.fp32_bytes() - model.bytes_held(), table * 2) << "held in 2 bytes a value, not 4";
  EXPECT_THAT(model.nongemm_path(), HasSubstr("embedding_bf16"));
  const auto f32 = load_decoder_lm(test::decoder_fixture("tiny-qwen3"));  // an F32 checkpoint: FP32 table
  EXPECT_EQ(f32.fp32_bytes(), f32.bytes_held());
  EXPECT_THAT(f32.nongemm_path(), HasSubstr("embedding_sum"));
}

}  // namespace
}  // namespace qjoule::model
