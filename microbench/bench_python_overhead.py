#!/usr/bin/env python3
"""The Python package's overhead (issue: qjoule from Python), measured, not asserted in a timed test:

1. begin_window + end_window with no work between, median of 200 pairs, in microseconds;
2. qjoule.bench's p50 of a callable that spins for 1 ms against the same callable's median timed by a
   bare time.perf_counter_ns loop, in the same process, both ways round.

    PYTHONPATH=build/release/python python3 microbench/bench_python_overhead.py
"""

import statistics
import tempfile
import time

import qjoule


def spin_1ms():
    end = time.perf_counter_ns() + 1_000_000
    while time.perf_counter_ns() < end:
        pass


def bare_median(n=2000):
    samples = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        spin_1ms()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
    return statistics.median(samples)


def main():
    with qjoule.Meter() as meter:
        pairs = []
        for i in range(200):
            t0 = time.perf_counter_ns()
            meter.begin_window("empty")
            meter.end_window("empty")
            pairs.append((time.perf_counter_ns() - t0) / 1e3)
        sensors = ", ".join(s["id"] for s in meter.found["found"]) or "none"
        print(f"begin_window + end_window, nothing between: median {statistics.median(pairs):.1f} us, "
              f"p90 {sorted(pairs)[180]:.1f} us (200 pairs; sensors: {sensors})")
        with tempfile.TemporaryDirectory() as out:
            bare_before = bare_median()
            record = qjoule.bench(spin_1ms, name="spin-1ms", precision="none", batch=1, tokens=1, out=out,
                                  min_time=2.0, meter=meter)
            bare_after = bare_median()
        bare = (bare_before + bare_after) / 2
        p50 = record["latency_p50_ms"]
        print(f"1 ms callable: qjoule.bench p50 {p50:.4f} ms over {record['iters']} calls; bare perf_counter_ns "
              f"loop median {bare:.4f} ms (before {bare_before:.4f}, after {bare_after:.4f}); "
              f"ratio {p50 / bare:.4f}")


if __name__ == "__main__":
    main()
