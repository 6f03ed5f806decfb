#!/usr/bin/env python3
"""Compares two sets of `qjoule bench` records run by run, field by field, leaving out what is measured
(times, rates, energy, memory, roof fractions, notes, the host's load): what a refactoring must not
change. Paths under each set's own folder and repository are compared relative to them.

  scripts/compare-records.py OLD_DIR NEW_DIR   (each holding */results.jsonl, or a results.jsonl)

Prints each difference as RUN: FIELD: OLD -> NEW and exits 1 if there is one (or a run is missing). A
field the old records do not have at all and the new ones do (a field a change adds) is listed once as
added, not as a difference.
"""
import json
import pathlib
import re
import sys

MEASURED = re.compile(
    r"^(latency_.*|.*_per_s(_mean|_std)?|sequences_per_s|.*energy.*|.*_mj_per_token|.*_mj_.*|"
    r"(decode_)?roof_(fraction|gb_per_s|gflops|limit_gflops|bound)|measured_seconds|start_time|peak_rss_bytes|"
    r"notes|not_representative|calibration_seconds|decode_ms_per_token_mean)$")
ENVIRONMENT_MEASURED = {"host_capacity", "limits", "load_average", "cpu_mhz", "hostname", "git_commit", "git_dirty",
                        "started", "memory_available_bytes", "qjoule_commit", "machine_limits"}


def records(folder):
    folder = pathlib.Path(folder)
    files = [folder / "results.jsonl"] if (folder / "results.jsonl").exists() else sorted(folder.glob("*/results.jsonl"))
    out = {}
    for f in files:
        for number, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"compare-records: {f}:{number}: not a JSON record ({e.msg} at column {e.colno})")
            if not isinstance(r, dict):
                sys.exit(f"compare-records: {f}:{number}: a JSON {type(r).__name__}, expected a record (an object)")
            out[(f.parent.name, r.get("run_name"))] = r
    return out


def normalise(value, roots):
    if isinstance(value, str):
        for root, name in roots:
            value = value.replace(str(root), name)
        value = re.sub(r"in \d+(\.\d+)? s\b", "in N s", value)
        return value
    if isinstance(value, list):
        return [normalise(v, roots) for v in value]
    if isinstance(value, dict):
        return {k: normalise(v, roots) for k, v in value.items()}
    return value


def prepared(record, root):
    """The record as compared: its paths relative to its folder, the environment without what is measured,
    the model by its folder's name."""
    r = normalise(record, [(root, "OUT")])
    if isinstance(r.get("environment"), dict):
        r["environment"] = {k: v for k, v in r["environment"].items() if k not in ENVIRONMENT_MEASURED}
    if isinstance(r.get("model"), str):
        r["model"] = pathlib.Path(r["model"]).name
    return r


def differences(where, a, b):
    """(path, old, new) of each leaf that differs; measured keys are left out at every depth."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if MEASURED.match(k) or k in ("seconds", "duration_s"):
                continue
            out += differences(f"{where}.{k}" if where else k, a.get(k, "<absent>"), b.get(k, "<absent>"))
        return out
    return [] if a == b else [(where, a, b)]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    old_dir, new_dir = (pathlib.Path(a).resolve() for a in sys.argv[1:])
    old, new = records(old_dir), records(new_dir)
    if not old:
        sys.exit(f"compare-records: no results.jsonl under {old_dir}")
    problems = []
    added = {}  # field -> runs that have it now and had nothing before
    for key in sorted(set(old) | set(new), key=str):
        if key not in new or key not in old:
            problems.append(f"{key[0]}/{key[1]}: only in {'OLD' if key in old else 'NEW'}")
            continue
        for where, x, y in differences("", prepared(old[key], old_dir), prepared(new[key], new_dir)):
            if x == "<absent>":
                added[where] = added.get(where, 0) + 1
                continue
            problems.append(f"{key[0]}/{key[1]}: {where}: {json.dumps(x)[:300]} -> {json.dumps(y)[:300]}")
    for p in problems:
        print(p)
    for field, runs in sorted(added.items()):
        print(f"added: {field} (in {runs} of the new records, in none of the old)")
    print(f"compare-records: {len(old)} runs against {len(new)}, {len(problems)} difference(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
