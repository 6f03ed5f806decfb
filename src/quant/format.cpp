// The one table of formats (see format.h). Names of formats appear as strings here and nowhere else
// in the library.
#include "qjoule/quant/format.h"

#include <array>

#include "qjoule/quant/formats.h"

namespace qjoule::quant {
namespace {

constexpr double kInt4G128SymBits = bits_per_weight<BlockInt4Sym<128>>();

// clang-format off
constexpr std::array<FormatTraits, 9> kFormatTable = {{
  // format       name    run token    bits/weight         weight quant. cpu    cuda   default options
  //                                                        -only  acts                  sweep
  {Format::fp32, "fp32", "fp32",      32.0,               false, false, true,  true,  true,  "",
   "FP32 weights and arithmetic: the reference for the others"},
  {Format::bf16, "bf16", "bf16",      16.0,               false, true,  true,  true,  true,  "",
   "BF16 weights and activations, FP32 accumulation"},
  {Format::fp16, "fp16", "fp16",      kFp16BitsPerWeight, true,  false, true,  true,  false, "",
   "FP16 weights; FP32 math on CPU, FP16 tensor cores on CUDA"},
  {Format::int8, "int8", "int8_w8a8", 8.0,                false, true,  true,  true,  true,  "sq=ALPHA",
   "W8A8: INT8 weights per channel, INT8 activations per token"},
  {Format::w8,   "w8",   "w8a32",     8.0,                true,  false, true,  false, true,  "",
   "INT8 weights per channel; FP32/BF16 activations"},
  {Format::int4, "int4", "int4",      kInt4G128SymBits,   true,  false, true,  true,  true,  "g=32|64|128, sym|asym, a8",
   "4-bit integers in groups of g weights (a8: INT8 activations)"},
  {Format::nf4,  "nf4",  "nf4",       kNf4BitsPerWeight,  true,  false, true,  true,  true,  "dq",
   "NormalFloat-4 in blocks of 64 (dq: 8-bit block scales)"},
  {Format::tf32, "tf32", "tf32",      32.0,               false, false, false, true,  false, "",
   "FP32 weights, TF32 tensor cores (sm_80 and newer)"},
  {Format::fp8,  "fp8",  "fp8",       8.0,                false, true,  false, true,  false, "",
   "FP8 E4M3 weights and activations (sm_89 and newer)"},
}};
// clang-format on

constexpr bool table_is_in_enum_order() {
  for (std::size_t i = 0; i < kFormatTable.size(); ++i) {
    if (static_cast<std::size_t>(kFormatTable[i].format) != i) return false;
  }
  return true;
}
static_assert(table_is_in_enum_order(), "kFormatTable: one row per Format, in enum order");

std::string join_names(bool (*keep)(const FormatTraits&), bool mark_cuda_only = false) {
  std::string out;
  for (const auto& t : kFormatTable) {
    if (!keep(t)) continue;
    if (!out.empty()) out += ", ";
    out += t.name;
    if (mark_cuda_only && !t.runs_on_cpu) out += " (CUDA only)";
  }
  return out;
}

}  // namespace

std::span<const FormatTraits> all_formats() { return kFormatTable; }

const FormatTraits& traits(Format format) { return kFormatTable[static_cast<std::size_t>(format)]; }

std::string_view name(Format format) { return traits(format).name; }

std::optional<Format> find_format(std::string_view name) {
  for (const auto& t : kFormatTable) {
    if (t.name == name) return t.format;
  }
  return std::nullopt;
}

std::string cpu_format_names() {
  return join_names([](const FormatTraits& t) { return t.runs_on_cpu; });
}

std::string cuda_format_names() {
  return join_names([](const FormatTraits& t) { return t.runs_on_cuda; });
}

std::string default_sweep_precisions(bool cuda) {
  std::string out;
  for (const auto& t : kFormatTable) {
    if (!t.in_default_sweep || (cuda && !t.runs_on_cuda)) continue;
    if (!out.empty()) out += ",";
    out += t.name;
  }
  return out;
}

std::string all_format_names() {
  return join_names([](const FormatTraits&) { return true; }, true);
}

}  // namespace qjoule::quant
