// config.json's quantization_config read field by field: each method's description, the defaults
// Hugging Face writes, and each broken field as one line naming it.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "error_of.h"
#include "qjoule/model/prequantized/checkpoint_quantization.h"

namespace {

using qjoule::model::read_checkpoint_quantization;
using qjoule::test::error_of;
using ::testing::HasSubstr;
using json = nlohmann::json;

std::string describe(const json& quantization_config) {
  const auto q = read_checkpoint_quantization({{"quantization_config", quantization_config}}, "c.json: ");
  return q ? q->describe() : "none";
}

TEST(CheckpointQuantization, EachMethodIsDescribedWithItsLayout) {
  EXPECT_EQ(describe({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}}),
            "gptq 4-bit, group_size 128, sym, desc_act false, gptq (v1) zeros");
  EXPECT_EQ(describe({{"quant_method", "gptq"},
                      {"bits", 4},
                      {"group_size", -1},
                      {"sym", false},
                      {"desc_act", true},
                      {"checkpoint_format", "gptq_v2"}}),
            "gptq 4-bit, group_size -1, asym, desc_act true, gptq_v2 zeros");
  EXPECT_EQ(describe({{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"version", "gemm"}}),
            "awq 4-bit, group_size 128, version gemm");
  EXPECT_EQ(describe({{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}, {"bnb_4bit_quant_type", "nf4"}}),
            "bitsandbytes 4-bit nf4");
  EXPECT_EQ(describe(nullptr), "none");
  EXPECT_FALSE(read_checkpoint_quantization({{"model_type", "llama"}}, ""));
  // bitsandbytes' older top-level fields.
  const auto top = read_checkpoint_quantization(
      {{"load_in_4bit", true}, {"bnb_4bit_quant_type", "nf4"}, {"bnb_4bit_use_double_quant", true}}, "");
  ASSERT_TRUE(top);
  EXPECT_EQ(top->describe(), "bitsandbytes 4-bit nf4 with double quant");
}

TEST(CheckpointQuantization, BrokenFieldsAreOneLineNamingThem) {
  const auto error = [](const json& qc) { return error_of([&] { describe(qc); }); };
  EXPECT_THAT(error({{"quant_method", "gptq"}, {"bits", 2}}),
              HasSubstr("c.json: quantization_config.bits = 2: a gptq checkpoint of 2-bit codes"));
  EXPECT_THAT(error({{"quant_method", "gptq"}, {"group_size", 0}}),
              HasSubstr("quantization_config.group_size = 0, expected -1 (one group per row) or a positive number"));
  EXPECT_THAT(error({{"quant_method", "gptq"}, {"checkpoint_format", "marlin"}}),
              HasSubstr("quantization_config.checkpoint_format = 'marlin', expected gptq or gptq_v2"));
  EXPECT_THAT(error({{"quant_method", "gptq"}, {"sym", "yes"}}), HasSubstr("quantization_config.sym = \"yes\""));
  EXPECT_THAT(error({{"quant_method", "awq"}, {"zero_point", false}}),
              HasSubstr("quantization_config.zero_point = false: AWQ without zero points"));
  EXPECT_THAT(error({{"quant_method", "bitsandbytes"}, {"load_in_8bit", true}}),
              HasSubstr("load_in_8bit = true: bitsandbytes LLM.int8() checkpoints are not read"));
  EXPECT_THAT(error({{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}}),
              HasSubstr("bnb_4bit_quant_type = 'fp4': bitsandbytes fp4 is not read"));
  EXPECT_THAT(error({{"quant_method", 7}}), HasSubstr("quantization_config.quant_method = 7, expected a string"));
  EXPECT_THAT(error({{"bits", 4}}), HasSubstr("quant_method = '(absent)' is not a method qjoule knows"));
  EXPECT_THAT(error_of([] {
                read_checkpoint_quantization({{"quantization_config", json::array()}}, "c.json: ");
              }),
              HasSubstr("c.json: quantization_config = [], expected an object"));
}

}  // namespace
