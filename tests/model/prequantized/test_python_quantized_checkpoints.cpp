// Pre-quantized checkpoints written by an independent packer, tools/write_quantized_checkpoint.py
// (numpy, from the public GPTQ / AWQ / bitsandbytes descriptions), for the tiny decoders: imported, their
// logits are within each format's error budget of the FP32 model that numpy's own dequantization gives;
// bitsandbytes NF4 (with and without double quantization) is bit for bit qjoule's own nf4 / nf4:dq on
// the same weights (both follow bitsandbytes' rounding rule); act-order runs; BERT classifiers read in
// every layout too; and each broken
// bitsandbytes tensor is one line naming it, found and expected.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "decoder_fixtures.h"
#include "error_of.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/quantization_plan.h"
#include "quantized_checkpoint_test_util.h"
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;
using qjoule::test::error_of;
using qjoule::test::relative_rms;
using ::testing::HasSubstr;
constexpr auto logits_of = qjoule::test::prompt_logits;
qjoule::model::LinearFactory factory(const std::string& precision, const std::string& exclude = "") {
  return qjoule::test::precision_factory(precision, exclude);
}

using qjoule::test::have_numpy;
constexpr auto kPython = qjoule::test::kDebianPython;

#define REQUIRE_NUMPY()                                                                                             \
  do {                                                                                                              \
    if (!have_numpy())                                                                                              \
      GTEST_SKIP() << kPython << " with numpy is absent (Debian's python3-numpy; scripts/install-deps.sh installs " \
                   << "it): tools/write_quantized_checkpoint.py cannot write the fixtures";                         \
  } while (0)

fs::path writer() { return qjoule::test::tool_script("write_quantized_checkpoint.py"); }

// Writes the checkpoint `src` as `args` (--layout ...) into DIR/q and numpy's FP32 decoding into DIR/deq.
fs::path write_from(const fs::path& src, const std::string& name, const std::string& args) {
  const auto dir = qjoule::test::temp_dir("pyquant_" + name);
  const std::string command = std::string(kPython) + " " + writer().string() + " " + src.string() + " " +
                              (dir / "q").string() + " " + args + " --dequantized " + (dir / "deq").string();
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return dir;
}

fs::path write(const std::string& fixture, const std::string& name, const std::string& args) {
  return write_from(qjoule::test::decoder_fixture(fixture), name, args);
}

