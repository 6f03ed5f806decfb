"""scripts/ncu-kernel-table.py: Nsight Compute's per-kernel times summed by kernel; bad input is one line."""

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(os.environ.get("QJOULE_SOURCE_DIR", Path(__file__).resolve().parents[2])) / "scripts" / "ncu-kernel-table.py"
HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"\n')


def row(kernel, value, unit="ns"):
    return (f'"0","1","qjoule","h","{kernel}","1","7","(128, 1, 1)","(256, 1, 1)","0","9.0","x",'
            f'"gpu__time_duration.sum","{unit}","{value}"\n')


def run(tmp_path, text, forwards="auto"):
    csv = tmp_path / "ncu.csv"
    csv.write_text("==PROF== Connected to process 1\n" + text)
    return subprocess.run([sys.executable, str(SCRIPT), str(csv), forwards], capture_output=True, text=True)


GEMV = ("void qjoule::kernels::cuda_detail::<unnamed>::gemv_split_kernel<qjoule::kernels::cuda_detail::<unnamed>::"
        "Int4Format<128, false>, 1>(qjoule::kernels::cuda_detail::<unnamed>::Planar, const float *)")
EMBED = "void qjoule::kernels::cuda_detail::<unnamed>::embedding_sum_kernel(const int *)"


def test_sums_by_kernel_per_forward(tmp_path):
    text = HEADER + row(GEMV, "12,000") + row(GEMV, "14,000") + row(EMBED, "3", "usecond") + row(EMBED, "3,000")
    r = run(tmp_path, text)
    assert r.returncode == 0, r.stderr
    assert "4 kernel launches, 32.0 us of GPU time over 2 forwards: 2.0 kernels and 16.0 us a forward" in r.stdout
    assert "| `gemv_split_kernel<Int4Format<128, false>, 1>` | 2 | 1.0 | 13.00 | 13.0 | 81.2% |" in r.stdout
    assert "| `embedding_sum_kernel` | 2 | 1.0 | 3.00 | 3.0 | 18.8% |" in r.stdout


def test_bad_input_is_one_line(tmp_path):
    cases = [
        (HEADER + row(GEMV, "12"), "0", 2, "FORWARDS '0': expected a positive integer or auto"),
        (HEADER + row(GEMV, "12"), "two", 2, "FORWARDS 'two': expected a positive integer or auto"),
        (HEADER + row(GEMV, "12", "cycle"), "1", 2, "CSV row 2: time unit 'cycle', expected one of ns,"),
        (HEADER + row(GEMV, "n/a"), "1", 2, "CSV row 2: metric value 'n/a' is not a number"),
        (HEADER, "1", 1, "no gpu__time_duration.sum rows in"),
        (HEADER + row(GEMV, "12"), "auto", 1, "FORWARDS auto, but no embedding_sum_kernel ran"),
    ]
    for text, forwards, code, message in cases:
        r = run(tmp_path, text, forwards)
        assert r.returncode == code, (message, r.stdout, r.stderr)
        assert message in r.stderr
        assert r.stderr.count("\n") == 1, r.stderr
        assert "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "none.csv"), "1"], capture_output=True, text=True)
    assert r.returncode == 2 and "none.csv: cannot read the file (No such file or directory)" in r.stderr
