#include "qjoule/kernels/threads.h"

#include <omp.h>

#include <thread>

namespace qjoule::kernels {

void set_num_threads(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  omp_set_num_threads(threads);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace qjoule::kernels
