// An exception thrown out of an OpenMP parallel region's body ends the process (std::terminate). Loops
// whose body can throw (a oneDNN primitive created on first use, a kernel-path check) run it through
// ParallelErrors: the first exception is kept, the other iterations still run, and rethrow() throws it
// in the calling thread after the region, where qjoule's one-line error handling sees it.
#pragma once

#include <exception>
#include <mutex>

namespace qjoule::kernels {

class ParallelErrors {
 public:
  template <class F>
  void run(F&& body) noexcept {
    try {
      body();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!first_) first_ = std::current_exception();
    }
  }
  void rethrow() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::mutex mutex_;
  std::exception_ptr first_;
};

}  // namespace qjoule::kernels
