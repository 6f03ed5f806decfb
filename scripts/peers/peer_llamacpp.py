"""llama.cpp at its current release on the CPU (the llama.cpp llama-cpp-python's sdist carries, built on this
machine with GGML_NATIVE), beside qjoule: one record per format.

  llamacpp-f16      the model as qjoule exports it to GGUF (`qjoule export --precision fp16 --to gguf`)
  llamacpp-q8_0     llama.cpp's own quantization of that file (llama_model_quantize), its output matrix as it
  llamacpp-q4_0     chooses for each type (Q6_K for Q4_0 and Q4_K_M, Q8_0 for Q8_0)
  llamacpp-q4_k_m

Decode: the context cut back to the prompt (Llama.eval removes the cache past n_tokens), then decode-tokens
greedy steps, each one llama_decode of one token; the prompt's logits: its last position only.

Run by scripts/peers/peers.sh in the llama.cpp environment (requirements-llamacpp.lock), with QJOULE
naming this build's `qjoule` (it writes the F16 GGUF).
"""

import os
import subprocess
import time

import numpy as np

import peer_common as common

FORMATS = ["llamacpp-f16", "llamacpp-q8_0", "llamacpp-q4_0", "llamacpp-q4_k_m"]


def gguf_of(args, precision, llama_cpp):
    """The GGUF file of `precision`, written once into --work."""
    work = os.path.join(args.work, common.model_label(args.model))
    os.makedirs(work, exist_ok=True)
    f16 = os.path.join(work, "f16.gguf")
    if not os.path.exists(f16):
        qjoule_cli = os.environ.get("QJOULE", "build/release/src/cli/qjoule")
        subprocess.run([qjoule_cli, "export", "--model", args.model, "--precision", "fp16", "--to", "gguf", "--out",
                        f16 + ".partial"], check=True, stdout=subprocess.DEVNULL)
        os.replace(f16 + ".partial", f16)
    if precision == "llamacpp-f16":
        return f16
    ftype = {"llamacpp-q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, "llamacpp-q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0,
             "llamacpp-q4_k_m": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M}[precision]
    path = os.path.join(work, precision.split("-")[1] + ".gguf")
    if not os.path.exists(path):
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = ftype
        params.nthread = args.threads
        if llama_cpp.llama_model_quantize(f16.encode(), (path + ".partial").encode(), params) != 0:
            raise RuntimeError(f"llama_model_quantize {f16} -> {precision} failed")
        os.replace(path + ".partial", path)
    return path


def main():
    args = common.parse_args("llama.cpp", FORMATS)
    from importlib.metadata import version
    import llama_cpp
    engine = f"llama.cpp (llama-cpp-python {version('llama-cpp-python')})"
    base = common.KlBase(args.kl_base) if args.kl_base else None
    common.run_formats(args, lambda precision: engine,
                       lambda precision, engine: run_format(args, precision, engine, base, llama_cpp))


def run_format(args, precision, engine, base, llama_cpp):
    started = time.perf_counter()
    path = gguf_of(args, precision, llama_cpp)
    n, m = args.prompt_tokens, args.decode_tokens
    llm = llama_cpp.Llama(model_path=path, n_ctx=n + m + 8, n_batch=max(512, n), n_threads=args.threads,
                          n_threads_batch=args.threads, verbose=False)
    vocab = llm.n_vocab()
    ids = [int(t) for t in common.prompt_ids(vocab, n)]

    def last_argmax():
        return int(np.argmax(np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(vocab,))))

    state = {}

    def prefill():
        llm.reset()
        llm.eval(ids)
        state["first"] = last_argmax()

    def decode():
        llm.n_tokens = n  # Llama.eval removes the cache past n_tokens: the cut back to the prompt
        token = state["first"]
        for _ in range(m):
            llm.eval([token])
            token = last_argmax()

    prefill()
    decode()
    quality = None
    if base is not None:
        if base.vocab != vocab:
            raise ValueError(f"--kl-base {base.path}: vocabulary {base.vocab}, the model's {vocab}")
        scorer = llama_cpp.Llama(model_path=path, n_ctx=base.ctx, n_batch=base.ctx, n_threads=args.threads,
                                 n_threads_batch=args.threads, logits_all=True, verbose=False)

        def log_probs_of(window):
            scorer.reset()
            scorer.eval([int(t) for t in window])
            logits = scorer.scores[:len(window)].astype(np.float64)
            shifted = logits - logits.max(axis=-1, keepdims=True)
            return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        quality = common.quality_on(base, log_probs_of, common.base_text(base.path))
        del scorer
    notes = [f"GGUF {os.path.basename(path)} ({os.path.getsize(path)} bytes) ready in "
             f"{time.perf_counter() - started:.1f} s", "prompt: pseudo-random token ids (seed 1234); decode: the "
             f"context cut back to the prompt, then {m} greedy steps"]
    common.bench(args, engine, precision, prefill, decode, kernel_path=f"llama.cpp CPU backend, {precision[9:]}",
                 model_bytes=os.path.getsize(path), quality=quality, notes=notes)


if __name__ == "__main__":
    main()
