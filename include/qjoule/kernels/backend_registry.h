// What each backend runs: one registry per backend (the CPU's, the CUDA one's), a row per format that it
// has kernels for. A format's own row (name, layout, bits, options) is quant/format.h's; whether it runs
// on the CPU or a GPU, and with which kernels, is said here and nowhere else: make_linear builds a CPU
// layer through its row, make_linear_cuda plans a GPU layer from its row, and the CLI's refusals, its
// --help, `qjoule info --formats` and the README's format table (checked by a test) read the rows.
//
// A row names its kernels per ISA (CPU) or GPU generation (CUDA) with the kernel path each one writes
// into kernel_path() and so into every record: a pattern where `*` stands for what is chosen at run time
// (oneDNN's implementation, the panel of a prefill). tests/kernels/cpu/test_backend_registry.cpp builds
// every CPU format at every ISA this CPU has and checks its kernel path against its row.
//
// Adding a format: its row in quant/format.h and its layout in formats.h, then a row here per backend
// that runs it: on the CPU, register_cpu_format (or a row of src/kernels/cpu/cpu_backend_formats.cpp)
// with the function that builds its Linear from FP32 weights; on CUDA, a row of
// src/kernels/cuda/cuda_backend_formats.cpp and its kernels.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "qjoule/kernels/linear.h"
#include "qjoule/quant/format_spec.h"

namespace qjoule::kernels {

enum class Backend : std::uint8_t { cpu, cuda };

[[nodiscard]] std::string_view name(Backend backend);  // "cpu", "cuda"

struct KernelVariant {
  std::string isa;  // CPU: "amx", "avx512_vnni", "avx512_bf16", "avx512", "avx2", "scalar", "any"; CUDA: "sm_80+"
  std::string kernel_path;  // what kernel_path() names when it runs; `*` matches any text
  std::string doc;          // one short line: what it computes in
};

// Builds a CPU Linear of `spec`'s format from FP32 W [out, in] row-major and bias [out] (or nullptr);
// `int8_smoothing` (SmoothQuant's factors) only ever reaches a format whose row takes them (int8).
using CpuLinearBuilder =
    std::function<std::unique_ptr<Linear>(const quant::FormatSpec& spec, const float* W, const float* bias, int64_t out,
                                          int64_t in, const std::string& tensor_name, const float* int8_smoothing)>;

struct BackendFormat {
  quant::Format format{};
  std::vector<KernelVariant> kernels;  // widest first
  CpuLinearBuilder build_cpu;          // the CPU's rows (the CUDA backend plans its layers itself)
  bool takes_smoothing = false;        // SmoothQuant factors (int8:sq=ALPHA) reach its builder
};

// The backend's row of `format`, or nullptr when it has no kernel for it.
[[nodiscard]] const BackendFormat* find_backend_format(Backend backend, quant::Format format);
[[nodiscard]] bool runs_on(Backend backend, quant::Format format);
// Every row of the backend, in quant's table order.
[[nodiscard]] std::vector<const BackendFormat*> backend_formats(Backend backend);

// The names of the formats the backend runs, in table order, joined by ", ": for help and errors.
[[nodiscard]] std::string backend_format_names(Backend backend);
// The precisions `qjoule bench` sweeps by default on the backend, comma-separated: the formats whose
// quant row is in the default sweep and that it runs ("fp32,bf16,int8,w8,int4,nf4" on the CPU).
[[nodiscard]] std::string default_sweep_precisions(Backend backend);

// Adds a format's CPU row at run time (a format registered with quant::register_format, say): the CPU
// backend then builds, names, sweeps and refuses it like its own. A row for a format it runs already is
// one line.
void register_cpu_format(BackendFormat row);

// Whether `path` matches `pattern` (`*` matches any text, everything else itself).
[[nodiscard]] bool kernel_path_matches(std::string_view pattern, std::string_view path);

}  // namespace qjoule::kernels