struct Case {
  std::string name, fixture, args, precision;
  bool own_format_bit_identical = false;  // qjoule's own quantizer gives the same codes (bitsandbytes' rule)
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
class PythonQuantized : public ::testing::TestWithParam<Case> {};

TEST_P(PythonQuantized, ImportsWithinTheErrorBudgetOfNumpysDequantization) {
  REQUIRE_NUMPY();
  const auto& p = GetParam();
  const auto dir = write(p.fixture, p.name, p.args);
  // The head FP32 on both sides: the packers store it in F32, the fixture in its own type; the block
  // Linears' codes are what is compared.
  const auto imported = qjoule::model::load_decoder_lm(dir / "q", factory(p.precision, "lm_head"));
  const auto a = logits_of(imported);
  const auto deq = logits_of(qjoule::model::load_decoder_lm(dir / "deq"));
  // The kernels run BF16 (or INT8) activations against FP32 on the decoded weights.
  EXPECT_LT(relative_rms(a, deq), 2e-2);
  if (p.args.find("--desc-act") != std::string::npos) {
    // Linears of more than one group gather their inputs into group order; one group needs no gather.
    int gathered = 0;
    for (const auto& [path, count] : imported.kernel_path_counts())
      if (path.find("gather(act-order)+") != std::string::npos) gathered += count;
    EXPECT_GT(gathered, 0);
  }
  if (!p.own_format_bit_identical) return;
  const auto own =
      qjoule::model::load_decoder_lm(qjoule::test::decoder_fixture(p.fixture), factory(p.precision, "lm_head"));
  EXPECT_EQ(imported.kernel_path_counts(), own.kernel_path_counts());
  // The Linears' bytes (the packers store the embeddings in F32, the fixture in BF16, held as stored).
  const auto linear_bytes = [](const qjoule::model::DecoderLM& m) {
    std::size_t bytes = 0;
    for (const auto& r : m.linear_reports()) bytes += r.bytes_held;
    return bytes;
  };
  EXPECT_EQ(linear_bytes(imported), linear_bytes(own));
  const auto b = logits_of(own);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "bit for bit";
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, PythonQuantized,
    ::testing::Values(
        Case{"bnb_nf4", "tiny-llama", "--layout bnb-nf4", "nf4", true},
        Case{"bnb_nf4_dq", "tiny-llama", "--layout bnb-nf4-dq", "nf4:dq", true},
        Case{"bnb_nf4_qwen2", "tiny-qwen2", "--layout bnb-nf4", "nf4", true},
        Case{"gptq_asym_g128", "tiny-llama", "--layout gptq", "int4:g=128:asym"},
        Case{"gptq_sym_g32_v1", "tiny-llama", "--layout gptq --group-size 32 --sym --v1", "int4:g=32:sym"},
        Case{"gptq_row", "tiny-llama", "--layout gptq --group-size -1 --no-g-idx", "int4:g=128:asym"},
        Case{"gptq_act_order_g32", "tiny-llama", "--layout gptq --group-size 32 --desc-act", "int4:g=32:asym"},
        Case{"gptq_act_order_sym_g64_v1", "tiny-qwen2", "--layout gptq --group-size 64 --desc-act --sym --v1",
             "int4:g=64:sym"},
        Case{"awq_g64", "tiny-llama", "--layout awq --group-size 64", "int4:g=64:asym"}),
    [](const ::testing::TestParamInfo<Case>& case_info) { return case_info.param.name; });

// Rewrites DIR/model.safetensors with `edit` applied to the tensors (name -> dtype, shape, bytes).
struct RawTensor {
  qjoule::io::DType dtype;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};
void rewrite(const fs::path& dir, const std::function<void(std::map<std::string, RawTensor>&)>& edit) {
  std::map<std::string, RawTensor> tensors;
  {
    const auto ck = qjoule::io::Checkpoint::open(dir);
    for (const auto& [name, t] : ck.tensors())
      tensors[name] = {t.dtype, t.shape, std::vector<std::byte>(t.data, t.data + t.nbytes)};
  }
  edit(tensors);
  std::vector<qjoule::io::TensorToWrite> out;
  for (const auto& [name, t] : tensors) out.push_back({name, t.dtype, t.shape, std::span<const std::byte>(t.bytes)});
  qjoule::io::write_safetensors(dir / "model.safetensors", out);
}

template <class T>
T* values(RawTensor& t) {
  return reinterpret_cast<T*>(t.bytes.data());
}

void set_state(RawTensor& t, const nlohmann::json& state) {
  const std::string text = state.dump();
  t.bytes.assign(reinterpret_cast<const std::byte*>(text.data()),
                 reinterpret_cast<const std::byte*>(text.data()) + text.size());
  t.shape = {static_cast<int64_t>(text.size())};
}

nlohmann::json state_of(const RawTensor& t) {
  return nlohmann::json::parse(std::string(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size()));
}

// Broken bitsandbytes checkpoints: one line naming the tensor or field, found and expected.
TEST(PythonQuantized, BrokenBitsandbytesTensorsAreOneLine) {
  REQUIRE_NUMPY();
  const std::string up = "model.layers.1.mlp.up_proj";
  const auto broken = [&](const std::string& name, const char* layout,
                          const std::function<void(std::map<std::string, RawTensor>&)>& edit) {
    const auto dir = write("tiny-llama", "bad_" + name, std::string("--layout ") + layout) / "q";
    rewrite(dir, edit);
    return error_of(
        [&] { qjoule::model::load_decoder_lm(dir, factory(std::string(layout) == "bnb-nf4" ? "nf4" : "nf4:dq")); });
  };
  EXPECT_THAT(
      broken("nan_absmax", "bnb-nf4", [&](auto& t) { values<float>(t.at(up + ".weight.absmax"))[3] = std::nanf(""); }),
      HasSubstr("tensor '" + up + ".weight.absmax' holds nan at [3], expected a finite non-negative scale"));
  EXPECT_THAT(
      broken("quant_map", "bnb-nf4", [&](auto& t) { values<float>(t.at(up + ".weight.quant_map"))[1] = -0.7f; }),
      HasSubstr("tensor '" + up + ".weight.quant_map' holds -0.7 at [1], expected -0.6961928 (the NF4 table"));
  EXPECT_THAT(broken("codes_shape", "bnb-nf4",
                     [&](auto& t) {
                       auto& w = t.at(up + ".weight");
                       w.bytes.resize(w.bytes.size() / 2);
                       w.shape = {static_cast<int64_t>(w.bytes.size()), 1};
                     }),
              HasSubstr("tensor '" + up + ".weight' is U8 [8192, 1], expected 16384 values of U8 (the 4-bit codes"));
  EXPECT_THAT(broken("fp4", "bnb-nf4",
                     [&](auto& t) {
                       auto node = t.extract(up + ".weight.quant_state.bitsandbytes__nf4");
                       auto state = state_of(node.mapped());
                       state["quant_type"] = "fp4";
                       set_state(node.mapped(), state);
                       node.key() = up + ".weight.quant_state.bitsandbytes__fp4";
                       t.insert(std::move(node));
                     }),
              HasSubstr("says quant_type 'fp4': bitsandbytes fp4 is not read; expected nf4"));
  EXPECT_THAT(broken("blocksize", "bnb-nf4",
                     [&](auto& t) {
                       auto& s = t.at(up + ".weight.quant_state.bitsandbytes__nf4");
                       auto state = state_of(s);
                       state["blocksize"] = 128;
                       set_state(s, state);
                     }),
              HasSubstr("has blocksize 128: qjoule's nf4 blocks hold 64 weights"));
  EXPECT_THAT(broken("not_json", "bnb-nf4",
                     [&](auto& t) {
                       auto& s = t.at(up + ".weight.quant_state.bitsandbytes__nf4");
                       s.bytes.resize(5);
                       s.shape = {5};
                     }),
              HasSubstr("tensor '" + up + ".weight.quant_state.bitsandbytes__nf4' is not JSON"));
  // A Linear left in 16 bits (llm_int8_skip_modules): not read.
  EXPECT_THAT(
      broken(
          "skipped_linear", "bnb-nf4",
          [&](auto& t) {
            for (const char* suffix : {".weight.absmax", ".weight.quant_map", ".weight.quant_state.bitsandbytes__nf4"})
              t.erase(up + suffix);
            auto& w = t.at(up + ".weight");
            w.dtype = qjoule::io::DType::F32;
            w.shape = {256, 128};
            w.bytes.assign(256 * 128 * 4, std::byte{0});
          }),
      HasSubstr("Linear '" + up + "' is not 4-bit: its weight is F32 [256, 128]"));
  EXPECT_THAT(broken("nested_map", "bnb-nf4-dq",
                     [&](auto& t) { values<float>(t.at(up + ".weight.nested_quant_map"))[0] = -1.0f; }),
              HasSubstr("weight.nested_quant_map' holds -1 at [0], expected -0.99296874 (the signed dynamic map"));
  EXPECT_THAT(broken("nested_nan", "bnb-nf4-dq",
                     [&](auto& t) { values<float>(t.at(up + ".weight.nested_absmax"))[0] = INFINITY; }),
              HasSubstr("weight.nested_absmax' holds inf at [0], expected a finite non-negative scale"));
  EXPECT_THAT(broken("no_nested", "bnb-nf4-dq",
                     [&](auto& t) {
                       auto& s = t.at(up + ".weight.quant_state.bitsandbytes__nf4");
                       auto state = state_of(s);
                       state.erase("nested_blocksize");
                       state.erase("nested_offset");
                       set_state(s, state);
                     }),
              HasSubstr("is without double quantization, but config.json says bnb_4bit_use_double_quant = true"));
}

// GPTQ act-order whose g_idx does not fill its groups, or is missing.
TEST(PythonQuantized, BrokenActOrderIsOneLine) {
  REQUIRE_NUMPY();
  const std::string q = "model.layers.0.self_attn.q_proj";
  const auto dir = write("tiny-llama", "bad_act_order", "--layout gptq --group-size 32 --desc-act") / "q";
  rewrite(dir, [&](auto& t) {
    auto* g = values<int32_t>(t.at(q + ".g_idx"));
    for (int i = 0; i < 128; ++i)
      if (g[i] == 1) {
        g[i] = 0;
        break;
      }
  });
  EXPECT_THAT(error_of([&] { qjoule::model::load_decoder_lm(dir, factory("int4:g=32:asym")); }),
              HasSubstr("tensor '" + q + ".g_idx' puts 33 inputs in group 0, expected 32 (group_size 32)"));
  rewrite(dir, [&](auto& t) { t.erase(q + ".g_idx"); });
  EXPECT_THAT(error_of([&] { qjoule::model::load_decoder_lm(dir, factory("int4:g=32:asym")); }),
              HasSubstr("tensor '" + q + ".g_idx' is missing: desc_act = true (act-order) needs each input's group"));
}

// A BERT classifier of hidden 64 (tiny-bert's is 32, below bitsandbytes' blocks of 64), weights from a
// fixed-seed generator, written as Hugging Face names it.
fs::path tiny_bert_64(const std::string& case_name) {
  const auto dir = qjoule::test::temp_dir("pyquant_bert64_src_" + case_name);
  constexpr int64_t h = 64, f = 128, vocab = 53, positions = 40, labels = 3;
  uint64_t state = 20261126;
  const auto uniform = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (static_cast<float>(state >> 40) / static_cast<float>(1ULL << 24) - 0.5f) * 0.2f;
  };
  std::map<std::string, RawTensor> tensors;
  const auto add = [&](const std::string& name, std::vector<int64_t> shape, float constant, bool random) {
    int64_t n = 1;
    for (const auto d : shape) n *= d;
    std::vector<float> v(static_cast<std::size_t>(n), constant);
    if (random)
      for (auto& x : v) x = uniform();
    RawTensor t{qjoule::io::DType::F32, std::move(shape), std::vector<std::byte>(v.size() * 4)};
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    tensors[name] = std::move(t);
  };
  const auto linear = [&](const std::string& name, int64_t out, int64_t in) {
    add(name + ".weight", {out, in}, 0, true);
    add(name + ".bias", {out}, 0, true);
  };
  const auto norm = [&](const std::string& name) {
    add(name + ".weight", {h}, 1, false);
    add(name + ".bias", {h}, 0, false);
  };
  add("bert.embeddings.word_embeddings.weight", {vocab, h}, 0, true);
  add("bert.embeddings.position_embeddings.weight", {positions, h}, 0, true);
  add("bert.embeddings.token_type_embeddings.weight", {2, h}, 0, true);
  norm("bert.embeddings.LayerNorm");
  for (int l = 0; l < 2; ++l) {
    const std::string p = "bert.encoder.layer." + std::to_string(l) + ".";
    for (const char* name :
         {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"})
      linear(p + name, h, h);
    linear(p + "intermediate.dense", f, h);
    linear(p + "output.dense", h, f);
    norm(p + "attention.output.LayerNorm");
    norm(p + "output.LayerNorm");
  }
  linear("bert.pooler.dense", h, h);
  linear("classifier", labels, h);
  std::vector<qjoule::io::TensorToWrite> out;
  for (const auto& [name, t] : tensors) out.push_back({name, t.dtype, t.shape, std::span<const std::byte>(t.bytes)});
  qjoule::io::write_safetensors(dir / "model.safetensors", out);
  nlohmann::json config;
  std::ifstream(qjoule::test::fixtures_dir() / "tiny-bert" / "config.json") >> config;
  config["hidden_size"] = h;
  config["intermediate_size"] = f;
  std::ofstream(dir / "config.json") << config.dump(2);
  return dir;
}

std::vector<float> classifier_logits(const qjoule::model::EncoderClassifier& m) {
  const int64_t batch = 3, seq = 12;
  std::vector<int32_t> ids(static_cast<std::size_t>(batch * seq)), mask(ids.size(), 1);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 31 + 7) % 53);
  std::vector<float> logits(static_cast<std::size_t>(batch * m.config().num_labels));
  m.forward(ids.data(), mask.data(), batch, seq, logits.data());
  return logits;
}

