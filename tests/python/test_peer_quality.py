"""scripts/peers/peer_common.py, the peers' quality: its reader of a KL base (`qjoule ppl --save-kl-base`)
and its perplexity, ΔPPL with the paired standard error, KL and same-top definitions equal `qjoule ppl`'s
on the same tokens and windows (the log-probabilities of an int4 run, saved as a second base, stand in for
a peer's model)."""

import json
import os
import subprocess
import sys

import pytest

SOURCE_DIR = os.environ.get("QJOULE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE_DIR, "scripts", "peers"))
np = pytest.importorskip("numpy")
import peer_common as common  # noqa: E402 (after the path above)

MODEL = os.path.join(SOURCE_DIR, "tests", "fixtures", "decoders", "trained-llama")


def ppl(tmp_path, name, *extra):
    out = tmp_path / f"{name}.json"
    subprocess.run([os.environ["QJOULE_CLI"], "ppl", "--model", MODEL, "--text", str(tmp_path / "text.txt"),
                    "--max-tokens", "300", "--ctx", "64", "--stride", "24", "--threads", "1", "--json", str(out),
                    *extra], check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


@pytest.fixture
def bases(tmp_path):
    line = "The quick brown fox jumps over the lazy dog. A model reads text and predicts the next word.\n"
    (tmp_path / "text.txt").write_text(line * 40)
    fp32 = ppl(tmp_path, "fp32", "--save-kl-base", str(tmp_path / "fp32.qjkl"))
    int4 = ppl(tmp_path, "int4", "--precision", "int4:g=32:sym", "--kl-base", str(tmp_path / "fp32.qjkl"),
               "--save-kl-base", str(tmp_path / "int4.qjkl"))
    return common.KlBase(str(tmp_path / "fp32.qjkl")), common.KlBase(str(tmp_path / "int4.qjkl")), fp32, int4


def rows_of(saved):
    """log_probs_of for quality_on from a saved base: its scored rows, in the windows' order."""
    k = [0]

    def log_probs_of(window):
        begin, end, score_from = saved.windows()[log_probs_of.index]
        log_probs_of.index += 1
        rows = np.zeros((len(window), saved.vocab), dtype=np.float32)
        for t in range(score_from, end):
            rows[t - 1 - begin] = saved.log_probs[k[0]].astype(np.float32)
            k[0] += 1
        return rows
    log_probs_of.index = 0
    return log_probs_of


def test_the_reader_and_windows_are_qjoules(bases, tmp_path):
    base, _, fp32, _ = bases
    assert base.vocab == 610 and base.ctx == 64 and base.stride == 24 and len(base.ids) == 300
    assert len(base.windows()) == fp32["windows"] and base.scored == fp32["scored_tokens"]
    assert sum(end - score_from for _, end, score_from in base.windows()) == base.scored
    assert common.base_text(base.path) == str(tmp_path / "text.txt")  # from the base's identity


def test_quality_equals_qjoule_ppl_on_the_same_tokens(bases):
    base, int4_rows, _, int4 = bases
    q = common.quality_on(base, rows_of(int4_rows))
    assert "lm_text" not in q, "no text named: none recorded (never the base's own path)"
    # The peer's log-probabilities here are int4's rounded to FP16, as the base's are: within that rounding.
    assert q["lm_scored_tokens"] == int4["scored_tokens"]
    assert q["lm_ppl"] == pytest.approx(int4["ppl"], rel=2e-3)
    assert q["lm_ppl_stderr"] == pytest.approx(int4["ppl_stderr"], rel=5e-3)
    assert q["lm_base_ppl"] == pytest.approx(int4["kl"]["base_ppl"], rel=1e-12)
    assert q["lm_delta_ppl"] == pytest.approx(int4["kl"]["delta_ppl"], abs=2e-3 * int4["ppl"])
    assert q["lm_delta_ppl_stderr"] == pytest.approx(int4["kl"]["delta_ppl_stderr"], rel=2e-2)
    assert q["lm_kl_mean"] == pytest.approx(int4["kl"]["mean_kl"], abs=2e-3)
    assert q["lm_kl_stderr"] == pytest.approx(int4["kl"]["kl_stderr"], rel=5e-2)
    assert q["lm_same_top_rate"] == pytest.approx(int4["kl"]["top1_agreement"], abs=0.01)


def test_the_base_against_itself_differs_by_nothing(bases):
    base, _, _, _ = bases
    q = common.quality_on(base, rows_of(base))
    assert q["lm_kl_mean"] == pytest.approx(0.0, abs=1e-12) and q["lm_same_top_rate"] == 1.0
    assert q["lm_delta_ppl"] == pytest.approx(0.0, abs=1e-3 * q["lm_ppl"])


def test_a_file_that_is_no_kl_base_is_one_line(tmp_path):
    path = tmp_path / "x.qjkl"
    path.write_bytes(b"NOTABASE" + bytes(60))
    with pytest.raises(ValueError, match=r"magic b'NOTABASE', expected QJKLBAS2 \(a qjoule KL base\)"):
        common.KlBase(str(path))
    path.write_bytes(b"QJKL")
    with pytest.raises(ValueError, match="4 bytes, shorter than a KL base's header"):
        common.KlBase(str(path))
