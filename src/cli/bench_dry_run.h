// `qjoule bench --dry-run`: each configuration's predicted peak memory (qjoule/bench/memory_prediction.h)
// and whether it fits in the memory available now, without running anything.
#pragma once

#include <cstddef>
#include <vector>

#include "qjoule/bench/run_config.h"

namespace qjoule::cli {

// Prints one line per configuration.
void print_bench_dry_run(const std::vector<bench::RunConfig>& configs, std::size_t decode_tokens);

}  // namespace qjoule::cli