struct EncoderCase {
  std::string name, args, precision;
  bool bert64 = false;                    // the hidden-64 BERT above, else tests/fixtures/tiny-bert
  bool own_format_bit_identical = false;  // qjoule's own quantizer gives the same codes
};
void PrintTo(const EncoderCase& c, std::ostream* os) { *os << c.name; }
class PythonQuantizedEncoder : public ::testing::TestWithParam<EncoderCase> {};

TEST_P(PythonQuantizedEncoder, ImportsWithinTheErrorBudgetOfNumpysDequantization) {
  REQUIRE_NUMPY();
  const auto& p = GetParam();
  const fs::path src = p.bert64 ? tiny_bert_64(p.name) : qjoule::test::fixtures_dir() / "tiny-bert";
  const auto dir = write_from(src, "encoder_" + p.name, p.args);
  const auto imported = qjoule::model::load_encoder_classifier(dir / "q", factory(p.precision));
  const auto a = classifier_logits(imported);
  const auto deq = classifier_logits(qjoule::model::load_encoder_classifier(dir / "deq"));
  EXPECT_LT(relative_rms(a, deq), 3e-2);
  if (!p.own_format_bit_identical) return;
  const auto own = qjoule::model::load_encoder_classifier(src, factory(p.precision));
  EXPECT_EQ(imported.bytes_held(), own.bytes_held());
  const auto b = classifier_logits(own);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "bit for bit";
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, PythonQuantizedEncoder,
    ::testing::Values(EncoderCase{"gptq_asym_g32", "--layout gptq --group-size 32", "int4:g=32:asym"},
                      EncoderCase{"gptq_sym_row_v1", "--layout gptq --group-size -1 --sym --v1", "int4:g=128:sym"},
                      EncoderCase{"gptq_act_order_g32", "--layout gptq --group-size 32 --desc-act", "int4:g=32:asym"},
                      EncoderCase{"awq_g32", "--layout awq --group-size 32", "int4:g=32:asym"},
                      EncoderCase{"bnb_nf4", "--layout bnb-nf4", "nf4", true, true},
                      // Not bit for bit with qjoule's own nf4:dq: that fuses Q, K and V into one matrix,
                      // whose absmax mean and groups of 256 differ from three quantized apart.
                      EncoderCase{"bnb_nf4_dq", "--layout bnb-nf4-dq", "nf4:dq", true, false},
                      EncoderCase{"gptq_bert64_g64", "--layout gptq --group-size 64", "int4:g=64:asym", true}),
    [](const ::testing::TestParamInfo<EncoderCase>& case_info) { return case_info.param.name; });

}  // namespace
