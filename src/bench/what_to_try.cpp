#include "bench/what_to_try.h"

#include <fmt/format.h>

#include "qjoule/quant/precision.h"

namespace qjoule::bench {

// What usually recovers accuracy for this format, among the formats the run's device has kernels for
// (on a GPU: no weight-only INT8, no SmoothQuant).
std::string what_to_try(const RunRecord& record) {
  const auto& spec = record.config.precision.spec();
  const quant::Format format = spec ? spec->format : quant::Format::fp32;
  const bool cuda = record.config.device.starts_with("cuda");
  const std::string w8 = cuda ? "FP16 weights (`--precisions fp16`)" : "weight-only INT8 (`--precisions w8`)";
  const std::string exclude =
      "excluding the first and last blocks from quantization (`--quant-exclude '*.layer.0.*,*.layer.<last>.*'` "
      "with the model's last layer index)";
  if (record.decode_tokens)  // decoder: no SmoothQuant; perplexity is the accuracy that matters
    return w8 +
           " or smaller INT4 groups (`int4:g=32`), and compare perplexity with `qjoule ppl` (where "
           "`--quant-exclude` keeps the layers it names in FP32)";
  if (format == quant::Format::int8 && spec->smoothquant_alpha)
    return fmt::format("another SmoothQuant alpha (`--precisions int8:sq=0.75`), {}, or {}", w8, exclude);
  if (format == quant::Format::int8 && !cuda)
    return fmt::format("SmoothQuant (`--precisions int8:sq=0.5`), {}, or {}", w8, exclude);
  if (format == quant::Format::int4)
    return fmt::format("smaller groups (`--precisions int4:g=64` or `int4:g=32`), `asym`, {}, or {}", w8, exclude);
  if (format == quant::Format::nf4) return fmt::format("{}, `int4:g=32`, or {}", w8, exclude);
  if (format == quant::Format::mxfp4 || format == quant::Format::nvfp4)
    return fmt::format("{}`nf4`, `int4:g=32`, {}, or {}",
                       format == quant::Format::mxfp4 ? "`nvfp4` (finer blocks), " : "", w8, exclude);
  return fmt::format("{}, or {}", w8, exclude);
}

// What usually brings a quantized decoder's perplexity back.
std::string what_to_try_decoder(const RunRecord& record) {
  const auto& spec = record.config.precision.spec();
  const quant::Format format = spec ? spec->format : quant::Format::fp32;
  const std::string keep =
      "keeping the first and last blocks in higher precision (`--layer-precision` in `qjoule ppl`)";
  const std::string w8 = record.config.device.starts_with("cuda") ? "FP16 (`fp16`)" : "weight-only INT8 (`w8`)";
  if (format == quant::Format::int4 || format == quant::Format::nf4 || format == quant::Format::mxfp4 ||
      format == quant::Format::nvfp4)
    return fmt::format("smaller groups (`int4:g=32`, `int4:g=64:asym`), {}, or {}", w8, keep);
  return fmt::format("{}, BF16, or {}", w8, keep);
}

}  // namespace qjoule::bench
