// Thread control for every CPU kernel (oneDNN's Debian build and qjoule's own kernels share the
// OpenMP runtime, so one setting governs both).
#pragma once

namespace qjoule::kernels {

// Sets the number of threads CPU kernels use; 0 means all hardware threads.
void set_num_threads(int threads);
int num_threads();

}  // namespace qjoule::kernels
