#include "cli/decoder_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/format_util.h"
#include "qjoule/error.h"
#include "qjoule/kernels/cuda_device.h"

namespace qjoule::cli {

model::LoadedDecoder load_decoder_for(const std::string& dir, const QuantArgs& quant, const std::string& device,
                                      const CalibrationArgs& calib) {
  // --device first: without a usable GPU, that is the one line to say.
  const int gpu = device != "cpu" ? kernels::require_cuda_device(device) : -1;
  const auto qopts = quantization_options(quant);
  const auto policy = gpu >= 0 ? parse_cuda_layer_policy(qopts) : parse_layer_policy(qopts);
  if (qopts.smoothquant_alpha >= 0.0f)
    fail(
        "--precision {}: SmoothQuant is not supported for decoder models (it calibrates encoder classifiers); "
        "expected int8 without sq",
        quant.precision);
  std::string calibration;
  auto calibrated = calibrate_if_asked(dir, policy, calib, calibration);
  auto loaded = model::load_decoder(dir, gpu, policy, std::move(calibrated));
  loaded.calibration = std::move(calibration);
  if (!loaded.unused_tensors.empty()) fmt::print(stderr, "warning: {}\n", loaded.unused_tensors);
  return loaded;
}

void print_decoder_header(const std::string& dir, const model::LoadedDecoder& d, const QuantArgs& quant) {
  const auto& c = d.model.config();
  fmt::print("model      {} ({}: {} layers, hidden {}, heads {}/{}, vocab {}, positions {})\n", dir, c.architecture,
             c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.vocab_size, c.max_positions);
  if (!c.inferred_fields.empty())
    fmt::print("inferred   {} (absent from config.json)\n", fmt::join(c.inferred_fields, ", "));
  // The block Linears' kernels here, the head on a line of its own: it keeps the checkpoint's 16-bit type
  // below FP32 unless asked (quant::LayerPolicy::resolve).
  const auto head = d.model.head_report();
  auto counts = d.model.kernel_path_counts();
  if (const auto it = counts.find(head.format + " " + head.kernel_path); it != counts.end() && --it->second == 0)
    counts.erase(it);
  fmt::print("precision  {}{}: {}\n", quant.precision,
             quant.precision_origin.empty() ? "" : " (" + quant.precision_origin + ")", kernel_summary(counts));
  fmt::print("head       {} {}: {}{}\n", head.format, head.kernel_path, human_bytes(double(head.bytes_held)),
             !c.tie_word_embeddings ? ""
             : d.model.embeddings_in_head()
                 ? " (tied; the token embeddings read its rows, held once)"
                 : fmt::format(" (tied; the embeddings are held apart, in {})", d.model.embeddings_format()));
  if (d.on_gpu)
    fmt::print("device     {} (every weight and the KV cache on the GPU; non-GEMM operations {})\n",
               d.model.device_name(), d.model.nongemm_path());
  if (!d.calibration.empty()) fmt::print("calibrated {}\n", d.calibration);
  fmt::print("size       {} held in {} ({} as FP32)\n", human_bytes(double(d.model.bytes_held())),
             d.on_gpu ? "GPU memory" : "memory", human_bytes(double(d.model.fp32_bytes())));
}

}  // namespace qjoule::cli
