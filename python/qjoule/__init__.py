"""qjoule from Python: honest energy windows and bench records for any PyTorch model.

The same C++ library as the `qjoule` command (its energy meter, its bench record and its results
store), bound with pybind11. docs/python.md has one example per function.

    import qjoule
    print(qjoule.sensors())
    with qjoule.Meter() as meter:
        with meter.window("forward") as w:
            model(x)
    print(w.joules, w.unavailable)
    qjoule.bench(lambda: model(x), name="torch-fp32", precision="fp32", batch=8, tokens=128, out="results")
"""

import json
import sys
import threading
import warnings
from contextlib import contextmanager

from . import _native

__all__ = ["Error", "Measurement", "Meter", "bench", "bench_decoder", "read_results", "record_failed", "sensors",
           "to_pandas"]

#: Every error qjoule raises: one line naming the argument, file or field, what was found and what
#: was expected (the CLI's messages).
Error = _native.Error


def sensors(*, gpus=(), power_meter=""):
    """Every energy sensor found and every source not found with its reason, as `qjoule sensors`.

    Returns {"found": [sensor, ...], "absent": [{"source": ..., "reason": ...}, ...]}.
    """
    return json.loads(_native.sensors_json([int(g) for g in gpus], str(power_meter)))


class Measurement(dict):
    """One window's result: the C++ Measurement as its JSON record (a dict), with shortcuts.

    Missing figures are None with the reason in `unavailable`, never 0.
    """

    @property
    def duration_s(self):
        return self["duration_s"]

    @property
    def joules(self):
        """Gross joules over the sensors that count in totals, or None (see `unavailable`)."""
        return self["total"]["energy_j"]

    @property
    def net_joules(self):
        """Joules net of the idle baseline (Meter(idle_s=...)), or None."""
        return self["total"]["net_energy_j"]

    @property
    def unavailable(self):
        """Why `joules` is None; None when it is measured."""
        if self.joules is not None:
            return None
        return self["total"]["unavailable"] or "no energy sensor"

    @property
    def sensors(self):
        """Per sensor: energy_j, mean_power_w, peak_power_w, samples, coverage, flags, ..."""
        return self["sensors"]

    @property
    def mean_watts(self):
        return None if self.joules is None or self.duration_s <= 0 else self.joules / self.duration_s

    @property
    def peak_watts(self):
        """The peak power of the one sensor that counts in the total; None with several (the peak of their
        sum was not sampled: see each sensor's peak_power_w), as the bench record does."""
        counted = [s for s in self.sensors if s["counts_in_total"]]
        return counted[0]["peak_power_w"] if len(counted) == 1 else None

    @property
    def samples(self):
        return sum(s["samples"] for s in self.sensors)

    @property
    def coverage(self):
        counted = [s["coverage"] for s in self.sensors if s["counts_in_total"]]
        return min(counted) if counted else None

    @property
    def warnings(self):
        """Validity flags, e.g. ["rapl:package-0: short_window"] (docs/energy.md, "Validity flags")."""
        return [f"{s['id']}: {flag}" for s in self.sensors for flag in s["flags"]]

    @property
    def valid(self):
        return bool(self["total"]["valid"])

    @property
    def method(self):
        if self.joules is None:
            return None
        return "measured: " + " + ".join(self["total"]["sensors"]) + (
            " (net of idle available)" if self["idle_subtracted"] else " (gross)")


class _WindowHandle:
    """What `with meter.window(name) as w:` gives: `w.measurement` (and its shortcuts) once the block ends."""

    def __init__(self, name):
        self.name = name
        self.measurement = None

    def _result(self):
        if self.measurement is None:
            raise Error(f"window '{self.name}' is still open: its figures exist once the with-block ends")
        return self.measurement

    def __getattr__(self, attribute):
        if attribute == "measurement":
            raise AttributeError(attribute)
        return getattr(self._result(), attribute)

    def __getitem__(self, key):
        return self._result()[key]


