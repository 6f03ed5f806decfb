// What usually brings a flagged run's quality back, named in the table's "! ... drop" lists: formats
// and options the run's device has kernels for (on a GPU: no weight-only INT8, no SmoothQuant).
#pragma once

#include <string>

#include "qjoule/bench/run_record.h"

namespace qjoule::bench {

// An encoder's (or a decoder's agreement with FP32 on pseudo-random prompts) accuracy drop.
std::string what_to_try(const RunRecord& record);
// A decoder's perplexity increase on a text.
std::string what_to_try_decoder(const RunRecord& record);

}  // namespace qjoule::bench
