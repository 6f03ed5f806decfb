// Format: every number format qjoule runs, as one enum and one traits table (src/quant/format.cpp).
// A format's name is written once, in that table; everything else refers to Format::int4 and asks the
// table for its name, its run-name token, its bits per weight or whether it runs on the CPU.
//
// Adding a format: one row in kFormatTable, its layout in formats.h, its quantizer (with a `_ref`
// twin), its Linear in make_linear.cpp (and make_linear_cuda, where it has a GPU kernel), and tests.
// The order of the enum is the order of the table and of every list shown to users.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace qjoule::quant {

enum class Format : std::uint8_t { fp32, bf16, fp16, int8, w8, int4, nf4, tf32, fp8 };

struct FormatTraits {
  Format format;
  std::string_view name;       // as --precision takes it: "int4"
  std::string_view run_token;  // its part of a run name, before options: "int8_w8a8", "w8a32"
  double bits_per_weight;      // stored bits per weight at the default options, scales included
  bool weight_only;            // weights in the format, activations and arithmetic in FP32/BF16
  bool quantizes_activations;  // activations quantized too (int8's W8A8, fp8, int4:a8)
  bool runs_on_cpu;            // make_linear has a kernel for it
  bool runs_on_cuda;           // make_linear_cuda has a kernel for it
  bool in_default_sweep;       // `qjoule bench` without --precisions runs it
  std::string_view options;    // what may follow NAME: in a precision spec ("" when nothing)
  std::string_view doc;        // one short line (under 64 characters) for `qjoule info --formats`
};

// Every format, in enum order.
[[nodiscard]] std::span<const FormatTraits> all_formats();

[[nodiscard]] const FormatTraits& traits(Format format);

// "int4".
[[nodiscard]] std::string_view name(Format format);

// The format called `name` (exact, lower case), or nullopt.
[[nodiscard]] std::optional<Format> find_format(std::string_view name);

// The names of the formats with a CPU kernel (or a CUDA kernel), joined by ", ": for help and errors.
[[nodiscard]] std::string cpu_format_names();
[[nodiscard]] std::string cuda_format_names();
// The precisions `qjoule bench` sweeps by default, comma-separated: "fp32,bf16,int8,w8,int4,nf4"; with
// `cuda`, those of them with a CUDA kernel ("fp32,bf16,int8,int4,nf4": w8 is CPU-only).
[[nodiscard]] std::string default_sweep_precisions(bool cuda = false);

// Every name, CUDA-only ones marked: "fp32, bf16, ..., nf4, tf32 (CUDA only), fp8 (CUDA only)".
[[nodiscard]] std::string all_format_names();

}  // namespace qjoule::quant

// fmt::format("{}", Format::int4) writes "int4".
template <>
struct fmt::formatter<qjoule::quant::Format> : fmt::formatter<std::string_view> {
  template <class Context>
  auto format(qjoule::quant::Format f, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(qjoule::quant::name(f), ctx);
  }
};
