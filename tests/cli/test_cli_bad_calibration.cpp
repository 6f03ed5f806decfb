// Bad input of calibration (--calib and the calibrated precisions int4:...:gptq, int4:...:awq) in every
// command that calibrates (ppl, generate, eval, bench, export), end to end: one line each naming the flag or
// file, what was found and what was expected.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "bad_input_case.h"

namespace {

using qjoule::test::BadInput;
namespace fs = std::filesystem;

class CliBadCalibration : public ::testing::TestWithParam<BadInput> {};

TEST_P(CliBadCalibration, OneLineNamingWhatWasFoundAndExpected) { qjoule::test::expect_one_line_error(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    Flags, CliBadCalibration,
    ::testing::Values(
        BadInput{"ppl_gptq_without_calib", "ppl --model TL --text TL/config.json --precision int4:g=32:gptq",
                 "precision 'int4:g=32:gptq' needs calibration inputs; expected --calib FILE"},
        BadInput{"ppl_calib_without_calibrated_precision",
                 "ppl --model TL --text TL/config.json --precision int4 --calib TL/tokenizer.json",
                 "--calib TL/tokenizer.json: no layer's precision calibrates; expected it with a calibrated one"},
        BadInput{"ppl_calib_empty", "ppl --model TL --text TL/config.json --precision int4:gptq --calib DIR/c.txt",
                 "--calib DIR/c.txt: the text is empty (3 bytes of whitespace at most), expected text", 1,
                 [](const fs::path& dir) { std::ofstream(dir / "c.txt") << " \n\n"; }},
        BadInput{"ppl_calib_not_utf8", "ppl --model TL --text TL/config.json --precision int4:gptq --calib DIR/c.txt",
                 "--calib DIR/c.txt: invalid UTF-8 at byte offset 4", 1,
                 [](const fs::path& dir) { std::ofstream(dir / "c.txt") << "text\xff more"; }},
        BadInput{"ppl_calib_too_few_tokens",
                 "ppl --model TL --text TL/config.json --precision int4:gptq --calib DIR/c.txt",
                 "--calib DIR/c.txt: 3 tokens, too few for 64 calibration sequences of 128 tokens (8192 needed); "
                 "expected a longer text, or fewer / shorter sequences (--calib-sequences, --calib-tokens)",
                 1, [](const fs::path& dir) { std::ofstream(dir / "c.txt") << "hi"; }},
        BadInput{"ppl_calib_sequences_zero",
                 "ppl --model TL --text TL/config.json --precision int4:gptq --calib TL/tokenizer.json "
                 "--calib-sequences 0",
                 "--calib-sequences: 0 is out of range, expected 1 to"},
        BadInput{"ppl_calib_damp_zero",
                 "ppl --model TL --text TL/config.json --precision int4:gptq --calib TL/tokenizer.json --calib-damp 0",
                 "--calib-damp: 0 is out of range, expected"},
        BadInput{"ppl_calib_missing", "ppl --model TL --text TL/config.json --precision int4:gptq --calib DIR/none.txt",
                 "--calib: File does not exist: DIR/none.txt"},
        BadInput{"ppl_calib_tokens_beyond_positions",
                 "ppl --model TL --text TL/config.json --precision int4:gptq --calib TL/tokenizer.json "
                 "--calib-tokens 4096",
                 "--calib-tokens 4096 is beyond the model's max_position_embeddings = 128"},
        BadInput{"export_gptq_without_calib", "export --model TL --precision int4:g=128:gptq --out DIR/o",
                 "precision 'int4:g=128:gptq' needs calibration inputs; expected --calib FILE"},
        BadInput{"export_gptq_encoder_without_calib", "export --model TB --precision int4:g=128:gptq --out DIR/o",
                 "precision 'int4:g=128:gptq' needs calibration inputs; expected --calib FILE"},
        BadInput{"export_gguf_gptq_without_calib",
                 "export --model TL --precision int4:g=32:gptq --to gguf --out DIR/m.gguf",
                 "precision 'int4:g=32:gptq' needs calibration inputs; expected --calib FILE"},
        BadInput{"export_gguf_gptq_g128",
                 "export --model TL --precision int4:g=128:gptq --to gguf --calib TL/tokenizer.json --out DIR/m.gguf",
                 "--precision int4:g=128:sym:gptq --to gguf: no GGUF type holds it bit for bit; qjoule writes "
                 "int4:g=32:sym (Q4_0)"},
        BadInput{"bench_gptq_without_calib",
                 "bench --model TL --precisions int4,int4:gptq --seq 8 --decode-tokens 2 --out DIR/o",
                 "precision 'int4:gptq' needs calibration inputs; expected --calib FILE"},
        BadInput{"bench_calib_without_calibrated_precision",
                 "bench --model TL --precisions int4 --seq 8 --decode-tokens 2 --calib TL/tokenizer.json --out DIR/o",
                 "--calib TL/tokenizer.json: no precision of the sweep calibrates; expected it with a calibrated one"},
        BadInput{"bench_awq_on_encoder_too_few_examples",
                 "bench --model TB --precisions int4:awq --seq 8 --calib TB/dataset.tsv --out DIR/o",
                 "--calib TB/dataset.tsv: 12 examples, too few for 64 calibration sequences; expected a larger dataset "
                 "(the training split), or fewer sequences (--calib-sequences)"},
        BadInput{"eval_gptq_without_calib", "eval --model TB --dataset TB/dataset.tsv --precision int4:g=32:gptq",
                 "precision 'int4:g=32:gptq' needs calibration inputs; expected --calib FILE"},
        BadInput{"eval_calib_too_few_examples",
                 "eval --model TB --dataset TB/dataset.tsv --precision int4:g=32:gptq --calib TB/dataset.tsv",
                 "--calib TB/dataset.tsv: 12 examples, too few for 64 calibration sequences"},
        BadInput{"eval_calib_missing",
                 "eval --model TB --dataset TB/dataset.tsv --precision int4:g=32:gptq --calib DIR/none.tsv",
                 "--calib DIR/none.tsv: no such file; expected a calibration dataset (.tsv, .jsonl) or SmoothQuant's "
                 "example count"},
        BadInput{"eval_calib_tokens_one",
                 "eval --model TB --dataset TB/dataset.tsv --precision int4:g=32:awq --calib TB/dataset.tsv "
                 "--calib-sequences 4 --calib-tokens 1",
                 "--calib-tokens 1: expected at least 2 ([CLS] and [SEP])"},
        BadInput{"eval_gptq_on_gpu",
                 "eval --model TB --dataset TB/dataset.tsv --precision int4:g=32:gptq --calib TB/dataset.tsv "
                 "--device cuda",
                 "cuda"},
        BadInput{"export_calib_without_calibrated_precision",
                 "export --model TL --precision int4:g=64 --calib TL/tokenizer.json --out DIR/o",
                 "--calib TL/tokenizer.json: no layer's precision calibrates; expected it with a calibrated one"},
        BadInput{"ppl_awq_without_calib", "ppl --model TL --text TL/config.json --precision int4:awq",
                 "precision 'int4:awq' needs calibration inputs; expected --calib FILE"},
        BadInput{"ppl_awq_and_gptq",
                 "ppl --model TL --text TL/config.json --precision int4:awq:gptq --calib TL/tokenizer.json",
                 "precision 'int4:awq:gptq': options 'gptq' and 'awq' contradict each other"}),
    [](const ::testing::TestParamInfo<BadInput>& case_info) { return case_info.param.name; });

}  // namespace
