"""qjoule.bench_decoder and qjoule.record_failed: another engine's decoder timed in two phases under
qjoule's meter, as decoder records `qjoule report` reads beside qjoule's own (scripts/peers/ writes them),
the caller's quality figures labelled, a peer that could not run as a failed record, bad arguments as one
line."""

import json
import os
import time

import pytest

import qjoule

SOURCE_DIR = os.environ.get("QJOULE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def sleeping(ms):
    return lambda: time.sleep(ms / 1000)


def quick(meter, out, **kwargs):
    args = dict(name="peer-int4", precision="peer-int4", prompt_tokens=32, decode_tokens=8, out=str(out),
                engine="peer 1.0", warmup=1, min_time=0.05, meter=meter)
    args.update(kwargs)
    return qjoule.bench_decoder(sleeping(4), sleeping(8), **args)


def test_a_decoder_record_has_both_phases_the_engine_and_validates(powercap_25w, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    out = tmp_path / "out"
    quality = {"lm_text": "test.txt", "lm_ctx": 64, "lm_stride": 32, "lm_scored_tokens": 500, "lm_ppl": 12.5,
               "lm_base_ppl": 12.0, "lm_delta_ppl": 0.5, "lm_delta_ppl_stderr": 0.05, "lm_kl_mean": 0.02,
               "lm_kl_stderr": 0.001}
    with qjoule.Meter(interval_ms=5) as meter:
        r = quick(meter, out, quality=quality, notes=["decode: 8 steps of the peer's own cache"],
                  kernel_path="peer: int4 gemv", model_bytes=4096)
    with open(os.path.join(SOURCE_DIR, "docs", "bench-record.schema.json")) as f:
        jsonschema.validate(r, json.load(f))
    assert r["engine"] == "peer 1.0" and r["status"] == "ok"
    assert r["prefill_tokens"] == 32 and r["decode_tokens"] == 8 and r["decode_iters"] >= 3
    # 32 tokens in ~4 ms, 8 in ~8 ms: the two phases' own rates (sleep only ever runs long).
    assert 0 < r["prefill_tokens_per_s_mean"] <= 32 / 0.004 * 1.01
    assert 0 < r["decode_tokens_per_s_mean"] <= 8 / 0.008 * 1.01
    assert r["decode_ms_per_token_mean"] >= 1.0
    assert r["decode_energy_j"] is not None and r["decode_mj_per_token"] is not None
    assert r["energy_j"] is not None
    assert r["lm_ppl"] == 12.5 and r["lm_delta_ppl_stderr"] == 0.05 and r["lm_kl_stderr"] == 0.001
    assert any("lm_*: supplied by the caller (peer 1.0)" in n for n in r["notes"])
    assert "caller: decode: 8 steps of the peer's own cache" in r["notes"]
    assert r["kernel_paths"] == ["caller: peer: int4 gemv"] and r["model_bytes"] == 4096
    assert qjoule.read_results(out)[0]["engine"] == "peer 1.0"


def test_without_quality_the_record_says_why(powercap_25w, tmp_path):
    with qjoule.Meter() as meter:
        r = quick(meter, tmp_path / "out")
    assert r["lm_ppl"] is None and r["lm_unavailable"] == "the caller supplied no quality figures"


def test_a_peer_that_could_not_run_is_a_failed_record(tmp_path):
    out = tmp_path / "out"
    r = qjoule.record_failed(name="openvino-int4", precision="openvino-int4", engine="openvino 2026.4.1",
                             error="pip install failed:\n  no wheel for this Python", out=str(out),
                             prompt_tokens=128, decode_tokens=64)
    assert r["status"] == "failed" and r["error"] == "pip install failed: no wheel for this Python"
    assert r["engine"] == "openvino 2026.4.1" and r["energy_j"] is None and r["decode_tokens"] == 64
    [back] = qjoule.read_results(out)
    assert back["run_name"] == "openvino-int4" and back["status"] == "failed"


def test_a_failed_record_needs_a_name_a_record_can_have(tmp_path):
    with pytest.raises(qjoule.Error, match="name 'a/b' holds a path separator") as e:
        qjoule.record_failed(name="a/b", precision="p", engine="peer 1.0", error="x", out=str(tmp_path))
    assert "\n" not in str(e.value)
    with pytest.raises(qjoule.Error, match="precision is empty"):
        qjoule.record_failed(name="a", precision="", engine="peer 1.0", error="x", out=str(tmp_path))


@pytest.mark.parametrize("kwargs, message", [
    ({"engine": ""}, "engine is empty"),
    ({"decode_tokens": 0}, "decode_tokens is 0"),
    ({"prompt_tokens": 0}, "tokens is 0"),
    ({"quality": {"ppl": 3.0}}, "quality key 'ppl' is not one qjoule records"),
    ({"quality": {"lm_ppl": "low"}}, "quality lm_ppl is \"low\", expected a finite number"),
    ({"quality": {"lm_ctx": 1.5}}, "quality lm_ctx is 1.5, expected a whole number"),
    ({"quality": {"lm_ppl": float("nan")}}, "quality .*Out of range float values"),
    ({"quality": [1]}, r"quality \[1\]: expected a dict"),
    ({"notes": "one"}, "notes 'one': expected a list of strings"),
])
def test_bad_arguments_are_one_line(powercap_25w, tmp_path, kwargs, message):
    with qjoule.Meter() as meter:
        with pytest.raises(qjoule.Error, match=message) as e:
            quick(meter, tmp_path / "out", **kwargs)
    assert "\n" not in str(e.value)


def test_not_callable_is_refused(tmp_path):
    with pytest.raises(qjoule.Error, match="decode 3 is not callable"):
        qjoule.bench_decoder(sleeping(1), 3, name="x", precision="x", prompt_tokens=1, decode_tokens=1,
                             out=str(tmp_path), engine="peer 1.0")
