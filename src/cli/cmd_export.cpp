// `qjoule export`: an unquantized decoder or classifier written in the checkpoint layout its precision maps
// to (GPTQ, bitsandbytes NF4, plain FP16 / BF16; a decoder also as GGUF), for another runtime, or to read
// back with qjoule.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/calibration_options.h"
#include "cli/commands.h"
#include "cli/format_util.h"
#include "qjoule/error.h"
#include "qjoule/model/export/checkpoint_export.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/export/gguf_export.h"
#include "qjoule/model/export/gguf_import.h"
#include "qjoule/quant/format_spec.h"
#include "qjoule/quant/layer_policy.h"
#include "qjoule/quant/precision.h"

namespace qjoule::cli {
namespace {

struct ExportArgs {
  std::string model, precision, out, to = "safetensors";
  CalibrationArgs calib;
};

void run_export_gguf(const ExportArgs& a, const quant::FormatSpec& spec) {
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  model::check_gguf_export(a.model, spec, a.out);  // refusals before a calibration that would be wasted
  std::string calibration;
  const auto calibrated =
      calibrate_if_asked(a.model, quant::LayerPolicy::uniform(quant::Precision(a.precision)), a.calib, calibration);
  const auto summary = model::export_gguf(
      a.model, spec, a.out,
      [tty](int64_t done, int64_t total, const std::string& tensor) {
        if (tty) fmt::print(stderr, "\r\033[K  tensor {}/{} {}", done, total, tensor);
      },
      calibrated.get());
  if (tty) fmt::print(stderr, "\r\033[K");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("model      {}\n", a.model);
  fmt::print("precision  {} as GGUF {} ({} Linears), architecture {}, tokenizer {}\n", quant::to_string(spec),
             summary.tensor_type, summary.quantized, summary.architecture, summary.tokenizer);
  if (!calibration.empty()) fmt::print("calibrated {}\n", calibration);
  fmt::print("written    {} ({} tensors, {}) in {:.1f} s\n", a.out, summary.tensors, human_bytes(double(summary.bytes)),
             seconds);
}

// A GGUF file qjoule wrote, back into the Hugging Face folder it came from (model/export/gguf_import.h).
void run_import_gguf(const ExportArgs& a) {
  if (!a.precision.empty())
    fail("--precision {}: a GGUF file is read back in its own format (Q4_0 as int4:g=32:sym); leave --precision out",
         a.precision);
  if (a.to != "safetensors")
    fail("--to {}: a GGUF file is read back as a Hugging Face folder (--to safetensors)", a.to);
  const auto summary = model::import_gguf(a.model, a.out);
  fmt::print("model      {} (GGUF, {})\n", a.model, summary.architecture);
  fmt::print("written    {}: {} tensors{}\n", a.out, summary.tensors,
             summary.q4_0 > 0 ? fmt::format(", {} Q4_0 Linears as GPTQ (run it with --precision {})", summary.q4_0,
                                            summary.precision)
                              : std::string());
}

void run_export(const ExportArgs& a) {
  if (std::filesystem::is_regular_file(a.model)) return run_import_gguf(a);
  if (a.precision.empty()) fail("--precision is required: what to write ({})", model::kExportableSpecs);
  const quant::FormatSpec spec = quant::Precision(a.precision).spec_or_fail();
  if (a.to == "gguf") return run_export_gguf(a, spec);
  const auto start = std::chrono::steady_clock::now();
  // A calibrated precision: the model calibrated first (a progress line a block), its codes written.
  std::string calibration;
  const auto calibrated = quant::needs_calibration(spec) || !a.calib.settings.file.empty()
                              ? calibrate_if_asked(a.model, quant::LayerPolicy::uniform(quant::Precision(a.precision)),
                                                   a.calib, calibration)
                              : nullptr;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const auto summary = model::export_checkpoint(
      a.model, spec, a.out,
      [tty](int64_t done, int64_t total, const std::string& tensor) {
        if (tty) fmt::print(stderr, "\r\033[K  tensor {}/{} {}", done, total, tensor);
      },
      calibrated.get());
  if (tty) fmt::print(stderr, "\r\033[K");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("model      {}\n", a.model);
  fmt::print("precision  {} as {}\n", quant::to_string(spec), summary.layout);
  if (!calibration.empty()) fmt::print("calibrated {}\n", calibration);
  fmt::print("tensors    {} Linears quantized, {} tensors {}\n", summary.quantized, summary.copied,
             summary.quantized > 0 ? "copied as stored" : "converted or copied");
  fmt::print("written    {}/model.safetensors ({}) and config.json, in {:.1f} s\n", a.out,
             human_bytes(double(summary.bytes)), seconds);
}

}  // namespace

void add_export_command(CLI::App& app, CommandContext& /*ctx*/) {
  auto* cmd = app.add_subcommand(
      "export",
      "Write an unquantized decoder or classifier in the checkpoint layout its precision maps to, for other runtimes.");
  cmd->footer(fmt::format(
      "Layouts: int4:g=G[:sym|:asym] as GPTQ (gptq_v2 zeros, desc_act false), nf4 and nf4:dq as bitsandbytes\n"
      "4-bit, fp16 and bf16 as plain safetensors. The codes are qjoule's own quantizer's: importing the export\n"
      "(--model OUT --precision SPEC) runs bit for bit what `--precision SPEC` runs on the original.\n"
      "Calibrated int4 (int4:...:gptq, int4:...:awq, with --calib FILE) is written as GPTQ too: its codes,\n"
      "and the norms and biases AWQ's scales changed; importing it runs what the calibrated precision ran.\n"
      "A decoder's --calib is text; a classifier's a dataset (its first --calib-sequences examples). With\n"
      "--to gguf, calibrated int4:g=32:sym (e.g. int4:g=32:gptq) is written as Q4_0, as round-to-nearest's is.\n"
      "Exportable: {}.\n"
      "Example:\n"
      "  qjoule export --model MODEL --precision int4:g=128:asym --out MODEL-gptq\n"
      "  qjoule export --model MODEL --precision int4:g=128:gptq --calib valid.txt --out MODEL-gptq-calibrated\n"
      "  qjoule export --model MODEL --precision int4:g=32:sym --to gguf --out model-q4_0.gguf\n"
      "  qjoule export --model MODEL --precision int4:g=32:awq --calib valid.txt --to gguf --out model-awq.gguf\n"
      "  qjoule export --model model-q4_0.gguf --out MODEL-back   (a GGUF qjoule wrote, read back)\n"
      "  qjoule ppl --model MODEL-gptq --precision int4:g=128:asym --text ../shared/data/wikitext2/test.txt",
      model::kExportableSpecs));
  auto a = std::make_shared<ExportArgs>();
  cmd->add_option("--model", a->model,
                  "Model folder (config.json, safetensors, tokenizer.json), unquantized; or a GGUF file qjoule "
                  "exported, read back into a folder")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("--precision", a->precision, fmt::format("What to write: {}", model::kExportableSpecs));
  cmd->add_option("--out", a->out, "Folder to write (new or empty); with --to gguf, the file")->required();
  add_calibration_options(cmd, a->calib.settings);
  cmd->add_option("--to", a->to,
                  fmt::format("safetensors (a Hugging Face folder) or gguf (one llama.cpp file: {})",
                              model::kGgufExportableSpecs))
      ->check(CLI::IsMember({"safetensors", "gguf"}))
      ->capture_default_str();
  cmd->callback([a] { run_export(*a); });
}

}  // namespace qjoule::cli
