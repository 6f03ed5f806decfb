#!/usr/bin/env python3
"""Perplexity of qjoule's GGUF exports in llama.cpp beside `qjoule ppl` of the same format: for each
--precisions entry, `qjoule export --to gguf` writes the file, llama.cpp (llama-cpp-python, whose sdist builds
llama.cpp's current source) scores the text in the same windows as `qjoule ppl --ctx N --stride N` (each
window's tokens after its first), and one line a format gives both perplexities and their ratio.

The text is tokenized once by Hugging Face's `tokenizers` from the model's tokenizer.json (as qjoule tokenizes
it; the script checks the token count) and llama.cpp scores those ids: its own tokenizer, reading the GGUF's
vocabulary, can split a SentencePiece-style text otherwise. FP32 agrees to float noise;
in a quantized file llama.cpp rounds the activations to 8 bits before its Q4_0 / MXFP4 / NVFP4 dot products
(qjoule's weight-only formats keep them FP32), so those differ by that alone.

Runs beside qjoule, never in CI:
  python3 -m venv /tmp/llvenv && /tmp/llvenv/bin/pip install numpy tokenizers llama-cpp-python==0.3.36
  /tmp/llvenv/bin/python tools/compare_gguf_ppl_in_llama_cpp.py --qjoule build/release/src/cli/qjoule \
      --model tests/fixtures/decoders/trained-llama --text ../shared/data/wikitext2/test.txt --max-chars 20000 \
      --precisions fp32,int4:g=32:sym,mxfp4,nvfp4
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np


def llama_cpp_ppl(gguf, ids, ctx, threads):
    import llama_cpp

    llm = llama_cpp.Llama(model_path=gguf, n_ctx=ctx, logits_all=True, verbose=False, type_k=0, type_v=0,
                          flash_attn=False, n_threads=threads, n_batch=ctx)
    nll, scored = 0.0, 0
    for start in range(0, len(ids), ctx):
        window = ids[start:start + ctx]
        if len(window) < 2:
            continue
        llm.reset()
        llm.eval(window)
        logits = np.array(llm.scores[: len(window)], dtype=np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        for i in range(1, len(window)):
            nll -= logp[i - 1, window[i]]
        scored += len(window) - 1
    return math.exp(nll / scored), scored, llama_cpp.__version__


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--qjoule", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--max-chars", type=int, default=20000, help="score the text's first N characters")
    p.add_argument("--ctx", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--precisions", default="fp32,int4:g=32:sym,mxfp4,nvfp4")
    a = p.parse_args()
    from tokenizers import Tokenizer

    with open(a.text, encoding="utf-8") as f:
        text = f.read()[: a.max_chars]
    ids = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json")).encode(text, add_special_tokens=True).ids
    print("| precision | GGUF type | qjoule ppl | llama.cpp ppl | llama.cpp / qjoule | tokens (qjoule, llama.cpp) |")
    print("|---|---|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        text_file = os.path.join(tmp, "text.txt")
        with open(text_file, "w", encoding="utf-8") as f:
            f.write(text)
        for precision in a.precisions.split(","):
            gguf = os.path.join(tmp, precision.replace(":", "_") + ".gguf")
            out = subprocess.run([a.qjoule, "export", "--model", a.model, "--precision", precision, "--to", "gguf",
                                  "--out", gguf], check=True, capture_output=True, text=True).stdout
            summary = os.path.join(tmp, "ppl.json")
            subprocess.run([a.qjoule, "ppl", "--model", a.model, "--precision", precision, "--text", text_file,
                            "--ctx", str(a.ctx), "--stride", str(a.ctx), "--threads", str(a.threads), "--json",
                            summary], check=True, capture_output=True)
            with open(summary) as f:
                q = json.load(f)
            ppl, scored, version = llama_cpp_ppl(gguf, ids, a.ctx, a.threads)
            n_ids = len(ids)
            kind = next((w for w in ("Q4_0", "MXFP4", "NVFP4", "F32", "F16", "BF16") if w in out), "?")
            note = "" if n_ids == q["n_tokens"] else " (tokenizations differ)"
            print(f"| {precision} | {kind} | {q['ppl']:.4f} | {ppl:.4f} | {ppl / q['ppl']:.5f} | "
                  f"{q['n_tokens']}, {n_ids}{note} |")
    print(f"llama-cpp-python {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
