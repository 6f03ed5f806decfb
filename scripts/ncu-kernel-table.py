#!/usr/bin/env python3
"""Sums Nsight Compute's per-kernel GPU times by kernel (scripts/gpu-profile-decode.sh).

usage: ncu-kernel-table.py NCU.csv FORWARDS

NCU.csv is `ncu --csv --print-units base --metrics gpu__time_duration.sum` output (other lines are
skipped); FORWARDS is how many forwards of the model ran, so that each kernel's launches and time are
also given per forward, or `auto`: the launches of the decoder's embedding kernel (one a forward).
Prints a Markdown table, the costliest kernel first.
"""
import csv
import re
import sys


def short_name(name: str) -> str:
    # "void qjoule::kernels::cuda_detail::(anonymous namespace)::gemv_kernel<...>(...)" -> "gemv_kernel<...>"
    name = re.sub(r"\(anonymous namespace\)::|<unnamed>::|\bqjoule::kernels::cuda_detail::", "", name)
    depth, cut = 0, len(name)
    for i, c in enumerate(name):  # drop the argument list (the first '(' outside template brackets)
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0:
            cut = i
            break
    name = name[:cut]
    name = re.sub(r"^void ", "", name)
    return name[:90]


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    rows = [line for line in open(sys.argv[1], encoding="utf-8", errors="replace") if line.startswith('"')]
    totals: dict[str, list[float]] = {}
    for r in csv.DictReader(rows):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "ns")
        ns = value * {"ns": 1.0, "nsecond": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6}.get(unit, 1.0)
        totals.setdefault(short_name(r["Kernel Name"]), []).append(ns)
    if not totals:
        print("ncu-kernel-table: no gpu__time_duration.sum rows in", sys.argv[1], file=sys.stderr)
        return 1
    if sys.argv[2] == "auto":
        forwards = sum(len(v) for k, v in totals.items() if "embedding_sum_kernel" in k)
        if forwards == 0:
            print("ncu-kernel-table: FORWARDS auto, but no embedding_sum_kernel ran", file=sys.stderr)
            return 1
    else:
        forwards = max(1, int(sys.argv[2]))
    all_ns = sum(sum(v) for v in totals.values())
    launches = sum(len(v) for v in totals.values())
    print(f"{launches} kernel launches, {all_ns / 1e3:.1f} us of GPU time over {forwards} forwards: "
          f"{launches / forwards:.1f} kernels and {all_ns / 1e3 / forwards:.1f} us a forward")
    print()
    print("| kernel | launches | a forward | us each (median) | us a forward | share |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, ns in sorted(totals.items(), key=lambda kv: -sum(kv[1])):
        ns_sorted = sorted(ns)
        median = ns_sorted[len(ns_sorted) // 2]
        print(f"| `{name}` | {len(ns)} | {len(ns) / forwards:.1f} | {median / 1e3:.2f} | "
              f"{sum(ns) / 1e3 / forwards:.1f} | {sum(ns) / all_ns:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
