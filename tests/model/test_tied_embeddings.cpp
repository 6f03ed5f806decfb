// A tied decoder's one matrix held once (model/tied_embeddings.h): where the head holds the checkpoint's
// rows as stored (BF16 below FP32 by default, FP32 in an FP32 run), the embedding lookup reads them; the
// logits equal those of the same weights untied (two copies), bit for bit, and the model holds one table
// fewer. A head held otherwise (quantized on request, or a scaled FP32 table) keeps the embeddings apart.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "decoder_fixtures.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/quant/element_math.h"
#include "qjoule/quant/layer_policy.h"

namespace qjoule::model {
namespace {

namespace fs = std::filesystem;

// `fixture` with every tensor rounded to BF16, as a BF16 checkpoint stores it; `untied`: with the
// embeddings copied into lm_head.weight and tie_word_embeddings false (the same weights, held twice).
fs::path bf16_copy(const std::string& fixture, bool untied) {
  const fs::path dir = test::temp_dir("tied_embeddings_" + fixture + (untied ? "_untied" : "_tied"));
  const fs::path src = test::decoder_fixture(fixture);
  const auto ck = io::Checkpoint::open(src);
  std::vector<std::vector<uint16_t>> words;
  std::vector<io::TensorToWrite> tensors;
  words.reserve(ck.tensors().size() + 1);
  const auto add = [&](const std::string& name, const std::string& from) {
    const auto values = ck.to_f32(from);
    auto& bits = words.emplace_back(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) bits[i] = element::f32_to_bf16_bits(values[i]);
    tensors.push_back({name, io::DType::BF16, ck.at(from).shape,
                       std::span<const std::byte>(reinterpret_cast<const std::byte*>(bits.data()), bits.size() * 2)});
  };
  for (const auto& [name, t] : ck.tensors()) add(name, name);
  if (untied) add("lm_head.weight", "model.embed_tokens.weight");
  io::write_safetensors(dir / "model.safetensors", tensors);
  nlohmann::json config;
  std::ifstream(src / "config.json") >> config;
  config["torch_dtype"] = "bfloat16";
  config["tie_word_embeddings"] = !untied;
  std::ofstream(dir / "config.json") << config.dump(2);
  return dir;
}

DecoderLM load(const fs::path& dir, const std::string& precision, const std::string& layer_precision = "") {
  quant::LayerPolicyOptions o;
  o.precision = precision;
  o.layer_precision = layer_precision;
  return load_decoder_lm(dir, quantized_linear_factory(quant::LayerPolicy::parse(o)));
}

std::vector<float> logits(const DecoderLM& m) {
  const std::vector<int32_t> ids{1, 7, 3, 12, 5, 9, 2, 4, 11, 6};  // past tiny-gemma3's window of 8
  auto cache = m.make_cache(static_cast<int64_t>(ids.size()));
  std::vector<float> out(ids.size() * static_cast<std::size_t>(m.config().vocab_size));
  m.forward(ids.data(), static_cast<int64_t>(ids.size()), cache, out.data());
  return out;
}

std::size_t table_bytes(const DecoderLM& m, std::size_t element_bytes) {
  return static_cast<std::size_t>(m.config().vocab_size * m.config().hidden_size) * element_bytes;
}

// Qwen3 (plain lookup) and Gemma 3 (rows scaled by sqrt(hidden) as looked up): int8 below FP32, so the
// head is the checkpoint's BF16 and the embeddings read its rows. Where the BF16 head runs qjoule's AVX2 kernel
// (CPUs without oneDNN's native BF16 matmul), which holds its weights as padded panels of widened pairs, there
// are no rows to read: the embeddings keep their own table, and the model says so.
TEST(TiedEmbeddings, ABf16TiedModelHoldsItsMatrixOnceWithTheUntiedLogits) {
  for (const std::string fixture : {"tiny-qwen3", "tiny-gemma3"}) {
    SCOPED_TRACE(fixture);
    const auto tied = load(bf16_copy(fixture, false), "int8");
    const auto untied = load(bf16_copy(fixture, true), "int8");
    const bool panels = tied.head_report().kernel_path.starts_with("qjoule:avx2:bf16w");
    EXPECT_EQ(tied.embeddings_in_head(), !panels) << tied.head_report().kernel_path;
    EXPECT_FALSE(untied.embeddings_in_head());
    EXPECT_EQ(tied.head_report().format, "bf16");
    EXPECT_EQ(tied.embeddings_format(), "bf16");
    EXPECT_EQ(untied.bytes_held() - tied.bytes_held(), panels ? 0 : table_bytes(tied, 2)) << "one BF16 table fewer";
    EXPECT_EQ(logits(tied), logits(untied)) << "the same rows, read where the head holds them";
  }
}

TEST(TiedEmbeddings, AnFp32RunSharesFp32RowsUnlessTheLookupScalesThem) {
  const auto qwen3 = load(test::decoder_fixture("tiny-qwen3"), "fp32");  // an F32 checkpoint
  EXPECT_TRUE(qwen3.embeddings_in_head());
  EXPECT_EQ(qwen3.embeddings_format(), "fp32");
  EXPECT_EQ(qwen3.bytes_held(), qwen3.fp32_bytes());
  // Gemma's FP32 table is scaled as held: apart from the head's unscaled rows.
  const auto gemma3 = load(test::decoder_fixture("tiny-gemma3"), "fp32");
  EXPECT_FALSE(gemma3.embeddings_in_head());
  EXPECT_EQ(gemma3.bytes_held(), gemma3.fp32_bytes());
  // A BF16 checkpoint in an FP32 run: its FP32 head rows are the stored words widened, so they serve.
  const auto widened = load(bf16_copy("tiny-qwen3", false), "fp32");
  EXPECT_TRUE(widened.embeddings_in_head());
  EXPECT_EQ(widened.embeddings_format(), "fp32");
  EXPECT_EQ(logits(widened), logits(load(bf16_copy("tiny-qwen3", true), "fp32")));
}

TEST(TiedEmbeddings, AQuantizedHeadLeavesTheEmbeddingsHeldApartAsStored) {
  const auto dir = bf16_copy("tiny-qwen3", false);
  const auto m = load(dir, "int4:g=32:sym", "lm_head=int8");
  EXPECT_EQ(m.head_report().format, "int8");
  EXPECT_FALSE(m.embeddings_in_head());
  EXPECT_EQ(m.embeddings_format(), "bf16");
  // The FP32 model it is compared with holds the table once.
  EXPECT_EQ(m.fp32_bytes(), load(dir, "fp32").bytes_held());
}

}  // namespace
}  // namespace qjoule::model
