#include "qjoule/bench/bench_runner.h"

#include "bench/bench_runner_impl.h"

namespace qjoule::bench {

BenchRunner::BenchRunner(BenchOptions options, energy::EnergyMeter& meter)
    : impl_(std::make_unique<Impl>(std::move(options), meter)) {}
BenchRunner::~BenchRunner() = default;

RunRecord BenchRunner::run(const RunConfig& config) { return impl_->run(config); }

}  // namespace qjoule::bench
