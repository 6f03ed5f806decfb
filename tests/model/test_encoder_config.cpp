// config.json reconciliation: inference from tensor shapes and one test per bad-input message.
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qjoule/error.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/encoder_config.h"
#include "test_paths.h"

namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;
using json = nlohmann::json;

class EncoderConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = qjoule::test::temp_dir(std::string("config_") +
                                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
    const auto src = qjoule::test::fixtures_dir() / "tiny-bert";
    fs::copy_file(src / "model.safetensors", dir / "model.safetensors");
    std::ifstream in(src / "config.json");
    config = json::parse(in);
  }
  void write_config() { std::ofstream(dir / "config.json") << config.dump(2); }
  std::string error() {
    write_config();
    try {
      qjoule::model::load_encoder_classifier(dir);
    } catch (const qjoule::Error& e) {
      return e.what();
    }
    return "(no error)";
  }
  fs::path dir;
  json config;
};

TEST_F(EncoderConfigTest, LoadsTheFixture) {
  write_config();
  const auto ck = qjoule::io::Checkpoint::open(dir);
  const auto cfg = qjoule::model::load_encoder_config(dir, ck);
  EXPECT_EQ(cfg.arch, qjoule::model::EncoderArch::Bert);
  EXPECT_EQ(cfg.hidden_size, 32);
  EXPECT_EQ(cfg.num_layers, 2);
  EXPECT_EQ(cfg.num_labels, 3);
  EXPECT_EQ(cfg.id2label[1], "NEUTRAL");
  EXPECT_TRUE(cfg.inferred_fields.empty());
}

TEST_F(EncoderConfigTest, InfersMissingFieldsFromTensorShapes) {
  for (const char* f : {"vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
                        "max_position_embeddings", "id2label", "label2id", "type_vocab_size"})
    config.erase(f);
  write_config();
  const auto ck = qjoule::io::Checkpoint::open(dir);
  const auto cfg = qjoule::model::load_encoder_config(dir, ck);
  EXPECT_EQ(cfg.vocab_size, 53);
  EXPECT_EQ(cfg.hidden_size, 32);
  EXPECT_EQ(cfg.num_layers, 2);
  EXPECT_EQ(cfg.intermediate_size, 64);
  EXPECT_EQ(cfg.max_positions, 40);
  EXPECT_EQ(cfg.num_labels, 3);
  EXPECT_EQ(cfg.id2label[2], "LABEL_2");
  EXPECT_GE(cfg.inferred_fields.size(), 6u);
}

TEST_F(EncoderConfigTest, ConfigDisagreeingWithTensorsNamesBoth) {
  config["hidden_size"] = 64;
  EXPECT_THAT(error(), HasSubstr("config.json: hidden_size = 64, but tensor 'bert.embeddings.word_embeddings.weight' "
                                 "has shape [53, 32] (so hidden_size = 32)"));
}

TEST_F(EncoderConfigTest, LayerCountDisagreement) {
  config["num_hidden_layers"] = 3;
  EXPECT_THAT(error(), HasSubstr("num_hidden_layers = 3, but the checkpoint holds tensors for 2 layers"));
}

TEST_F(EncoderConfigTest, LabelCountDisagreement) {
  config["id2label"] = {{"0", "NEG"}, {"1", "POS"}};
  EXPECT_THAT(error(),
              HasSubstr("id2label has 2 entries, but tensor 'classifier.weight' has shape [3, 32] (so 3 labels)"));
}

TEST_F(EncoderConfigTest, UnknownArchitectureListsSupported) {
  config["model_type"] = "gpt2";
  config["architectures"] = {"GPT2LMHeadModel"};
  EXPECT_THAT(error(), HasSubstr("model_type 'gpt2' with architectures [\"GPT2LMHeadModel\"] is not supported; "
                                 "supported: bert (BertForSequenceClassification), distilbert"));
}

TEST_F(EncoderConfigTest, NormEpsilonMustBePositiveAndPadInsideTheVocabulary) {
  config["layer_norm_eps"] = -1e-12;
  EXPECT_THAT(error(), HasSubstr("config.json: layer_norm_eps = -1e-12, expected a positive number"));
  config["layer_norm_eps"] = 1e-12;
  config["pad_token_id"] = 53;
  EXPECT_THAT(error(), HasSubstr("config.json: pad_token_id = 53 is outside the vocabulary [0, 53) of the embeddings"));
}

TEST_F(EncoderConfigTest, HeadsMustDivideHidden) {
  config["num_attention_heads"] = 5;
  EXPECT_THAT(error(), HasSubstr("num_attention_heads = 5 does not divide the hidden size 32"));
}

TEST_F(EncoderConfigTest, MissingConfigFile) {
  EXPECT_THAT(error(), HasSubstr("(no error)"));
  fs::remove(dir / "config.json");
  try {
    qjoule::model::load_encoder_classifier(dir);
    FAIL();
  } catch (const qjoule::Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("config.json: cannot open"));
  }
}

TEST_F(EncoderConfigTest, ForwardRejectsOutOfVocabularyIdsAndOverlongSequences) {
  write_config();
  const auto model = qjoule::model::load_encoder_classifier(dir);
  std::vector<int32_t> ids{2, 999, 3}, mask{1, 1, 1};
  std::vector<float> logits(3);
  try {
    model.forward(ids.data(), mask.data(), 1, 3, logits.data());
    FAIL();
  } catch (const qjoule::Error& e) {
    EXPECT_THAT(std::string(e.what()),
                HasSubstr("token id 999 at batch row 0, position 1 is outside the vocabulary [0, 53)"));
  }
  std::vector<int32_t> long_ids(41, 5), long_mask(41, 1);
  try {
    model.forward(long_ids.data(), long_mask.data(), 1, 41, logits.data());
    FAIL();
  } catch (const qjoule::Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("sequence length 41 exceeds max_position_embeddings 40"));
  }
}

}  // namespace
