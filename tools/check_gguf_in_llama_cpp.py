#!/usr/bin/env python3
"""Checks qjoule's GGUF export where it matters: llama.cpp itself reads the file and its logits are
compared with the reference logits of the checkpoint it came from (transformers' FP32 logits in a
fixture's reference.safetensors, tools/make_hf_decoder_fixtures.py).

For each model folder: `qjoule export --precision fp32 --to gguf` writes an F32 GGUF; llama.cpp (through
llama-cpp-python, whose sdist builds llama.cpp's current source) evaluates the reference's token ids
with an F32 KV cache and no flash attention; the script prints the largest absolute difference of the
logits and the relative RMS, one line a model, and exits 1 when one is above --budget. (ggml's CPU GELU
reads a table of FP16 inputs: a GeGLU model such as Gemma 3 differs by ~1e-3 for that alone, ~1e-4 from
transformers run with its GELU inputs rounded to FP16 the same way.)

Runs beside qjoule, never in CI (PyPI is not a dependency of the build or the tests):
  python3 -m venv /tmp/llvenv && /tmp/llvenv/bin/pip install numpy llama-cpp-python==0.3.36
  /tmp/llvenv/bin/python tools/check_gguf_in_llama_cpp.py --qjoule build/release/src/cli/qjoule \
      tests/fixtures/decoders/tiny-phi3 tests/fixtures/decoders/tiny-qwen3 ...
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        header_len = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_len))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = {"F32": np.float32, "I32": np.int32}[info["dtype"]]
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(info["shape"])
    return out


def llama_cpp_logits(gguf, ids):
    import llama_cpp

    llm = llama_cpp.Llama(model_path=gguf, n_ctx=max(64, len(ids)), logits_all=True, verbose=False,
                          type_k=0, type_v=0, flash_attn=False, n_threads=2, n_batch=len(ids))
    llm.eval([int(t) for t in ids])
    return np.array(llm.scores[: len(ids)], dtype=np.float64), llama_cpp.__version__


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--qjoule", required=True, help="the qjoule binary")
    p.add_argument("--budget", type=float, default=2e-3, help="largest absolute logit difference accepted")
    p.add_argument("models", nargs="+", help="model folders with a reference.safetensors")
    a = p.parse_args()
    worst = 0.0
    for model in a.models:
        ref = read_safetensors(os.path.join(model, "reference.safetensors"))
        ids, want = ref["token_ids"], ref["logits"].astype(np.float64)
        with tempfile.TemporaryDirectory() as tmp:
            # A neutral general.name: llama.cpp sets token attributes by model name ("phi3" asks for "</s>").
            copy = os.path.join(tmp, "model")
            shutil.copytree(model, copy)
            gguf = os.path.join(tmp, "model.gguf")
            subprocess.run([a.qjoule, "export", "--model", copy, "--precision", "fp32", "--to", "gguf", "--out", gguf],
                           check=True, capture_output=True)
            got, version = llama_cpp_logits(gguf, ids)
        diff = np.abs(got - want).max()
        rms = np.sqrt(((got - want) ** 2).sum() / (want**2).sum())
        worst = max(worst, diff)
        print(f"{model}: {len(ids)} tokens, llama-cpp-python {version}: max |Δlogit| {diff:.3g}, relative RMS {rms:.3g}")
    return 0 if worst <= a.budget else 1


if __name__ == "__main__":
    sys.exit(main())
