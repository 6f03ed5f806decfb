// Every kernel choice qjoule makes by itself that the environment may override, in one table: the
// variable, the values it takes, what it chooses and what happens when it is unset. Each choice reads
// its override here (checked, one line for a value it does not take); `qjoule info --kernels` prints the
// table, the CLI checks every variable set before a command runs, and each bench record names the
// overrides in force (environment.kernel_overrides), so a figure says which kernel a person forced.
//
// Adding one: an enum value, its row in the table of src/kernels/cpu/kernel_overrides.cpp (in enum order)
// and a read through kernel_override() where the choice is made.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qjoule::kernels {

enum class KernelOverride : std::uint8_t {
  weight_only_decode,  // QJOULE_WEIGHT_ONLY_DECODE
  weight_only_panel,   // QJOULE_WEIGHT_ONLY_PANEL
  force_scalar,        // QJOULE_FORCE_SCALAR
  cuda_gemv4,          // QJOULE_CUDA_GEMV4
  decode_graph,        // QJOULE_DECODE_GRAPH
  tokens_per_pass,     // QJOULE_TOKENS_PER_PASS
  weight_only_layout,  // QJOULE_WEIGHT_ONLY_LAYOUT
  repacked_prefill,    // QJOULE_REPACKED_PREFILL
};

struct KernelOverrideInfo {
  KernelOverride id;
  std::string_view variable;             // "QJOULE_WEIGHT_ONLY_DECODE"
  std::vector<std::string_view> values;  // the values it takes; empty: a positive integer
  std::string_view expected;             // what a bad value's line says is expected: "x16 or float"
  std::string_view unset;                // what qjoule does without it
  std::string_view doc;                  // what it chooses, one line
};

// Every override, in table order.
[[nodiscard]] std::span<const KernelOverrideInfo> all_kernel_overrides();
[[nodiscard]] const KernelOverrideInfo& info(KernelOverride id);

// The override's value in the environment now: nullopt when unset or empty; a value it does not take
// is one line, "QJOULE_X=VALUE: expected ...". Read at each choice, so a test may set it in-process.
[[nodiscard]] std::optional<std::string> kernel_override(KernelOverride id);
// The same for an override that takes a positive integer (QJOULE_TOKENS_PER_PASS).
[[nodiscard]] std::optional<int64_t> kernel_override_count(KernelOverride id);

// Every override set in the environment, checked, by variable: what a record names. Throws the first
// bad value's line.
[[nodiscard]] std::map<std::string, std::string> kernel_overrides_in_force();

// The table as text for `qjoule info --kernels`: a line per override (variable, values, unset, doc)
// and, where set, its value now.
[[nodiscard]] std::string kernel_overrides_table();

}  // namespace qjoule::kernels
