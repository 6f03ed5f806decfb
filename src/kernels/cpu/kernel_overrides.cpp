// The one table of kernel overrides (see kernel_overrides.h).
#include "qjoule/kernels/kernel_overrides.h"

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "qjoule/error.h"

namespace qjoule::kernels {
namespace {

const std::vector<KernelOverrideInfo>& table() {
  static const std::vector<KernelOverrideInfo> rows = {
      {KernelOverride::weight_only_decode,
       "QJOULE_WEIGHT_ONLY_DECODE",
       {"x16", "float"},
       "x16 or float",
       "measured once per layout and process: the faster of the two on this CPU (int4 on weights repacked at load: x16)",
       "the CPU weight-only decode GEMV (m <= 4) of int4 / nf4 / w8 on AVX512_VNNI: 16-bit integer activations (x16) or "
       "FP32 / BF16 (float)"},
      {KernelOverride::weight_only_panel,
       "QJOULE_WEIGHT_ONLY_PANEL",
       {"bf16", "f32"},
       "bf16 or f32",
       "measured once per process: BF16 panels where they beat FP32 ones by 1.15x on this CPU",
       "the panels a CPU weight-only prefill (m > 4) widens its weights into for oneDNN's matmul"},
      {KernelOverride::force_scalar,
       "QJOULE_FORCE_SCALAR",
       {"0", "1"},
       "0 or 1",
       "the widest ISA this CPU has (as 0)",
       "the CPU weight-only kernels' ISA: their scalar twins (1, for tests)"},
      {KernelOverride::cuda_gemv4,
       "QJOULE_CUDA_GEMV4",
       {"split", "plain"},
       "split or plain (unset: split)",
       "split",
       "the CUDA 4-bit decode GEMV of int4 / nf4: split along K (split) or one block a row (plain)"},
      {KernelOverride::decode_graph,
       "QJOULE_DECODE_GRAPH",
       {"0", "1"},
       "0 (every decode step kernel by kernel) or 1 (one CUDA graph a decode token, the default)",
       "1",
       "a GPU decoder's decode step: recorded once as a CUDA graph and replayed (1) or launched kernel by kernel (0)"},
      {KernelOverride::tokens_per_pass,
       "QJOULE_TOKENS_PER_PASS",
       {},
       "a positive number of tokens",
       "1024",
       "the tokens of one CPU pass of an encoder classifier's batch"},
      {KernelOverride::weight_only_layout,
       "QJOULE_WEIGHT_ONLY_LAYOUT",
       {"repacked", "rows"},
       "repacked or rows",
       "repacked where the layer's kernel has a repacked form (int4, int4:a8, nf4, nf4:dq, mxfp4 and nvfp4 on "
       "AVX512_VNNI) and its scales are finite",
       "the CPU weight-only weights' layout in memory: repacked at load into 16-row panels for the kernel (repacked) "
       "or the format's rows as formats.h stores them (rows; int4 then measures x16 against float decode)"},
      {KernelOverride::repacked_prefill,
       "QJOULE_REPACKED_PREFILL",
       {"panels", "x16"},
       "panels or x16",
       "panels where oneDNN's BF16 matmul runs on AMX tiles (the avx512_bf16 level's panels), x16 elsewhere",
       "the prefill (m > 4) of 4-bit weights repacked at load: the rows' BF16 / FP32 panels decoded from the repacked "
       "layout for oneDNN's matmul (panels; AMX tiles where granted) or the x16 integer kernel (x16)"},
  };
  return rows;
}

std::optional<std::string> environment_value(const KernelOverrideInfo& row) {
  const char* v = std::getenv(std::string(row.variable).c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

void check(const KernelOverrideInfo& row, const std::string& value) {
  bool ok = false;
  if (row.values.empty()) {
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(value.c_str(), &end, 10);
    ok = end != value.c_str() && *end == '\0' && errno != ERANGE && n >= 1;
  } else {
    for (const auto v : row.values) ok = ok || v == value;
  }
  if (!ok) fail("{}={}: expected {}", row.variable, value, row.expected);
}

}  // namespace

std::span<const KernelOverrideInfo> all_kernel_overrides() { return table(); }

const KernelOverrideInfo& info(KernelOverride id) { return table().at(static_cast<std::size_t>(id)); }

std::optional<std::string> kernel_override(KernelOverride id) {
  const KernelOverrideInfo& row = info(id);
  auto value = environment_value(row);
  if (value) check(row, *value);
  return value;
}

std::optional<int64_t> kernel_override_count(KernelOverride id) {
  const auto value = kernel_override(id);
  if (!value) return std::nullopt;
  return static_cast<int64_t>(std::strtoll(value->c_str(), nullptr, 10));
}

std::map<std::string, std::string> kernel_overrides_in_force() {
  std::map<std::string, std::string> out;
  for (const auto& row : table()) {
    if (auto v = kernel_override(row.id)) out.emplace(row.variable, std::move(*v));
  }
  return out;
}

std::string kernel_overrides_table() {
  std::string out =
      "Kernel choices the environment may override (unset: qjoule chooses; each bench record names those in "
      "force, environment.kernel_overrides):\n";
  for (const auto& row : table()) {
    const std::string values = row.values.empty() ? std::string("N") : fmt::format("{}", fmt::join(row.values, "|"));
    const auto now = environment_value(row);
    out += fmt::format("  {}={}\n      {}\n      unset: {}{}\n", row.variable, values, row.doc, row.unset,
                       now ? fmt::format("\n      now: {}", *now) : std::string());
  }
  return out;
}

}  // namespace qjoule::kernels
