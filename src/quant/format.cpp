// The one table of formats (see format.h). Names of formats appear as strings here and nowhere else
// in the library.
#include "qjoule/quant/format.h"

#include <array>
#include <mutex>

#include "qjoule/error.h"
#include "qjoule/quant/formats.h"

namespace qjoule::quant {
namespace {

constexpr double kInt4G128SymBits = bits_per_weight<BlockInt4Sym<128>>();

// clang-format off
constexpr std::array<FormatTraits, 11> kFormatTable = {{
  // format       name    run token    bits/weight         weight quant. emul-  default options
  //                                                        -only  acts   atable sweep
  {Format::fp32, "fp32", "fp32",      32.0,               false, false, false, true,  "",
   "FP32 weights and arithmetic: the reference for the others"},
  {Format::bf16, "bf16", "bf16",      16.0,               false, true,  true,  true,  "",
   "BF16 weights and activations, FP32 accumulation"},
  {Format::fp16, "fp16", "fp16",      kFp16BitsPerWeight, true,  false, true,  false, "",
   "FP16 weights; FP32 math on CPU, FP16 tensor cores on CUDA"},
  {Format::int8, "int8", "int8_w8a8", 8.0,                false, true,  true,  true,  "sq=ALPHA",
   "W8A8: INT8 weights per channel, INT8 activations per token"},
  {Format::w8,   "w8",   "w8a32",     8.0,                true,  false, true,  true,  "",
   "INT8 weights per channel; FP32/BF16 activations"},
  {Format::int4, "int4", "int4",      kInt4G128SymBits,   true,  false, true,  true,  "g=32|64|128, sym|asym, a8",
   "4-bit integers in groups of g weights (a8: INT8 activations)"},
  {Format::nf4,  "nf4",  "nf4",       kNf4BitsPerWeight,  true,  false, true,  true,  "dq",
   "NormalFloat-4 in blocks of 64 (dq: 8-bit block scales)"},
  {Format::tf32, "tf32", "tf32",      32.0,               false, false, false, false, "",
   "FP32 weights, TF32 tensor cores (sm_80 and newer)"},
  {Format::fp8,  "fp8",  "fp8",       8.0,                false, true,  false, false, "",
   "FP8 E4M3 weights and activations (sm_89 and newer)"},
  {Format::mxfp4, "mxfp4", "mxfp4",  kMxfp4BitsPerWeight, true, false, true,  false, "",
   "OCP MXFP4: E2M1 in blocks of 32, E8M0 scales"},
  {Format::nvfp4, "nvfp4", "nvfp4",  kNvfp4BitsPerWeight, true, false, true,  false, "",
   "NVFP4: E2M1 in blocks of 16, E4M3 and FP32 scales"},
}};
// clang-format on

constexpr bool table_is_in_enum_order() {
  for (std::size_t i = 0; i < kFormatTable.size(); ++i) {
    if (static_cast<std::size_t>(kFormatTable[i].format) != i) return false;
  }
  return true;
}
static_assert(table_is_in_enum_order(), "kFormatTable: one row per Format, in enum order");

// The built-in rows, then the registered ones: a fixed array, so that a reference to a row stays valid.
constexpr std::size_t kMaxFormats = kFormatTable.size() + 32;
struct Table {
  std::array<FormatTraits, kMaxFormats> rows{};
  std::size_t size = 0;
  std::mutex mutex;  // registration
  Table() {
    for (const auto& t : kFormatTable) rows[size++] = t;
  }
};

Table& table() {
  static Table t;
  return t;
}

}  // namespace

std::span<const FormatTraits> all_formats() { return {table().rows.data(), table().size}; }

Format register_format(const FormatTraits& row) {
  Table& t = table();
  const std::lock_guard<std::mutex> lock(t.mutex);
  for (std::size_t i = 0; i < t.size; ++i) {
    if (t.rows[i].name == row.name || t.rows[i].run_token == row.run_token)
      fail("format '{}' (run token '{}'): the name or run token of format '{}' already; expected new ones", row.name,
           row.run_token, t.rows[i].name);
  }
  if (row.name.empty() || row.run_token.empty() || !(row.bits_per_weight > 0.0))
    fail("format '{}': expected a name, a run token and bits per weight > 0", row.name);
  if (t.size == kMaxFormats)
    fail("format '{}': {} formats are registered already, the most there can be", row.name, kMaxFormats);
  FormatTraits added = row;
  added.format = static_cast<Format>(t.size);
  t.rows[t.size++] = added;
  return added.format;
}

const FormatTraits& traits(Format format) {
  const auto i = static_cast<std::size_t>(format);
  if (i >= table().size) fail("format #{}: no such format (table of {})", i, table().size);
  return table().rows[i];
}

std::string_view name(Format format) { return traits(format).name; }

std::optional<Format> find_format(std::string_view name) {
  for (const auto& t : all_formats()) {
    if (t.name == name) return t.format;
  }
  return std::nullopt;
}

std::string all_format_names() {
  std::string out;
  for (const auto& t : all_formats()) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

}  // namespace qjoule::quant
