// Writes the synthetic TinyLlama-shaped decoder (qjoule/model/synthetic/synthetic_decoder.h: 22 layers, hidden
// 2048, FFN 5632, 32/4 heads, vocabulary 4096, random weights from a fixed seed) as a Hugging Face
// checkpoint folder: config.json and model.safetensors in BF16 (1.9 GB; --dtype f32: 3.7 GB). It is
// the model `qjoule bench` sweeps to measure what each format costs in memory, from a checkpoint as
// users have one (microbench/README.md):
//   build/release/microbench/write_synthetic_decoder /tmp/tinyllama-shapes
//   build/release/src/cli/qjoule bench --model /tmp/tinyllama-shapes --precisions fp32,bf16,int8,w8,int4,nf4
// With --tokenizer DIR it also copies a tokenizer (its vocabulary within --vocab), so that
// `qjoule bench --text FILE` scores a text on it (the perplexity of random weights means nothing; the
// cost of the FP32 reference and of scoring is the 1B model's). --shape llama-3.2-1b writes Llama 3.2
// 1B's shapes instead (16 layers, hidden 2048, FFN 8192, 32/8 heads, vocabulary 128,256, tied head:
// no lm_head.weight), the yardstick of a large vocabulary. --shape llama-2-7b writes Llama 2 7B's shapes (32
// layers, hidden 4096, FFN 11008, 32 heads without grouping, vocabulary 32,000, untied head: 13.5 GB in BF16,
// about 27 GB of FP32 while it is drawn), the 7B check of issue 55, written on the GPU machine itself (it is
// too large to carry there). --shape mixtral writes a Mixtral-shaped mixture of
// experts (16 layers, hidden 2048, 32/8 heads, 8 experts of FFN 5632, top-2; 8.9 GB in BF16), one expert drawn
// at a time.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/synthetic/synthetic_decoder.h"
#include "qjoule/tokenize/bpe_tokenizer.h"

