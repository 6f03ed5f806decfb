// Format: every number format qjoule runs, as one enum and one traits table (src/quant/format.cpp).
// A format's name is written once, in that table; everything else refers to Format::int4 and asks the
// table for its name, its run-name token, its bits per weight or its options. Where it runs (the CPU, a
// GPU) and with which kernels is each backend's registry's to say (qjoule/kernels/backend_registry.h).
//
// Adding a format: one row in kFormatTable, its layout in formats.h, its quantizer (with a `_ref`
// twin), its row in each backend that runs it (kernels/backend_registry.h: the function that builds its
// Linear, its kernels), and tests. The order of the enum is the order of the table and of every list
// shown to users. A format outside the enum can be added at run time (register_format: a test's toy
// format, a plug-in): it takes the next value after the built-in ones.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace qjoule::quant {

enum class Format : std::uint8_t { fp32, bf16, fp16, int8, w8, int4, nf4, tf32, fp8, mxfp4, nvfp4 };

struct FormatTraits {
  Format format;
  std::string_view name;       // as --precision takes it: "int4"
  std::string_view run_token;  // its part of a run name, before options: "int8_w8a8", "w8a32"
  double bits_per_weight;      // stored bits per weight at the default options, scales included
  bool weight_only;            // weights in the format, activations and arithmetic in FP32/BF16
  bool quantizes_activations;  // activations quantized too (int8's W8A8, fp8, int4:a8)
  bool emulatable;             // has a fake-quantized twin (:emulate); a format without one or options takes none
  bool in_default_sweep;       // `qjoule bench` without --precisions runs it (where a backend runs it)
  std::string_view options;    // what may follow NAME: in a precision spec ("" when nothing)
  std::string_view doc;        // one short line (under 64 characters) for `qjoule info --formats`
};

// Every format, in enum order (the built-in ones, then those registered).
[[nodiscard]] std::span<const FormatTraits> all_formats();

// Adds a format after the built-in ones and returns its value; `row.format` is ignored (set to that
// value). Its name and run token must be new; its string_views must outlive the program (literals). One
// line otherwise, or past 32 registered formats.
Format register_format(const FormatTraits& row);

[[nodiscard]] const FormatTraits& traits(Format format);

// "int4".
[[nodiscard]] std::string_view name(Format format);

// The format called `name` (exact, lower case), or nullopt.
[[nodiscard]] std::optional<Format> find_format(std::string_view name);

// Every name, in table order: "fp32, bf16, ..., tf32, fp8" (which backend runs which: the backends'
// registries, qjoule/kernels/backend_registry.h).
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
