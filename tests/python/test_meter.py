"""qjoule.Meter and qjoule.sensors: windows over a fake 25 W counter, threads, interrupts, bad arguments."""

import _thread
import threading
import time

import pytest

import qjoule
from conftest import native_threads


def test_sensors_lists_found_and_absent_with_reasons(powercap_25w):
    found = qjoule.sensors()
    assert [s["id"] for s in found["found"]] == ["rapl:package-0"]
    assert found["absent"], "every source not found is listed"
    for absent in found["absent"]:
        assert absent["source"] and absent["reason"]


def test_window_measures_25_watts_within_3_percent(powercap_25w):
    with qjoule.Meter(interval_ms=10) as meter:
        with meter.window("sleep") as w:
            time.sleep(2.0)
    assert w.unavailable is None
    assert w.joules == pytest.approx(25.0 * w.duration_s, rel=0.03, abs=powercap_25w.stale_joules())
    assert w.mean_watts == pytest.approx(25.0, rel=0.03, abs=powercap_25w.stale_joules() / w.duration_s)
    assert w.peak_watts is not None and w.peak_watts == w["sensors"][0]["peak_power_w"]  # the one sensor that counts
    assert w.samples > 50 and w.coverage > 0.95
    assert w.method.startswith("measured: rapl:package-0")
    assert w["sensors"][0]["id"] == "rapl:package-0"


def test_begin_end_nest_and_overlap(powercap_25w):
    with qjoule.Meter(interval_ms=5) as meter:
        meter.begin_window("outer")
        meter.begin_window("inner")
        time.sleep(0.2)
        inner = meter.end_window("inner")
        time.sleep(0.2)
        outer = meter.end_window("outer")
    assert outer.duration_s > inner.duration_s
    assert outer.joules > inner.joules
    assert inner.joules == pytest.approx(25.0 * inner.duration_s, rel=0.05, abs=powercap_25w.stale_joules())


def test_idle_baseline_gives_net_joules(powercap_25w):
    with qjoule.Meter(interval_ms=5, idle_s=0.3) as meter:
        assert meter.idle["sensors"][0]["power_w"] == pytest.approx(25.0, rel=0.05)
        with meter.window("w") as w:
            time.sleep(0.3)
    # All of the 25 W is idle power here: net of idle is about 0.
    assert abs(w.net_joules) < 0.05 * w.joules


def test_sync_runs_at_both_edges(powercap_25w):
    calls = []
    with qjoule.Meter(sync=lambda: calls.append(time.monotonic())) as meter:
        with meter.window("w"):
            pass
    assert len(calls) == 2


def test_four_threads_with_their_own_windows(powercap_25w):
    results = {}
    errors = []
    with qjoule.Meter(interval_ms=5) as meter:
        def work(i):
            try:
                with meter.window(f"thread-{i}") as w:
                    time.sleep(0.3 + 0.05 * i)
                results[i] = w.measurement
            except BaseException as e:  # reported below
                errors.append(e)
        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    assert sorted(results) == [0, 1, 2, 3]
    for m in results.values():
        assert m.joules == pytest.approx(25.0 * m.duration_s, rel=0.05, abs=powercap_25w.stale_joules())


def test_keyboard_interrupt_mid_window_leaves_no_thread_behind(powercap_25w):
    before = native_threads()
    with pytest.raises(KeyboardInterrupt):
        with qjoule.Meter(interval_ms=5) as meter:
            with meter.window("interrupted"):
                _thread.interrupt_main()
                time.sleep(5)  # interrupted at once
    assert meter._open == {}
    deadline = time.monotonic() + 2
    while native_threads() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert native_threads() == before


def test_a_window_is_read_only_after_its_block(powercap_25w):
    with qjoule.Meter() as meter:
        with meter.window("w") as w:
            with pytest.raises(qjoule.Error, match="still open"):
                w.joules


@pytest.mark.parametrize("kwargs, message", [
    ({"interval_ms": 0}, "interval_ms 0"),
    ({"idle_s": -1}, "idle_s -1"),
    ({"power_meter": "serial:/dev/ttyUSB0"}, "serial:/dev/ttyUSB0"),
    ({"sync": 3}, "sync 3 is not callable"),
    # Types: the argument named, never Python's own "could not convert string to float".
    ({"interval_ms": "fast"}, r"Meter\(interval_ms='fast'\): expected a number"),
    ({"idle_s": None}, r"Meter\(idle_s=None\): expected a number"),
    ({"gpus": 0}, r"Meter\(gpus=0\): expected a list of NVML indices"),
    ({"gpus": ["0"]}, r"Meter\(gpus=\.\.\.\): '0' is not an integer"),
    ({"power_meter": 5}, r"Meter\(power_meter=5\): expected a string"),
])
def test_bad_meter_arguments_are_one_line(powercap_25w, kwargs, message):
    with pytest.raises(qjoule.Error, match=message) as e:
        qjoule.Meter(**kwargs)
    assert "\n" not in str(e.value)


def test_window_errors_are_one_line(powercap_25w):
    with qjoule.Meter() as meter:
        meter.begin_window("a")
        with pytest.raises(qjoule.Error, match="'a' is already open"):
            meter.begin_window("a")
        with pytest.raises(qjoule.Error, match="'b' is not open"):
            meter.end_window("b")
        meter.cancel_window("a")
        with pytest.raises(qjoule.Error, match="'a' is not open"):
            meter.end_window("a")