namespace {

using qjoule::io::DType;

uint16_t to_bf16_bits(float f) {  // round to nearest even (the weights are finite)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
};

Tensor convert(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v, bool bf16) {
  Tensor t{name, std::move(shape), {}};
  if (bf16) {
    t.bytes.resize(v.size() * 2);
    for (std::size_t i = 0; i < v.size(); ++i) {
      const uint16_t b = to_bf16_bits(v[i]);
      std::memcpy(t.bytes.data() + 2 * i, &b, 2);
    }
  } else {
    t.bytes.resize(v.size() * 4);
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Write the synthetic TinyLlama-shaped decoder as a Hugging Face checkpoint (config.json + "
      "model.safetensors)."};
  std::string out, dtype = "bf16", tokenizer, shape_name = "tinyllama";
  int64_t layers = 0, vocab = 0;
  app.add_option("folder", out, "output folder (created)")->required();
  app.add_option("--dtype", dtype, "stored dtype of every tensor")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
  app.add_option("--shape", shape_name,
                 "tinyllama (22 layers, FFN 5632, 32/4 heads, untied), llama-3.2-1b, llama-2-7b (32 layers, hidden "
                 "4096, FFN 11008, 32/32 heads, vocabulary 32000) or mixtral (16 layers, 8 experts of FFN 5632, top-2, "
                 "32/8 heads)")
      ->check(CLI::IsMember({"tinyllama", "llama-3.2-1b", "llama-2-7b", "mixtral"}))
      ->capture_default_str();
  app.add_option("--layers", layers, "transformer blocks (default: the shape's)")->check(CLI::Range(1, 64));
  app.add_option("--vocab", vocab,
                 "vocabulary size (default: 4096 for tinyllama, which has 32,000; 128256 for llama-3.2-1b; 32000 for "
                 "llama-2-7b)")
      ->check(CLI::Range(16, 256000));
  app.add_option(
         "--tokenizer", tokenizer,
         "copy tokenizer.json (and tokenizer_config.json) from this folder, so that `qjoule bench --text` and "
         "`qjoule ppl` can score a text (its vocabulary must fit --vocab), e.g. tests/fixtures/decoders/tiny-llama")
      ->check(CLI::ExistingDirectory);
  CLI11_PARSE(app, argc, argv);
  try {
    const bool llama32 = shape_name == "llama-3.2-1b", mixtral = shape_name == "mixtral";
    const bool llama2_7b = shape_name == "llama-2-7b";
    auto spec = mixtral ? qjoule::model::mixtral_shapes_spec(vocab > 0 ? vocab : 4096)
                        : qjoule::model::tinyllama_shapes_spec(vocab > 0   ? vocab
                                                               : llama32   ? 128256
                                                               : llama2_7b ? 32000
                                                                           : 4096);
    if (llama32) {
      spec.name = "llama-3.2-1b-shapes";
      spec.num_layers = 16;
      spec.num_kv_heads = 8;
      spec.intermediate_size = 8192;
    }
    if (llama2_7b) {
      spec.name = "llama-2-7b-shapes";
      spec.num_layers = 32;
      spec.hidden_size = 4096;
      spec.num_heads = spec.num_kv_heads = 32;
      spec.intermediate_size = 11008;
      spec.max_positions = 4096;
    }
    if (layers > 0) spec.num_layers = layers;
    auto p = qjoule::model::synthetic_decoder_params(spec);
    const auto& c = p.config;
    const bool bf16 = dtype == "bf16";
    std::vector<Tensor> tensors;
    const auto add = [&](const std::string& name, std::vector<int64_t> shape, std::vector<float>& v) {
      tensors.push_back(convert(name, std::move(shape), v, bf16));
      std::vector<float>().swap(v);  // one FP32 copy less as we go (`v = {}` would keep its memory)
    };
    add("model.embed_tokens.weight", {c.vocab_size, c.hidden_size}, p.token_embeddings);
    for (std::size_t i = 0; i < p.layers.size(); ++i) {
      auto& l = p.layers[i];
      add(l.attn_norm.name + ".weight", {c.hidden_size}, l.attn_norm.gamma);
      add(l.mlp_norm.name + ".weight", {c.hidden_size}, l.mlp_norm.gamma);
      for (auto* lin : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down, &l.router}) {
        if (lin->out_features == 0) continue;  // a mixture's dense MLP, a dense model's router
        add(lin->name + ".weight", {lin->out_features, lin->in_features}, lin->weight);
      }
      for (auto& e : l.experts) {
        for (auto* lin : {&e.gate, &e.up, &e.down}) {
          p.load_linear(*lin);  // drawn now: one expert's FP32 weights at a time
          add(lin->name + ".weight", {lin->out_features, lin->in_features}, lin->weight);
        }
      }
    }
    add("model.norm.weight", {c.hidden_size}, p.final_norm.gamma);
    if (!llama32) add("lm_head.weight", {c.vocab_size, c.hidden_size}, p.lm_head.weight);  // else tied

    std::filesystem::create_directories(out);
    std::vector<qjoule::io::TensorToWrite> views;
    for (const auto& t : tensors) views.push_back({t.name, bf16 ? DType::BF16 : DType::F32, t.shape, t.bytes});
    qjoule::io::write_safetensors(std::filesystem::path(out) / "model.safetensors", views, {{"format", "pt"}});
    nlohmann::json config = {{"architectures", {mixtral ? "MixtralForCausalLM" : "LlamaForCausalLM"}},
                             {"model_type", mixtral ? "mixtral" : "llama"},
                             {"hidden_size", c.hidden_size},
                             {"intermediate_size", c.intermediate_size},
                             {"num_hidden_layers", c.num_layers},
                             {"num_attention_heads", c.num_heads},
                             {"num_key_value_heads", c.num_kv_heads},
                             {"head_dim", c.head_dim},
                             {"vocab_size", c.vocab_size},
                             {"max_position_embeddings", c.max_positions},
                             {"hidden_act", "silu"},
                             {"rms_norm_eps", c.norm_eps},
                             {"rope_theta", c.rope_theta},
                             {"tie_word_embeddings", llama32},
                             {"attention_bias", false},
                             {"mlp_bias", false},
                             {"torch_dtype", bf16 ? "bfloat16" : "float32"}};
    if (mixtral) {
      config["num_local_experts"] = c.moe.num_experts;
      config["num_experts_per_tok"] = c.moe.experts_per_token;
      config["sliding_window"] = nullptr;
      config.erase("mlp_bias");
    }
    std::ofstream(std::filesystem::path(out) / "config.json") << config.dump(2) << "\n";
    if (!tokenizer.empty()) {
      const auto tok = qjoule::tokenize::BpeTokenizer::from_tokenizer_json(tokenizer);
      if (tok.vocab_size() > c.vocab_size)
        qjoule::fail("--tokenizer {}: {} tokens, more than the model's vocabulary of {} (--vocab)", tokenizer,
                     tok.vocab_size(), c.vocab_size);
      for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
        if (std::filesystem::exists(std::filesystem::path(tokenizer) / name))
          std::filesystem::copy_file(std::filesystem::path(tokenizer) / name, std::filesystem::path(out) / name,
                                     std::filesystem::copy_options::overwrite_existing);
    }
    std::size_t bytes = 0;
    for (const auto& t : tensors) bytes += t.bytes.size();
    fmt::print("wrote {}: {} tensors, {:.2f} GB of {} ({} layers, hidden {}, FFN {}, vocab {})\n", out, tensors.size(),
               double(bytes) / 1e9, dtype, c.num_layers, c.hidden_size, c.intermediate_size, c.vocab_size);
  } catch (const qjoule::Error& e) {
    fmt::print(stderr, "write_synthetic_decoder: {}\n", e.what());
    return 1;
  }
  return 0;
}
