"""qjoule.bench: records in the bench schema that `qjoule report` reads, resume by name, the caller's
figures labelled, interrupts that leave nothing torn, bad arguments as one line."""

import _thread
import json
import os
import subprocess
import time

import pytest

import qjoule

SOURCE_DIR = os.environ.get("QJOULE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def one_ms():
    time.sleep(0.001)


def quick(meter, out, **kwargs):
    args = dict(name="py-fp32", precision="fp32", batch=2, tokens=16, out=str(out), warmup=1, min_time=0.05,
                meter=meter)
    args.update(kwargs)
    return qjoule.bench(one_ms, **args)


def interrupting_at(call):
    """A 1 ms function that interrupts the main thread (KeyboardInterrupt) at its `call`-th call."""
    count = [0]

    def fn():
        count[0] += 1
        if count[0] == call:
            _thread.interrupt_main()
        time.sleep(0.001)
    return fn


def results_lines(out):
    path = os.path.join(out, "results.jsonl")
    with open(path) as f:
        return [line for line in f.read().split("\n") if line]


def test_record_validates_against_the_schema_and_report_reads_it(powercap_25w, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    out = tmp_path / "out"
    with qjoule.Meter(interval_ms=5) as meter:
        r = quick(meter, out, min_time=0.3, accuracy=(90, 100), fidelity={"top1_agreement": 0.98, "mean_kl": 0.01, "examples": 100},
                  model_bytes=1234, kernel_path="torch: aten::linear")
        quick(meter, out, name="py-int8", precision="int8")
    with open(os.path.join(SOURCE_DIR, "docs", "bench-record.schema.json")) as f:
        schema = json.load(f)
    lines = results_lines(out)
    assert len(lines) == 2
    for line in lines:
        jsonschema.validate(json.loads(line), schema)
    assert r["run_name"] == "py-fp32" and r["status"] == "ok"
    assert r["batch"] == 2 and r["seq"] == 16 and r["iters"] >= 3
    assert r["accuracy"] == 0.9 and r["model_bytes"] == 1234
    assert r["kernel_paths"] == ["caller: torch: aten::linear"]
    assert any("accuracy supplied by the caller" in n for n in r["notes"])
    assert any("fidelity supplied by the caller" in n for n in r["notes"])
    assert any("threads not given by the caller" in n for n in r["notes"])
    # The record carries the window's energy (its accuracy is test_meter's: here a short window, under load).
    assert r["energy_j"] == pytest.approx(25.0 * r["energy_window"]["duration_s"], rel=0.1)
    assert r["energy_method"].startswith("measured: rapl:package-0")
    assert r["latency_p50_ms"] >= 1.0
    summary = (out / "summary.md").read_text()  # the paper table, rewritten as `qjoule bench` leaves it
    assert "py-fp32" in summary and "py-int8" in summary
    assert "py-int8" in (out / "results.csv").read_text()
    report = tmp_path / "report.html"
    cli = os.environ.get("QJOULE_CLI")
    if not cli:
        pytest.skip("QJOULE_CLI is not set (run through ctest)")
    done = subprocess.run([cli, "report", str(out / "results.jsonl"), "-o", str(report)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    html = report.read_text()
    assert "py-fp32" in html and "py-int8" in html


def test_a_cpu_run_records_what_the_host_delivered(powercap_25w, tmp_path, monkeypatch):
    # No limits cached (an empty cache folder): the probes are kept, and the note says what was not compared.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("QJOULE_LIMITS_FILE", raising=False)
    with qjoule.Meter(interval_ms=5) as meter:
        r = quick(meter, tmp_path / "a", threads=1)
    host = r["environment"]["host_capacity"]
    assert host["threads"] == 1 and host["fp32_gflops_before"] > 0 and host["fp32_peak_gflops"] is None
    assert any("no machine limits cached for 1 threads" in n for n in r["notes"])
    # Limits whose FP32 peak is far below what the cores give: compared, and said to be low.
    limits = {"version": 3, "device": "cpu", "threads": 1, "read_gb_per_s": 10.0, "triad_gb_per_s": 10.0,
              "fp32_gflops": 1.0, "bf16_gflops": None, "int8_gops": None, "tf32_gflops": None, "fp16_gflops": None,
              "fp8_gflops": None, "amx_bf16_gflops": None, "amx_int8_gops": None, "unavailable": {}, "amx": "",
              "method": "a test's", "machine": "test", "measured_at": "2026-11-26T00:00:00Z", "measure_seconds": 0.0,
              "contention": ""}
    (tmp_path / "limits.json").write_text(json.dumps(limits))
    monkeypatch.setenv("QJOULE_LIMITS_FILE", str(tmp_path / "limits.json"))
    with qjoule.Meter(interval_ms=5) as meter:
        r = quick(meter, tmp_path / "b", threads=1)
    assert r["environment"]["host_capacity"]["fp32_peak_gflops"] == 1.0
    assert any("the FMA probes around this run read up to" in n for n in r["notes"])
    assert not any("no machine limits cached" in n for n in r["notes"])


def test_read_results_and_to_pandas(powercap_25w, tmp_path):
    out = tmp_path / "out"
    with qjoule.Meter(interval_ms=5) as meter:
        quick(meter, out)
    records = qjoule.read_results(out)
    assert [r["run_name"] for r in records] == ["py-fp32"]
    pandas = pytest.importorskip("pandas")
    frame = qjoule.to_pandas(out / "results.jsonl")
    assert list(frame["run_name"]) == ["py-fp32"]
    assert str(frame["batch"].dtype) == "Int64"
    assert isinstance(frame["start_time"].dtype, pandas.DatetimeTZDtype)


def test_to_pandas_flattens_each_tasks_figures(tmp_path):
    pytest.importorskip("pandas")
    with open(os.path.join(SOURCE_DIR, "tests", "fixtures", "report", "results.jsonl")) as f:
        record = json.loads(f.readline())
    record["tasks"] = {"arc": {"file": "arc.jsonl", "hash": "0" * 16, "shape": "ARC", "items": 4, "acc": 0.5,
                               "acc_stderr": 0.29, "acc_norm": 0.25, "acc_norm_stderr": 0.25, "truncated": 0,
                               "tokens_per_s": 100.0, "fp32_acc": 0.75, "fp32_acc_norm": 0.25, "delta_acc": -0.25,
                               "delta_acc_norm": 0.0, "changed_share": 0.25, "reference_unavailable": None}}
    (tmp_path / "results.jsonl").write_text(json.dumps(record) + "\n")
    frame = qjoule.to_pandas(tmp_path / "results.jsonl")
    assert frame["task.arc.acc"][0] == 0.5
    assert frame["task.arc.delta_acc"][0] == -0.25
    assert frame["task.arc.changed_share"][0] == 0.25
    assert frame["tasks"][0]["arc"]["shape"] == "ARC"


def test_a_recorded_name_is_skipped(powercap_25w, tmp_path, capsys):
    out = tmp_path / "out"
    calls = []
    with qjoule.Meter(interval_ms=5) as meter:
        first = quick(meter, out)
        again = qjoule.bench(lambda: calls.append(1), name="py-fp32", precision="fp32", batch=2, tokens=16,
                             out=str(out), meter=meter)
    assert calls == [] and again == first
    assert "already recorded" in capsys.readouterr().err
    assert len(results_lines(out)) == 1


def test_keyboard_interrupt_mid_bench_records_nothing(powercap_25w, tmp_path):
    out = tmp_path / "out"
    with qjoule.Meter(interval_ms=5) as meter:
        with pytest.raises(KeyboardInterrupt):
            qjoule.bench(interrupting_at(5), name="cut", precision="fp32", batch=1, tokens=1, out=str(out), min_time=10,
                         meter=meter)
        assert not os.path.exists(out / "results.jsonl") or results_lines(out) == []
        quick(meter, out)  # the folder and the meter still work
    assert [json.loads(l)["run_name"] for l in results_lines(out)] == ["py-fp32"]


def test_an_exception_in_fn_propagates_and_records_nothing(powercap_25w, tmp_path):
    out = tmp_path / "out"
    with qjoule.Meter(interval_ms=5) as meter:
        with pytest.raises(ZeroDivisionError):
            qjoule.bench(lambda: 1 / 0, name="boom", precision="fp32", batch=1, tokens=1, out=str(out), meter=meter)
    assert not os.path.exists(out / "results.jsonl") or results_lines(out) == []


def another_sweep(folder):
    os.makedirs(folder)
    with open(os.path.join(folder, "sweep-identity.json"), "w") as f:
        json.dump({"models": {"/models/other": "0123456789abcdef"}, "dataset": "dev.tsv"}, f)
    return folder


@pytest.mark.parametrize("kwargs, message", [
    ({"min_time": -1.0}, "min_time -1"),
    ({"name": ""}, "name is empty"),
    ({"precision": ""}, "precision is empty"),
    ({"batch": 0}, "batch is 0"),
    ({"tokens": -3}, "tokens -3 is negative"),
    ({"batch": 2.5}, "batch 2.5 is not a whole number"),
    ({"accuracy": 1.5}, r"accuracy 1.5 is outside \[0, 1\]"),
    ({"accuracy": (3, 2)}, "3 correct of 2 labelled"),
    ({"fidelity": {"kl": 0.1}}, r"fidelity key\(s\) \['kl'\]"),
    ({"device": "tpu"}, "device 'tpu' is not known"),
])
def test_bad_arguments_are_one_line(powercap_25w, tmp_path, kwargs, message):
    with qjoule.Meter() as meter:
        with pytest.raises(qjoule.Error, match=message) as e:
            quick(meter, tmp_path / "out", **kwargs)
    assert "\n" not in str(e.value)


def test_a_results_folder_of_another_sweep_is_refused(powercap_25w, tmp_path):
    out = another_sweep(str(tmp_path / "other"))
    with qjoule.Meter() as meter:
        with pytest.raises(qjoule.Error, match=r"this sweep scored dataset 'dev.tsv', this run ''") as e:
            quick(meter, out)
        assert "\n" not in str(e.value)
        with pytest.raises(qjoule.Error, match=r"this sweep measured model\(s\) .*/models/other.*, this run 'mine'"):
            quick(meter, out, model="mine", dataset="dev.tsv")
    assert not os.path.exists(os.path.join(out, "results.jsonl")) or results_lines(out) == []


def test_not_callable_is_refused(tmp_path):
    with pytest.raises(qjoule.Error, match="is not callable"):
        qjoule.bench(42, name="x", precision="fp32", batch=1, tokens=1, out=str(tmp_path))


def test_the_meters_sync_runs_at_the_bench_windows_edges(powercap_25w, tmp_path):
    calls = []
    with qjoule.Meter(interval_ms=5, sync=lambda: calls.append(1)) as meter:
        r = quick(meter, tmp_path / "out")
    assert len(calls) >= 2
    assert r["energy_window"]["synchronized_with"] == ["python sync (qjoule.Meter(sync=...))"]


def test_an_interrupted_bench_with_a_meter_of_its_own_leaves_no_thread_behind(powercap_25w, tmp_path):
    from conftest import native_threads
    before = native_threads()
    with pytest.raises(KeyboardInterrupt):
        qjoule.bench(interrupting_at(3), name="cut", precision="fp32", batch=1, tokens=1, out=str(tmp_path / "out"),
                     min_time=10)
    deadline = time.monotonic() + 2
    while native_threads() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert native_threads() == before


def test_read_results_of_a_broken_file_is_one_line(tmp_path):
    with pytest.raises(qjoule.Error, match="no such results file") as e:
        qjoule.read_results(tmp_path / "nothing-here")
    assert "\n" not in str(e.value)
    (tmp_path / "results.jsonl").write_text('{"not": "a record"}\n')
    with pytest.raises(qjoule.Error, match=r"results.jsonl:1: ") as e:
        qjoule.read_results(tmp_path, strict=True)
    assert "\n" not in str(e.value)
    (tmp_path / "results.jsonl").write_text("{torn")
    torn = r"results.jsonl:1: truncated last line \(no newline at the end, 5 bytes\): not JSON"
    with pytest.raises(qjoule.Error, match=torn):
        qjoule.read_results(tmp_path / "results.jsonl", strict=True)
    with pytest.raises(qjoule.Error, match=r"no valid run records in .*" + torn):  # nothing to return
        qjoule.read_results(tmp_path / "results.jsonl")
    (tmp_path / "results.jsonl").write_text("")  # a sweep that recorded nothing yet
    assert qjoule.read_results(tmp_path) == []


def test_read_results_skips_a_torn_line_and_says_which(powercap_25w, tmp_path):
    # As `qjoule report`: the records that are whole, and a warning naming the line that is not.
    out = tmp_path / "out"
    with qjoule.Meter(interval_ms=5) as meter:
        quick(meter, out)
    with open(out / "results.jsonl", "a") as f:
        f.write('{"schema_version": 1, "na')  # a sweep killed while appending
    torn = r"results.jsonl:2: truncated last line \(no newline at the end, 25 bytes\): not JSON"
    with pytest.warns(UserWarning, match=r"skipped .*" + torn):
        records = qjoule.read_results(out)
    assert [r["run_name"] for r in records] == ["py-fp32"]
    with pytest.raises(qjoule.Error, match=torn):
        qjoule.read_results(out, strict=True)


def test_to_pandas_without_pandas_names_the_package(tmp_path, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` now raises ImportError
    with pytest.raises(ImportError, match="python3-pandas"):
        qjoule.to_pandas(tmp_path)
