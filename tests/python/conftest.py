"""Shared fixtures of the Python package's tests: a fake powercap tree whose package-0 counter a driver
thread advances at a known wattage (the layout of /sys/class/powercap, written with write + rename so
that no reader sees half a number), selected through QJOULE_POWERCAP_ROOT."""

import os
import threading
import time

import pytest


class FakePowercap:
    def __init__(self, root, watts):
        self.root = root
        self.watts = watts
        self.zone = os.path.join(root, "intel-rapl:0")
        os.makedirs(self.zone)
        self._write("name", "package-0\n")
        self._write("max_energy_range_uj", "262143328850\n")
        self._write("energy_uj", "0\n")
        self._stop = threading.Event()
        self._start = time.monotonic()
        self.max_gap_s = 0.0
        self._thread = threading.Thread(target=self._drive, daemon=True)
        self._thread.start()

    def _write(self, name, text):
        tmp = os.path.join(self.zone, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(self.zone, name))

    def _drive(self):
        last = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            uj = int(self.watts * (now - self._start) * 1e6)
            self._write("energy_uj", f"{uj}\n")
            self.max_gap_s = max(self.max_gap_s, time.monotonic() - last)
            last = time.monotonic()
            time.sleep(0.001)

    def stale_joules(self):
        """How far a window's energy may be off because the counter was not written: watts x the longest
        gap between two writes (a host that stalls this thread; the meter cannot read what was not written)."""
        return self.watts * self.max_gap_s

    def stop(self):
        self._stop.set()
        self._thread.join()


@pytest.fixture
def powercap_25w(tmp_path, monkeypatch):
    fake = FakePowercap(str(tmp_path / "powercap"), 25.0)
    monkeypatch.setenv("QJOULE_POWERCAP_ROOT", fake.root)
    # Only the fake counter: no perf PMU, no NVML, no meter.
    monkeypatch.setenv("QJOULE_PERF_POWER_ROOT", str(tmp_path / "no-perf-power"))
    monkeypatch.setenv("QJOULE_NVML_LIB", str(tmp_path / "no-libnvidia-ml.so"))
    yield fake
    fake.stop()


def native_threads():
    """Threads of this process (the meter's sampler is one of them)."""
    return len(os.listdir("/proc/self/task"))
