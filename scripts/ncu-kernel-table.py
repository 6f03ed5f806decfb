#!/usr/bin/env python3
"""Sums Nsight Compute's per-kernel GPU times by kernel (scripts/gpu-decode-check.sh).

usage: ncu-kernel-table.py NCU.csv FORWARDS

NCU.csv is `ncu --csv --print-units base --metrics gpu__time_duration.sum` output (other lines are
skipped); FORWARDS is how many forwards of the model ran, so that each kernel's launches and time are
also given per forward, or `auto`: the launches of the decoder's embedding kernel (one a forward).
Prints a Markdown table, the costliest kernel first. A file it cannot read, a FORWARDS that is not a
positive integer or `auto`, a metric value that is no number or a time unit it does not know is one
line on stderr (exit 2; no timing rows at all: exit 1), never a figure in an assumed unit.
"""
import csv
import re
import statistics
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


NS_PER_UNIT = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}


class BadInput(Exception):
    pass


def read_totals(path: str) -> dict[str, list[float]]:
    """Kernel name -> its launches' GPU times in ns."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            rows = [line for line in f if line.startswith('"')]
    except OSError as e:
        raise BadInput(f"{path}: cannot read the file ({e.strerror})") from None
    totals: dict[str, list[float]] = {}
    for number, r in enumerate(csv.DictReader(rows), start=2):  # row 1 is the header
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = r.get("Metric Unit") or "ns"
        if unit not in NS_PER_UNIT:
            raise BadInput(f"{path}: CSV row {number}: time unit '{unit}', expected one of {', '.join(NS_PER_UNIT)}")
        try:
            value = float((r.get("Metric Value") or "").replace(",", ""))
        except ValueError:
            raise BadInput(f"{path}: CSV row {number}: metric value '{r.get('Metric Value')}' is not a number") from None
        totals.setdefault(short_name(r.get("Kernel Name") or "?"), []).append(value * NS_PER_UNIT[unit])
    return totals


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    if sys.argv[2] != "auto" and not (sys.argv[2].isdigit() and int(sys.argv[2]) > 0):
        print(f"ncu-kernel-table: FORWARDS '{sys.argv[2]}': expected a positive integer or auto", file=sys.stderr)
        return 2
    try:
        totals = read_totals(sys.argv[1])
    except BadInput as e:
        print(f"ncu-kernel-table: {e}", file=sys.stderr)
        return 2
    if not totals:
        print("ncu-kernel-table: no gpu__time_duration.sum rows in", sys.argv[1], file=sys.stderr)
        return 1
    if sys.argv[2] == "auto":
        forwards = sum(len(v) for k, v in totals.items() if "embedding_sum_kernel" in k)
        if forwards == 0:
            print("ncu-kernel-table: FORWARDS auto, but no embedding_sum_kernel ran", file=sys.stderr)
            return 1
    else:
        forwards = int(sys.argv[2])
    all_ns = sum(sum(v) for v in totals.values())
    launches = sum(len(v) for v in totals.values())
    print(f"{launches} kernel launches, {all_ns / 1e3:.1f} us of GPU time over {forwards} forwards: "
          f"{launches / forwards:.1f} kernels and {all_ns / 1e3 / forwards:.1f} us a forward")
    print()
    print("| kernel | launches | a forward | us each (median) | us a forward | share |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, ns in sorted(totals.items(), key=lambda kv: -sum(kv[1])):
        median = statistics.median(ns)
        print(f"| `{name}` | {len(ns)} | {len(ns) / forwards:.1f} | {median / 1e3:.2f} | "
              f"{sum(ns) / 1e3 / forwards:.1f} | {sum(ns) / all_ns:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
