// Bad input, end to end, as a new user would meet it: one table of cases across every command
// (flags, config.json, tokenizers, datasets, checkpoints, results folders). Each case builds its
// files in a folder of its own, runs qjoule, and asserts the exit code and the words of the one-line
// error that names the flag, file or field, what was found and what was expected.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bad_input_case.h"
#include "run_command.h"
#include "test_paths.h"

namespace {

using qjoule::test::BadInput;
using qjoule::test::expect_one_line_error;
using qjoule::test::fixture;
using qjoule::test::run_command;
using qjoule::test::write;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

// DIR/m: a copy of `name` (a fixture folder) with config.json edited by `edit`.
std::function<void(const fs::path&)> model_copy(const std::string& name,
                                                std::function<void(nlohmann::json&)> edit = nullptr) {
  return [name, edit](const fs::path& dir) {
    fs::copy(fixture(name), dir / "m", fs::copy_options::recursive);
    if (!edit) return;
    nlohmann::json config;
    std::ifstream(dir / "m" / "config.json") >> config;
    edit(config);
    write(dir / "m" / "config.json", config.dump(1));
  };
}

// DIR/m as model_copy, its checkpoint split in two shards: the fixture's model.safetensors and one
// holding an extra I32 [16, 64] tensor `name` (a GPTQ qweight, say), listed in
// model.safetensors.index.json.
std::function<void(const fs::path&)> with_packed_tensor(const std::string& fixture_name, const std::string& name) {
  return [fixture_name, name](const fs::path& dir) {
    model_copy(fixture_name)(dir);
    std::ifstream in(dir / "m" / "model.safetensors", std::ios::binary);
    uint64_t header_bytes = 0;
    in.read(reinterpret_cast<char*>(&header_bytes), 8);
    std::string header(header_bytes, ' ');
    in.read(header.data(), static_cast<std::streamsize>(header_bytes));
    nlohmann::json map = nlohmann::json::object();
    const auto parsed = nlohmann::json::parse(header);  // named: items() must not outlive it
    for (const auto& item : parsed.items())
      if (item.key() != "__metadata__") map[item.key()] = "model.safetensors";
    map[name] = "packed.safetensors";
    write(dir / "m" / "model.safetensors.index.json", nlohmann::json{{"weight_map", map}}.dump());
    std::string packed =
        nlohmann::json{{name, {{"dtype", "I32"}, {"shape", {16, 64}}, {"data_offsets", {0, 4096}}}}}.dump();
    packed.append((8 - packed.size() % 8) % 8, ' ');
    const uint64_t n = packed.size();
    std::string bytes(reinterpret_cast<const char*>(&n), 8);
    bytes += packed + std::string(4096, '\0');
    write(dir / "m" / "packed.safetensors", bytes);  // the index is read before model.safetensors
  };
}

// DIR/m as model_copy, then `file` (relative to DIR) written with `text`.
std::function<void(const fs::path&)> model_with(const std::string& name, const std::string& file,
                                                const std::string& text) {
  return [name, file, text](const fs::path& dir) {
    model_copy(name)(dir);
    write(dir / file, text);
  };
}

std::function<void(const fs::path&)> file(const std::string& relative, const std::string& text) {
  return [relative, text](const fs::path& dir) { write(dir / relative, text); };
}

class CliBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(CliBadInput, OneLineNamingWhatWasFoundAndExpected) { expect_one_line_error(GetParam()); }

const std::string kEval = "eval --model TB --dataset TB/dataset.tsv ";
const std::string kPpl = "ppl --model DIR/m --text TL/config.json ";

INSTANTIATE_TEST_SUITE_P(
    Flags, CliBadInput,
    ::testing::Values(
        BadInput{"eval_batch_zero", kEval + "--batch 0", "--batch: 0 is out of range, expected 1 to 1000000"},
        BadInput{"eval_max_length_zero", kEval + "--max-length 0", "--max-length: 0 is out of range, expected 1 to"},
        BadInput{"eval_threads_zero", kEval + "--threads 0", "--threads: 0 is out of range, expected 1 to 1024"},
        BadInput{"eval_dataset_missing", "eval --model TB --dataset DIR/none.tsv",
                 "DIR/none.tsv: dataset file not found (expected an existing file)"},
        BadInput{"eval_model_missing", "eval --model DIR/none --dataset TB/dataset.tsv",
                 "--model: Directory does not exist: "},
        BadInput{"eval_precision_unknown", kEval + "--precision int3",
                 "precision 'int3': unknown format 'int3'; expected one of fp32, bf16, fp16, int8, w8, int4, nf4"},
        BadInput{"eval_precision_group", kEval + "--precision int4:g=48",
                 "precision 'int4:g=48': int4 group size '48', expected 32, 64 or 128"},
        BadInput{"eval_precision_option_elsewhere", kEval + "--precision nf4:g=64",
                 "precision 'nf4:g=64': option 'g=64' applies to int4 only, not to nf4"},
        BadInput{"eval_precision_cuda_only", kEval + "--precision fp8",
                 "--precision fp8: fp8 runs on CUDA only; on the CPU expected one of"},
        BadInput{"eval_sq_out_of_range", kEval + "--precision int8:sq=1.5", "SmoothQuant alpha 1.5 is outside [0, 1]"},
        BadInput{"eval_two_alphas", kEval + "--precision int8:sq=0.5 --smoothquant 0.7",
                 "--smoothquant 0.7 and --precision int8:sq=0.5 give two SmoothQuant alphas; expected one"},
        BadInput{"eval_act_dtype", kEval + "--act-dtype f8", "--act-dtype 'f8' is not supported, expected f32 or bf16"},
        BadInput{"eval_group_size_flag", kEval + "--group-size 48",
                 "--group-size 48 is not supported, expected 32, 64 or 128"},
        BadInput{"eval_int4_scheme", kEval + "--int4-scheme zero",
                 "--int4-scheme 'zero' is not supported, expected sym or asym"},
        BadInput{"eval_layer_precision_item", kEval + "--layer-precision x",
                 "--layer-precision: item 'x' is not PATTERN=FORMAT"},
        BadInput{"eval_quant_include_class", kEval + "--quant-include '['",
                 "--quant-include: pattern '[' uses '['; expected only * and ? as wildcards"},
        BadInput{"eval_smoothquant_text", kEval + "--precision int8 --smoothquant abc",
                 "--smoothquant 'abc' is not a number, expected an alpha in [0, 1]"},
        BadInput{"eval_calib_zero", kEval + "--precision int8 --smoothquant --calib 0",
                 "--calib: 0 is out of range, expected 1 to"},
        BadInput{"eval_text_column", kEval + "--text-column nope",
                 "dataset.tsv:1: header has no 'nope' column (found columns: sentence, label)"},
        BadInput{"eval_device", kEval + "--device tpu", "--device tpu: expected cpu, cuda or cuda:N"},
        BadInput{"eval_decoder_model", "eval --model TL --dataset TB/dataset.tsv",
                 "a decoder language model; qjoule eval scores sequence classifiers"},
        BadInput{"ppl_encoder_model", "ppl --model TB --text TB/dataset.tsv",
                 "config.json: model_type 'bert' with architectures [\"BertForSequenceClassification\"] is not a "
                 "supported decoder"},
        BadInput{"ppl_text_missing", "ppl --model TL --text DIR/none.txt", "--text DIR/none.txt: cannot open the file"},
        BadInput{"ppl_smoothquant", "ppl --model TL --text TL/config.json --precision int8:sq=0.5",
                 "SmoothQuant is not supported for decoder models"},
        BadInput{"generate_precision", "generate --model TL --prompt hi --precision bogus",
                 "precision 'bogus': unknown format 'bogus'"},
        BadInput{"info_no_checkpoint", "info --model DIR",
                 "DIR: no model.safetensors or model.safetensors.index.json in this folder"},
        BadInput{"info_nothing_asked", "info", "is required (or --formats for the format table)"},
        BadInput{"report_missing", "report DIR/none.jsonl", "cannot read 'DIR/none.jsonl': No such file or directory"},
        BadInput{"bench_seq_one", "bench --model TB --precisions fp32 --seq 1 --out DIR/o",
                 "sequence length 1 is outside what model"},
        BadInput{"bench_empty_precision", "bench --model TB --precisions fp32, --seq 8 --out DIR/o",
                 "--precisions 'fp32,': empty item, expected a comma-separated list of values"},
        BadInput{"bench_empty_batch", "bench --model TB --batch 1,,2 --seq 8 --out DIR/o",
                 "--batch '1,,2': empty item, expected a comma-separated list of values"},
        BadInput{"bench_slurm_chunk_zero", "bench --model TB --seq 8 --slurm --slurm-chunk 0 --out DIR/o",
                 "--slurm-chunk: 0 is out of range, expected 1 to 1000000"},
        BadInput{"bench_slurm_without_out", "bench --model TB --seq 8 --slurm",
                 "the folder of the sweep, on a file system every node sees"},
        BadInput{"bench_status_without_out", "bench --status", ": the folder of a sweep submitted with --slurm"},
        BadInput{"bench_status_not_submitted", "bench --out DIR --status",
                 "DIR/slurm/sweep.json: no Slurm submission here"},
        BadInput{"bench_slurm_task_outside_slurm", "bench --model TB --seq 8 --out DIR --slurm-task",
                 "--slurm-task runs inside a Slurm array task"},
        // A flag that only means something with another one, given without it (exit code: CLI11's).
        BadInput{"bench_slurm_chunk_without_slurm", "bench --model TB --seq 8 --slurm-chunk 2 --out DIR/o",
                 "--slurm-chunk requires --slurm", 107},
        BadInput{"bench_slurm_opt_without_slurm", "bench --model TB --seq 8 --slurm-opt=--partition=gpu --out DIR/o",
                 "--slurm-opt requires --slurm", 107},
        BadInput{"bench_wait_without_slurm", "bench --model TB --seq 8 --wait --out DIR/o", "--wait requires --slurm",
                 107},
        BadInput{"bench_slurm_dry_run_without_slurm", "bench --model TB --seq 8 --slurm-dry-run --out DIR/o",
                 "--slurm-dry-run requires --slurm", 107},
        BadInput{"bench_label_column_without_dataset", "bench --model TB --seq 8 --label-column y --out DIR/o",
                 "--label-column requires --dataset", 107},
        BadInput{"bench_text_column_without_dataset", "bench --model TB --seq 8 --text-column x --out DIR/o",
                 "--text-column requires --dataset", 107},
        BadInput{"eval_group_size_without_int4", kEval + "--precision int8 --group-size 64",
                 "--group-size applies to int4 only, and no layer runs int4 (--precision int8); expected "
                 "--precision int4 or a --layer-precision rule with it"},
        BadInput{"eval_int4_scheme_without_int4", kEval + "--precision nf4 --int4-scheme asym",
                 "--int4-scheme applies to int4 only, and no layer runs int4 (--precision nf4)"},
        BadInput{"eval_double_quant_without_nf4",
                 kEval + "--precision int4 --layer-precision '*.ffn.*=w8' --double-quant",
                 "--double-quant applies to nf4 only, and no layer runs nf4 (--precision int4, --layer-precision "
                 "'*.ffn.*=w8')"},
        BadInput{"eval_calib_without_smoothquant", kEval + "--precision int8 --calib 16",
                 "--calib 16 sets SmoothQuant's calibration, and SmoothQuant is off; expected --smoothquant [ALPHA] "
                 "or --precision int8:sq=ALPHA"},
        BadInput{"eval_precision_options_contradict", kEval + "--precision int4:g=64:g=128",
                 "precision 'int4:g=64:g=128': options 'g=64' and 'g=128' contradict each other; expected one of "
                 "them"},
        BadInput{"export_out_not_creatable", "export --model TL --precision nf4 --out /proc/qjoule-out",
                 "--out /proc/qjoule-out: cannot create the folder: "},
        BadInput{"export_gguf_out_under_a_file",
                 "export --model TL --precision int4:g=32:sym --to gguf --out TL/config.json/m.gguf",
                 "--out TL/config.json: cannot create the folder: Not a directory"},
        BadInput{"export_to_unknown", "export --model TL --precision nf4 --to onnx --out DIR/o",
                 "--to: onnx not in {safetensors,gguf}"},
        BadInput{"export_without_precision", "export --model TL --out DIR/o",
                 "--precision is required: what to write (int4:g=32|64|128[:sym|:asym], nf4, nf4:dq, fp16, bf16)"},
        BadInput{"export_gguf_with_precision", "export --model DIR/m.gguf --precision nf4 --out DIR/o",
                 "--precision nf4: a GGUF file is read back in its own format", 1,
                 [](const fs::path& dir) { write(dir / "m.gguf", "GGUF"); }},
        BadInput{"export_gguf_not_gguf", "export --model DIR/m.gguf --out DIR/o",
                 "DIR/m.gguf: the magic at byte 0 needs 4 bytes, but the file ends at 3", 1,
                 [](const fs::path& dir) { write(dir / "m.gguf", "GGU"); }},
        BadInput{"bench_reference_missing", "bench --model TB --seq 8 --reference DIR/none --out DIR/o",
                 "--reference: Directory does not exist: DIR/none"},
        BadInput{"energy_interval_zero", "energy --interval 0 -- true", "--interval: 0 is out of range"},
        BadInput{"energy_no_such_command", "energy -- DIR/none", "cannot run `DIR/none`: No such file or directory",
                 127},
        BadInput{"sensors_power_meter", "sensors --power-meter bogus:x",
                 "--power-meter bogus:x: expected file:PATH or cmd:COMMAND"}),
    [](const ::testing::TestParamInfo<BadInput>& case_info) { return case_info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    Files, CliBadInput,
    ::testing::Values(
        // config.json of a decoder
        // pre-quantized checkpoints: refused in one line naming what they are, before any shape is read
        BadInput{"gptq_checkpoint", kPpl,
                 "tensor 'model.layers.0.mlp.gate_proj.qweight' is missing: a gptq 4-bit, group_size 128, asym, "
                 "desc_act false, gptq_v2 zeros checkpoint's Linear holds qweight, qzeros and scales",
                 1,
                 model_copy("decoders/tiny-llama",
                            [](nlohmann::json& c) {
                              c["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4},
                                                          {"group_size", 128},      {"sym", false},
                                                          {"desc_act", false},      {"checkpoint_format", "gptq_v2"}};
                            })},
        BadInput{"awq_checkpoint_without_its_tensors", kPpl,
                 "tensor 'model.layers.0.mlp.gate_proj.qweight' is missing: a awq 4-bit, group_size 64, version gemm "
                 "checkpoint's Linear",
                 1,
                 model_copy("decoders/tiny-llama",
                            [](nlohmann::json& c) {
                              c["quantization_config"] = {{"quant_method", "awq"},
                                                          {"bits", 4},
                                                          {"group_size", 64},
                                                          {"version", "gemm"},
                                                          {"zero_point", true}};
                            })},
        BadInput{"quant_method_unknown", kPpl,
                 "DIR/m/config.json: quantization_config.quant_method = 'hqq' is not a method qjoule knows; expected "
                 "gptq, awq or bitsandbytes",
                 1,
                 model_copy("decoders/tiny-llama",
                            [](nlohmann::json& c) {
                              c["quantization_config"] = {{"quant_method", "hqq"}, {"nbits", 4}};
                            })},
        BadInput{"quant_bits_3", kPpl,
                 "DIR/m/config.json: quantization_config.bits = 3: a gptq checkpoint of 3-bit codes; qjoule's "
                 "kernels hold 4-bit (and 8-bit) codes",
                 1,
                 model_copy("decoders/tiny-llama",
                            [](nlohmann::json& c) {
                              c["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 3}, {"group_size", 128}};
                            })},
        BadInput{"quant_bits_not_an_integer", kPpl,
                 "DIR/m/config.json: quantization_config.bits = \"four\", expected an integer", 1,
                 model_copy("decoders/tiny-llama",
                            [](nlohmann::json& c) {
                              c["quantization_config"] = {{"quant_method", "gptq"}, {"bits", "four"}};
                            })},
        BadInput{"quant_config_not_an_object", kPpl,
                 "DIR/m/config.json: quantization_config = \"gptq\", expected an object", 1,
                 model_copy("decoders/tiny-llama", [](nlohmann::json& c) { c["quantization_config"] = "gptq"; })},
        BadInput{"bnb_fp4", kPpl,
                 "DIR/m/config.json: quantization_config.bnb_4bit_quant_type = 'fp4': bitsandbytes fp4 is not read; "
                 "expected nf4",
                 1,
                 model_copy("decoders/tiny-llama",
                            [](nlohmann::json& c) {
                              c["quantization_config"] = {{"quant_method", "bitsandbytes"},
                                                          {"load_in_4bit", true},
                                                          {"bnb_4bit_quant_type", "fp4"}};
                            })},
        BadInput{"bnb_nf4_config_plain_tensors", kPpl,
                 "DIR/m/model.safetensors: Linear 'model.layers.0.mlp.gate_proj' is not 4-bit: its weight is BF16 "
                 "[256, 128] with no 'model.layers.0.mlp.gate_proj.weight.quant_state.bitsandbytes__nf4' tensor",
                 1,
                 model_copy("decoders/tiny-llama",
                            [](nlohmann::json& c) {
                              c["quantization_config"] = {{"quant_method", "bitsandbytes"},
                                                          {"load_in_4bit", true},
                                                          {"bnb_4bit_quant_type", "nf4"}};
                            })},
        BadInput{"gptq_config_plain_tensors", kPpl,
                 "tensor 'model.layers.0.mlp.gate_proj.qweight' is missing: a gptq 4-bit, group_size 128, sym, "
                 "desc_act true, gptq (v1) zeros checkpoint's Linear holds qweight, qzeros and scales",
                 1,
                 model_copy("decoders/tiny-llama",
                            [](nlohmann::json& c) {
                              c["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}, {"desc_act", true}};
                            })},
        BadInput{"gptq_8bit", kPpl, "8-bit codes are not read yet (4-bit only)", 1,
                 model_copy("decoders/tiny-llama",
                            [](nlohmann::json& c) {
                              c["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 8}};
                            })},
        BadInput{"gptq_gpt2", "ppl --model DIR/m --text TL/config.json",
                 "a pre-quantized checkpoint (gptq 4-bit, group_size 128, sym, desc_act false, gptq (v1) zeros): "
                 "GPT-2 models are read unquantized only",
                 1,
                 model_copy("decoders/tiny-gpt2",
                            [](nlohmann::json& c) {
                              c["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
                            })},
        BadInput{"bnb_nf4_encoder", "eval --model DIR/m --dataset TB/dataset.tsv",
                 "DIR/m/model.safetensors: Linear 'bert.encoder.layer.0.attention.self.query' is not packed: its "
                 "weight is F32 [32, 32], but config.json's quantization_config says bitsandbytes 4-bit nf4 with "
                 "double quant",
                 1,
                 model_copy("tiny-bert",
                            [](nlohmann::json& c) {
                              c["quantization_config"] = {{"quant_method", "bitsandbytes"},
                                                          {"load_in_4bit", true},
                                                          {"bnb_4bit_quant_type", "nf4"},
                                                          {"bnb_4bit_use_double_quant", true}};
                            })},
        BadInput{"packed_tensor_without_quantization_config", kPpl,
                 "tensor 'model.layers.0.mlp.down_proj.qweight' (I32 [16, 64]) is a packed quantized weight (GPTQ / "
                 "AWQ qweight or bitsandbytes 4-bit), but config.json has no quantization_config",
                 1, with_packed_tensor("decoders/tiny-llama", "model.layers.0.mlp.down_proj.qweight")},
        BadInput{"config_negative_eps", kPpl, "DIR/m/config.json: rms_norm_eps = -1e-05, expected a positive number", 1,
                 model_copy("decoders/tiny-llama", [](nlohmann::json& c) { c["rms_norm_eps"] = -1e-5; })},
        BadInput{"config_rope_theta_zero", kPpl, "DIR/m/config.json: rope_theta = 0, expected a positive number", 1,
                 model_copy("decoders/tiny-llama", [](nlohmann::json& c) { c["rope_theta"] = 0; })},
        BadInput{"config_bos_outside_vocab", kPpl,
                 "DIR/m/config.json: bos_token_id = 99999 is outside the vocabulary [0, 610) of the embeddings", 1,
                 model_copy("decoders/tiny-llama", [](nlohmann::json& c) { c["bos_token_id"] = 99999; })},
        BadInput{"config_heads_not_dividing", kPpl,
                 "config.json: num_attention_heads = 5 × head_dim = 32 = 160, but tensor "
                 "'model.layers.0.self_attn.q_proj.weight' has 128 rows",
                 1, model_copy("decoders/tiny-llama", [](nlohmann::json& c) { c["num_attention_heads"] = 5; })},
        BadInput{"config_hidden_disagrees", kPpl,
                 "config.json: hidden_size = 64, but tensor 'model.embed_tokens.weight' has shape [610, 128] (so "
                 "hidden_size = 128)",
                 1, model_copy("decoders/tiny-llama", [](nlohmann::json& c) { c["hidden_size"] = 64; })},
        BadInput{"config_layers_disagree", kPpl,
                 "config.json: num_hidden_layers = 7, but the checkpoint holds tensors for 2 layers", 1,
                 model_copy("decoders/tiny-llama", [](nlohmann::json& c) { c["num_hidden_layers"] = 7; })},
        BadInput{"config_not_json", kPpl, "DIR/m/config.json: malformed JSON (parse error at line 1, column 2", 1,
                 model_with("decoders/tiny-llama", "m/config.json", "{")},
        BadInput{"config_number_overflow", kPpl,
                 "DIR/m/config.json: malformed JSON (number overflow parsing '1E400'), expected a JSON object", 1,
                 model_with("decoders/tiny-llama", "m/config.json", "{\"rope_theta\": 1E400}")},
        BadInput{"config_model_type_not_a_string", "ppl --model DIR/m --text TL/config.json",
                 "DIR/m/config.json: model_type = 53, expected a string", 1,
                 model_copy("decoders/tiny-llama", [](nlohmann::json& c) { c["model_type"] = 53; })},
        BadInput{"config_rope_type_not_a_string", kPpl,
                 "DIR/m/config.json: rope_scaling.rope_type = [1], expected a string", 1,
                 model_copy("decoders/tiny-llama",
                            [](nlohmann::json& c) {
                              c["rope_scaling"] = {{"rope_type", {1}}, {"factor", 2.0}};
                            })},
        BadInput{"bert_activation_not_a_string", "eval --model DIR/m --dataset TB/dataset.tsv",
                 "DIR/m/config.json: hidden_act = true, expected a string", 1,
                 model_copy("tiny-bert", [](nlohmann::json& c) { c["hidden_act"] = true; })},
        BadInput{"config_missing", "ppl --model DIR --text TL/config.json",
                 "DIR/config.json: cannot open (a Hugging Face model folder needs config.json)", 1,
                 [](const fs::path& dir) {
                   fs::copy_file(fixture("decoders/tiny-llama") / "model.safetensors", dir / "model.safetensors");
                 }},
        // config.json of an encoder
        BadInput{"bert_eps_zero", "eval --model DIR/m --dataset TB/dataset.tsv",
                 "DIR/m/config.json: layer_norm_eps = 0, expected a positive number", 1,
                 model_copy("tiny-bert", [](nlohmann::json& c) { c["layer_norm_eps"] = 0; })},
        BadInput{
            "bert_hidden_disagrees", "eval --model DIR/m --dataset TB/dataset.tsv",
            "config.json: hidden_size = 48, but tensor 'bert.embeddings.word_embeddings.weight' has shape [53, 32]", 1,
            model_copy("tiny-bert", [](nlohmann::json& c) { c["hidden_size"] = 48; })},
        // tokenizers
        BadInput{"tokenizer_not_json", "eval --model DIR/m --dataset TB/dataset.tsv",
                 "DIR/m/tokenizer.json: malformed JSON (parse error at line 1, column 11", 1,
                 model_with("tiny-bert", "m/tokenizer.json", "{\"model\": ")},
        BadInput{"tokenizer_number_overflow", "eval --model DIR/m --dataset TB/dataset.tsv",
                 "tokenizer.json: malformed JSON (number overflow parsing '1E400')", 1,
                 model_with("tiny-bert", "m/tokenizer.json", "{\"model\": {\"type\": \"WordPiece\", \"x\": 1E400}}")},
        BadInput{"decoder_tokenizer_array", "generate --model DIR/m --prompt hi",
                 "tokenizer.json: found a JSON array, expected a Hugging Face tokenizer.json object", 1,
                 model_with("decoders/tiny-llama", "m/tokenizer.json", "[]")},
        // datasets
        BadInput{"dataset_empty", "eval --model TB --dataset DIR/d.tsv",
                 "DIR/d.tsv: empty dataset (no lines), expected a header line and at least one data row", 1,
                 file("d.tsv", "")},
        BadInput{"dataset_jsonl_malformed", "eval --model TB --dataset DIR/d.jsonl",
                 "DIR/d.jsonl:2: malformed JSON (parse error at line 1, column 17", 1,
                 file("d.jsonl", "{\"text\": \"good\", \"label\": 1}\n{\"text\": \"bad\", label: 0}\n")},
        BadInput{"dataset_number_overflow", "eval --model TB --dataset DIR/d.jsonl",
                 "DIR/d.jsonl:1: malformed JSON (number overflow parsing", 1,
                 file("d.jsonl", "{\"text\": \"good\", \"label\": 1E999}\n")},
        BadInput{"dataset_label_out_of_range", "eval --model TB --dataset DIR/d.tsv",
                 "DIR/d.tsv:2: label 7 is out of range, expected 0..2 (the model has 3 labels)", 1,
                 file("d.tsv", "sentence\tlabel\ngood film\t7\n")},
        BadInput{"dataset_tsv_fields", "eval --model TB --dataset DIR/d.tsv",
                 "DIR/d.tsv:2: found 3 tab-separated fields, expected 2", 1,
                 file("d.tsv", "sentence\tlabel\ngood\t1\textra\n")},
        BadInput{"dataset_not_utf8", "eval --model TB --dataset DIR/d.tsv",
                 "DIR/d.tsv:2: invalid UTF-8 at byte offset 4: found byte 0xFF, which never occurs in UTF-8", 1,
                 file("d.tsv", "sentence\tlabel\nbad \xff\xfe byte\t1\n")},
        BadInput{"dataset_text_not_utf8", "ppl --model TL --text DIR/t.txt",
                 "--text DIR/t.txt: invalid UTF-8 at byte offset 10: found 0x28 after lead byte 0xC3", 1,
                 file("t.txt", "some text \xc3\x28 here\n")},
        // checkpoints
        BadInput{"shard_outside_folder", "info --model DIR/m",
                 "model.safetensors.index.json: weight_map['bert.embeddings.word_embeddings.weight'] names shard "
                 "'../model.safetensors', which is outside the checkpoint folder DIR/m; expected a file name inside it",
                 1,
                 [](const fs::path& dir) {
                   fs::create_directories(dir / "m");
                   fs::copy_file(fixture("tiny-bert") / "config.json", dir / "m" / "config.json");
                   write(dir / "m" / "model.safetensors.index.json",
                         R"({"weight_map": {"bert.embeddings.word_embeddings.weight": "../model.safetensors"}})");
                   fs::copy_file(fixture("tiny-bert") / "model.safetensors", dir / "model.safetensors");
                 }},
        BadInput{"safetensors_truncated", "info --model DIR/m",
                 "DIR/m/model.safetensors: header length 8 runs past the end of the file (10 bytes, so at most 2)", 1,
                 model_with("tiny-bert", "m/model.safetensors", std::string("\x08\x00\x00\x00\x00\x00\x00\x00{}", 10))},
        // results folders
        BadInput{"results_exist_without_resume", "bench --model TB --precisions fp32 --seq 8 --out DIR",
                 "DIR/results.jsonl already holds results; pass --resume to continue that sweep", 1,
                 file("results.jsonl", "{}\n")},
        BadInput{"results_bad_middle_line", "bench --model TB --precisions fp32 --seq 8 --out DIR --resume",
                 "DIR/results.jsonl:1: not a JSON line", 1, file("results.jsonl", "{not json\n{}\n")},
        BadInput{
            "results_identity_unreadable", "bench --model TB --precisions fp32 --seq 8 --out DIR --resume",
            "DIR/sweep-identity.json: not a sweep identity (a JSON object with 'models')", 1,
            file("sweep-identity.json", R"({"models": [{"model": "other", "config_sha256": "x"}], "dataset": null})")}),
    [](const ::testing::TestParamInfo<BadInput>& case_info) { return case_info.param.name; });

}  // namespace
