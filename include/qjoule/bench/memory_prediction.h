// The peak resident memory a run will reach, predicted before it runs: `qjoule bench --dry-run`
// prints it for each configuration, and a sweep skips a configuration predicted not to fit in the
// machine's available memory (one line saying so) instead of being killed mid-sweep.
//
// Method ("exact model bytes + sized buffers"): each distinct Linear (its format as the precision
// policy resolves it, its shape, its bias) is built once from synthetic weights and its bytes_held()
// counted for every Linear of that kind, so model_bytes is what the run will hold; the embeddings and
// norms are FP32. Building a Linear holds, for that Linear only, its FP32 weights and the stored
// tensor's mapped pages (build_transient_bytes, the largest such). The run then holds the KV cache for
// seq + decode tokens, the activations of a seq-token prefill and per-thread scratch (run_bytes). The
// baseline is the process's resident memory before the run (code, libraries, the reference logits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "qjoule/bench/run_config.h"

namespace qjoule::bench {

struct MemoryPrediction {
  std::string unavailable;  // why there is no prediction (then the figures below are 0)
  std::uint64_t baseline_bytes = 0;
  std::uint64_t held_bytes = 0;  // what the sweep holds for the run beforehand (an encoder's FP32 parameters)
  std::uint64_t model_bytes = 0;
  std::uint64_t build_transient_bytes = 0;
  std::uint64_t run_bytes = 0;
  std::uint64_t peak_bytes() const {
    return baseline_bytes + held_bytes + model_bytes + build_transient_bytes + run_bytes;
  }
};

inline constexpr const char* kMemoryPredictionMethod = "exact model bytes + sized buffers";

// Encoder classifiers too: their sweep holds the FP32 parameters for every run (held_bytes),
// building copies them (build_transient_bytes: what that copy adds over the run), and the run holds one
// CPU pass's activations; a pre-quantized encoder's prediction is unavailable, saying so. baseline_bytes: the process's resident memory now, as the
// caller measured it. A configuration the model cannot run (a format that does not fit a shape) fails
// as the run would, with its one-line error.
MemoryPrediction predict_peak_memory(const RunConfig& config, std::size_t decode_tokens, std::uint64_t baseline_bytes);

}  // namespace qjoule::bench
