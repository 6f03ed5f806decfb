// Each backend's rows (qjoule/kernels/backend_registry.h): the built-in ones of kernels/cpu and
// kernels/cuda, and the CPU rows registered at run time.
#include "qjoule/kernels/backend_registry.h"

#include <deque>
#include <mutex>

#include <fmt/format.h>

#include "kernels/cpu/backend_rows.h"
#include "qjoule/error.h"
#include "qjoule/quant/layer_policy.h"

namespace qjoule::kernels {
namespace {

struct Registry {
  std::mutex mutex;
  std::deque<BackendFormat> cpu, cuda;  // a deque: rows stay where they are as rows are added
  Registry() {
    for (auto& r : detail::cpu_builtin_formats()) cpu.push_back(std::move(r));
    for (auto& r : detail::cuda_builtin_formats()) cuda.push_back(std::move(r));
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

std::deque<BackendFormat>& rows_of(Backend backend) {
  return backend == Backend::cpu ? registry().cpu : registry().cuda;
}

}  // namespace

std::string_view name(Backend backend) { return backend == Backend::cpu ? "cpu" : "cuda"; }

// The row of `format` among `rows`, or nullptr; the caller holds the registry's mutex.
const BackendFormat* find_locked(const std::deque<BackendFormat>& rows, quant::Format format) {
  for (const auto& row : rows) {
    if (row.format == format) return &row;
  }
  return nullptr;
}

const BackendFormat* find_backend_format(Backend backend, quant::Format format) {
  const std::lock_guard<std::mutex> lock(registry().mutex);
  return find_locked(rows_of(backend), format);
}

bool runs_on(Backend backend, quant::Format format) { return find_backend_format(backend, format) != nullptr; }

std::vector<const BackendFormat*> backend_formats(Backend backend) {
  std::vector<const BackendFormat*> out;
  for (const auto& t : quant::all_formats()) {
    if (const BackendFormat* row = find_backend_format(backend, t.format)) out.push_back(row);
  }
  return out;
}

std::string backend_format_names(Backend backend) {
  std::string out;
  for (const BackendFormat* row : backend_formats(backend))
    out += fmt::format("{}{}", out.empty() ? "" : ", ", quant::name(row->format));
  return out;
}

std::string default_sweep_precisions(Backend backend) {
  std::string out;
  for (const BackendFormat* row : backend_formats(backend)) {
    if (!quant::traits(row->format).in_default_sweep) continue;
    out += fmt::format("{}{}", out.empty() ? "" : ",", quant::name(row->format));
  }
  return out;
}

void register_cpu_format(BackendFormat row) {
  const quant::FormatTraits& t = quant::traits(row.format);  // one line for a format quant does not know
  if (!row.build_cpu) fail("format '{}': a CPU row needs the function that builds its Linear", t.name);
  if (row.kernels.empty()) fail("format '{}': a CPU row needs its kernels and their kernel paths", t.name);
  const std::lock_guard<std::mutex> lock(registry().mutex);  // the check and the insertion at once
  if (find_locked(registry().cpu, row.format) != nullptr)
    fail("format '{}': the CPU backend runs it already; expected a new one", t.name);
  registry().cpu.push_back(std::move(row));
}

bool kernel_path_matches(std::string_view pattern, std::string_view path) {
  return quant::glob_match(pattern, path);  // the layer policy's globs: `*` any text (`?` one character)
}

}  // namespace qjoule::kernels