def _number(owner, name, value):
    """value as a float, or one-line qjoule.Error naming the argument (never Python's own conversion error)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Error(f"{owner}({name}={value!r}): expected a number")
    return float(value)


def _integer(owner, name, value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise Error(f"{owner}({name}=...): {value!r} is not an integer")
    return value


class Meter:
    """One sampler thread (C++, never takes the GIL) over every sensor found, and named windows.

    interval_ms: the sampling period; gpus: NVML indices to read (default: the job's GPUs);
    idle_s: seconds of idle power measured first (0: none), then every window also has net joules;
    power_meter: "file:PATH" or "cmd:COMMAND" (an external wall meter, as the CLI's --power-meter);
    sync: a callable run at each window edge before its timestamp (e.g. torch.cuda.synchronize).
    Windows may nest and overlap (distinct names), from any thread. Close it (or use `with`) to stop
    the sampler thread.
    """

    def __init__(self, interval_ms=10.0, gpus=(), idle_s=0.0, power_meter="", sync=None):
        if sync is not None and not callable(sync):
            raise Error(f"sync {sync!r} is not callable (e.g. torch.cuda.synchronize)")
        self._sync = sync
        if not isinstance(power_meter, str):
            raise Error(f"Meter(power_meter={power_meter!r}): expected a string, file:PATH or cmd:COMMAND")
        try:
            gpu_list = [_integer("Meter", "gpus", g) for g in gpus]
        except TypeError:
            raise Error(f"Meter(gpus={gpus!r}): expected a list of NVML indices") from None
        self._native = _native.NativeMeter(_number("Meter", "interval_ms", interval_ms), gpu_list,
                                           _number("Meter", "idle_s", idle_s), power_meter)
        self._open = {}
        self._lock = threading.Lock()

    # Lifetime.
    def close(self):
        """Cancels open windows and stops the sampler thread. Idempotent."""
        native = getattr(self, "_native", None)
        if native is not None:
            native.close()
        with self._lock:
            self._open.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    @property
    def found(self):
        """The sensors this meter reads and the sources it could not, with reasons."""
        return json.loads(self._native.found_json())

    @property
    def idle(self):
        """The idle baseline (Meter(idle_s=...)): duration and per-sensor watts, or None."""
        return json.loads(self._native.idle_json())

    # Windows.
    def begin_window(self, name):
        name = str(name)
        if self._sync is not None:
            self._sync()
        with self._lock:
            if name in self._open:
                raise Error(f"window '{name}' is already open on this meter (nested windows need distinct names)")
            self._open[name] = self._native.begin(name)

    def _take(self, name):
        with self._lock:
            handle = self._open.pop(name, None)
        if handle is None:
            raise Error(f"window '{name}' is not open on this meter")
        return handle

    def end_window(self, name):
        """Ends window `name` and returns its Measurement."""
        handle = self._take(str(name))
        if self._sync is not None:
            try:
                self._sync()
            except BaseException:
                self._native.cancel(handle)
                raise
        return Measurement(json.loads(self._native.end(handle)))

    def cancel_window(self, name):
        """Drops window `name` without a result."""
        self._native.cancel(self._take(str(name)))

    @contextmanager
    def window(self, name):
        """`with meter.window(name) as w:` — w.joules, w.unavailable, ... once the block ends.

        An exception inside the block (KeyboardInterrupt included) cancels the window and propagates.
        """
        handle = _WindowHandle(str(name))
        self.begin_window(name)
        try:
            yield handle
        except BaseException:
            try:
                self.cancel_window(name)
            finally:
                pass
            raise
        handle.measurement = self.end_window(name)


def bench(fn, *, name, precision, batch, tokens, out, warmup=2, min_time=2.0, min_iters=3, accuracy=None,
          fidelity=None, model_bytes=None, kernel_path="", device="cpu", model="callable", dataset="",
          threads=0, meter=None, engine=""):
    """Times `fn()` as `qjoule bench` times a configuration and appends one record to out/results.jsonl.

    batch: sequences per call; tokens: tokens per sequence (the record's `seq`). warmup calls first,
    then at least min_time seconds (and min_iters calls) inside an energy window around the timed calls
    only. accuracy: a fraction 0..1 or (correct, labelled); fidelity: a dict with any of top1_agreement,
    mean_kl, max_abs_dlogit, examples: the caller's figures, recorded as given and labelled so.
    model: a label or a checkpoint folder; with dataset, they must match the folder's sweep (a folder a
    `qjoule bench` wrote: its model and --dataset). A name already in the folder is not run again: its
    record is returned, as `--resume` skips it. The meter's sync (Meter(sync=...)) runs at the window's
    edges. engine: the engine that ran and its version ("torch 2.15.0"), the record's `engine`.
    Returns the record as a dict.
    """
    if not callable(fn):
        raise Error(f"fn {fn!r} is not callable")
    args = {"name": name, "precision": precision, "model": model, "dataset": dataset, "device": device,
            "kernel_path": kernel_path, "engine": engine, "threads": int(threads), "warmup": _count(warmup, "warmup"),
            "min_iters": _count(min_iters, "min_iters"), "min_time_s": float(min_time),
            "batch": _count(batch, "batch"), "seq": _count(tokens, "tokens"),
            "model_bytes": None if model_bytes is None else _count(model_bytes, "model_bytes")}
    _require_strings(args)
    if isinstance(accuracy, (tuple, list)):
        if len(accuracy) != 2:
            raise Error(f"accuracy {accuracy!r}: expected a fraction or (correct, labelled)")
        args["accuracy_correct"], args["accuracy_labelled"] = (_count(v, "accuracy") for v in accuracy)
    elif accuracy is not None:
        args["accuracy"] = float(accuracy)
    if fidelity is not None:
        if not isinstance(fidelity, dict):
            raise Error(f"fidelity {fidelity!r}: expected a dict of top1_agreement, mean_kl, max_abs_dlogit, examples")
        unknown = set(fidelity) - {"top1_agreement", "mean_kl", "max_abs_dlogit", "examples"}
        if unknown:
            raise Error(f"fidelity key(s) {sorted(unknown)}: expected top1_agreement, mean_kl, max_abs_dlogit, examples")
        for key in ("top1_agreement", "mean_kl", "max_abs_dlogit"):
            if fidelity.get(key) is not None:
                args["fidelity_" + key] = float(fidelity[key])
        args["fidelity_examples"] = _count(fidelity.get("examples", 0), "fidelity examples")
    text, skipped = _with_meter(meter, lambda m: _native.bench(fn, args, str(out), m._native, m._sync))
    record = json.loads(text)
    if skipped:
        print(f"qjoule.bench: {name}: already recorded in {out}, not run again", file=sys.stderr)
    return record


def _require_strings(args):
    for key in ("name", "precision", "model", "dataset", "device", "kernel_path", "engine"):
        if key in args and not isinstance(args[key], str):
            raise Error(f"{key} {args[key]!r} is not a string")


def _with_meter(meter, call):
    """call(meter), with the caller's meter or one of its own, closed when the call ends, however it ends."""
    own = meter is None
    chosen = Meter() if own else meter
    try:
        return call(chosen)
    finally:
        if own:
            chosen.close()


def bench_decoder(prefill, decode, *, name, precision, prompt_tokens, decode_tokens, out, engine, warmup=1,
                  min_time=2.0, min_iters=3, model_bytes=None, kernel_path="", device="cpu", model="callable",
                  threads=0, quality=None, notes=(), meter=None):
    """Times another engine's decoder as `qjoule bench` times one of qjoule's, in two phases with an
    energy window each, and appends one decoder record to out/results.jsonl (scripts/peers/ runs the peers
    this way).

    prefill(): one prefill of prompt_tokens tokens. decode(): decode_tokens greedy steps after the
    prompt (the caller cuts its cache back to the prompt, as `qjoule bench` does). Each phase: warmup
    calls, then at least min_time seconds and min_iters calls in its window. engine: who ran it and its
    version ("torchao 0.18.0"), required. quality: the caller's figures on a text, any of lm_text, lm_ctx,
    lm_stride, lm_scored_tokens, lm_ppl, lm_ppl_stderr, lm_base_ppl, lm_delta_ppl, lm_delta_ppl_stderr,
    lm_kl_mean, lm_kl_stderr, lm_same_top_rate, recorded as given and labelled so; notes: the caller's
    sentences ("decode: generate(M) minus a prefill"). A name already in the folder is not run again.
    Returns the record as a dict.
    """
    for fn, what in ((prefill, "prefill"), (decode, "decode")):
        if not callable(fn):
            raise Error(f"{what} {fn!r} is not callable")
    args = _decoder_args(name, precision, prompt_tokens, decode_tokens, engine, model, device, kernel_path, threads,
                         model_bytes, quality, notes)
    args.update({"warmup": _count(warmup, "warmup"), "min_iters": _count(min_iters, "min_iters"),
                 "min_time_s": float(min_time)})
    text, skipped = _with_meter(meter, lambda m: _native.bench_decoder(prefill, decode, args, str(out), m._native,
                                                                       m._sync))
    if skipped:
        print(f"qjoule.bench_decoder: {name}: already recorded in {out}, not run again", file=sys.stderr)
    return json.loads(text)


def record_failed(*, name, precision, engine, error, out, prompt_tokens=1, decode_tokens=0, model="callable",
                  device="cpu", kernel_path="", threads=0):
    """A run that could not be had (a peer that failed to install or to run) as a failed record in
    out/results.jsonl: status "failed", `error` its one line, nothing measured. Returns the record."""
    args = _decoder_args(name, precision, prompt_tokens, decode_tokens, engine, model, device, kernel_path, threads,
                         None, None, ())
    if not isinstance(error, str):
        raise Error(f"error {error!r} is not a string")
    text, _ = _native.record_failed(args, " ".join(error.split()), str(out))
    return json.loads(text)


def _decoder_args(name, precision, prompt_tokens, decode_tokens, engine, model, device, kernel_path, threads,
                  model_bytes, quality, notes):
    args = {"name": name, "precision": precision, "model": model, "dataset": "", "device": device,
            "kernel_path": kernel_path, "engine": engine, "threads": int(threads), "batch": 1,
            "seq": _count(prompt_tokens, "prompt_tokens"), "decode_tokens": _count(decode_tokens, "decode_tokens"),
            "model_bytes": None if model_bytes is None else _count(model_bytes, "model_bytes")}
    _require_strings(args)
    if quality is not None and not isinstance(quality, dict):
        raise Error(f"quality {quality!r}: expected a dict of lm_* figures")
    try:
        args["quality_json"] = json.dumps(quality or {}, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise Error(f"quality {quality!r}: {e}") from None
    if isinstance(notes, str) or not all(isinstance(n, str) for n in notes):
        raise Error(f"notes {notes!r}: expected a list of strings")
    args["notes"] = list(notes)
    return args


def _count(value, what):
    if isinstance(value, bool) or not isinstance(value, int):
        raise Error(f"{what} {value!r} is not a whole number")
    if value < 0:
        raise Error(f"{what} {value} is negative")
    return value


def read_results(path, strict=False):
    """The records of a results.jsonl (or of the folder holding it) as dicts, each read as `qjoule
    report` reads it (older schema versions come back as the current one). A line that is not a record
    (a torn last line of a killed sweep, say) is skipped with a warning naming it, as `qjoule report`
    skips it; strict=True raises qjoule.Error at the first such line instead."""
    result = json.loads(_native.read_results(str(path), bool(strict)))
    for line in result["skipped"]:
        warnings.warn(f"qjoule.read_results: skipped {line}", stacklevel=2)
    return result["records"]


# The field table's types (docs/bench-records.md): integers that may be null are pandas' Int64.
_INTEGER_COLUMNS = ("batch", "seq", "threads", "warmup_iters", "iters", "model_bytes", "fp32_bytes", "peak_rss_bytes",
                    "accuracy_correct", "accuracy_labelled", "fidelity_examples", "prefill_tokens", "decode_tokens",
                    "decode_iters", "lm_text_tokens", "lm_ctx", "lm_stride", "lm_scored_tokens", "schema_version")


# Each `bench --task` task's figures, as flat columns "task.<name>.<key>" beside the record's `tasks` dict:
# the same columns as results.csv's (bench/results_csv.h).
_TASK_FIGURES = tuple(_native.task_figures())


def to_pandas(path):
    """The records as a pandas DataFrame, one row a run (Debian's python3-pandas). A decoder sweep with
    `--task` also gets a column "task.<name>.<figure>" per task and figure (acc, delta_acc, ...)."""
    try:
        import pandas
    except ImportError as e:
        raise ImportError("qjoule.to_pandas needs pandas: install Debian's python3-pandas "
                          "(apt install python3-pandas)") from e
    records = read_results(path)
    for r in records:
        for name, t in (r.get("tasks") or {}).items():
            for key in _TASK_FIGURES:
                r[f"task.{name}.{key}"] = t.get(key)
    frame = pandas.DataFrame.from_records(records)
    for column in _INTEGER_COLUMNS:
        if column in frame.columns:
            frame[column] = frame[column].astype("Int64")
    if "start_time" in frame.columns:
        frame["start_time"] = pandas.to_datetime(frame["start_time"], utc=True)
    return frame
