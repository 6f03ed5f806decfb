"""What every peer of scripts/peers/ shares: its arguments, the prompt, the decoder protocol as `qjoule
bench` runs it, quality on the FP32 reference qjoule scored against, and its records.

A peer runs inside its own virtual environment (scripts/peers/peers.sh makes them from the lock files)
and imports qjoule from this build (PYTHONPATH=build/<flavour>/python): its timings, energy windows and
records are qjoule's (qjoule.bench_decoder), so its rows sit beside `qjoule bench`'s in one results
folder and one report.

Quality: with --kl-base (the FP32 reference `qjoule bench --text` keeps in OUT/kl-base/, or one of `qjoule
ppl --save-kl-base`), a peer scores the reference's own token ids in its windows, exactly as `qjoule ppl`
does (eval/perplexity.cpp), and compares its log-probabilities with the reference's: perplexity, ΔPPL with
its paired standard error, mean KL with its standard error, same-top-token rate, the same definitions as
the lm_* keys of qjoule's records.
"""

import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np

import qjoule

KL_BASE_HEADER = struct.Struct("<8sii4qd")  # magic, vocab, identity bytes, ctx, stride, n_tokens, scored, nll_sum


def parse_args(peer, formats, calibration=False):
    p = argparse.ArgumentParser(description=f"{peer} beside qjoule: speed, energy and quality as qjoule records")
    p.add_argument("--model", required=True, help="a Hugging Face decoder folder qjoule reads (config.json, "
                   "model.safetensors, tokenizer.json); the same string as `qjoule bench --model`")
    p.add_argument("--out", required=True, help="results folder (qjoule bench's: the rows go beside its own)")
    p.add_argument("--formats", default=",".join(formats), help=f"of {','.join(formats)} (default: all)")
    p.add_argument("--prompt-tokens", type=int, default=128, help="prompt tokens a prefill (qjoule bench --seq)")
    p.add_argument("--decode-tokens", type=int, default=64, help="greedy steps a decode repetition")
    p.add_argument("--threads", type=int, default=2, help="CPU threads the peer may use")
    p.add_argument("--min-time", type=float, default=3.0, help="seconds each phase is timed, at least")
    p.add_argument("--kl-base", default="", help="FP32 reference (.qjkl) to score quality against")
    p.add_argument("--work", default="build/peers/work", help="folder for converted models")
    if calibration:
        p.add_argument("--calib", required=True, help="calibration text (as qjoule's --calib)")
        p.add_argument("--calib-sequences", type=int, default=64, help="windows (as qjoule's --calib-sequences)")
        p.add_argument("--calib-tokens", type=int, default=0,
                       help="tokens a window (default as qjoule's: 512, or max_position_embeddings if fewer)")
    a = p.parse_args()
    if calibration and a.calib_tokens == 0:
        with open(os.path.join(a.model, "config.json")) as f:
            a.calib_tokens = min(512, json.load(f).get("max_position_embeddings", 512))
    a.formats = [f for f in a.formats.split(",") if f]
    unknown = [f for f in a.formats if f not in formats]
    if unknown:
        p.error(f"--formats {','.join(unknown)}: {peer} has {','.join(formats)}")
    return a


def model_label(path):
    return os.path.basename(os.path.normpath(path))


def run_name(args, precision):
    return f"{model_label(args.model)}_cpu_{precision}_s{args.prompt_tokens}_bs1_t{args.threads}"


def prompt_ids(vocab, n):
    """The prompt: n token ids drawn from a fixed seed (qjoule bench's prompts are pseudo-random too;
    decode speed of a dense model does not depend on which tokens)."""
    return np.random.default_rng(1234).integers(3, vocab, size=n, dtype=np.int64)


def already_recorded(args, precision):
    path = os.path.join(args.out, "results.jsonl")
    if not os.path.exists(path):
        return False
    return any(r["run_name"] == run_name(args, precision) for r in qjoule.read_results(path))


def run_formats(args, engine_of, run_one):
    """Each of --formats: skipped where already recorded, else run_one(precision, engine); a format that
    fails is a failed record saying why, not a crash."""
    for precision in args.formats:
        engine = engine_of(precision)
        if already_recorded(args, precision):
            print(f"{engine} {precision}: already recorded in {args.out}")
            continue
        try:
            run_one(precision, engine)
        except Exception as e:  # noqa: BLE001 (any peer's failure is a record)
            record_failure(args, engine, precision, f"{type(e).__name__}: {e}".split("\n")[0][:400])


def torch_decoder_phases(model, args, torch, new_cache=None, last_logits_only=True):
    """prefill() and decode() of a transformers-style causal LM, as `qjoule bench` runs a decoder: one
    prefill of the prompt (the last position's logits only, where the model takes logits_to_keep); decode:
    the cache cut back to the prompt, then --decode-tokens greedy steps, one forward each."""
    ids = torch.tensor(prompt_ids(model.config.vocab_size, args.prompt_tokens))[None]
    state = {}

    @torch.no_grad()
    def prefill():
        kwargs = {"past_key_values": new_cache()} if new_cache else {}
        if last_logits_only:
            kwargs["logits_to_keep"] = 1
        out = model(input_ids=ids, use_cache=True, **kwargs)
        state["cache"], state["first"] = out.past_key_values, out.logits[:, -1:].argmax(-1)

    @torch.no_grad()
    def decode():
        cache = state["cache"]
        extra = cache.get_seq_length() - args.prompt_tokens
        if extra > 0:
            cache.crop(-extra)
        token = state["first"]
        for _ in range(args.decode_tokens):
            token = model(input_ids=token, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)

    return prefill, decode


def record_failure(args, engine, precision, error):
    """A format the peer could not run: a failed record naming why, and a line on stderr."""
    print(f"{engine} {precision}: {error}", file=sys.stderr)
    qjoule.record_failed(name=run_name(args, precision), precision=precision, engine=engine, error=str(error),
                         out=args.out, prompt_tokens=args.prompt_tokens, decode_tokens=args.decode_tokens,
                         model=args.model, threads=args.threads)


def bench(args, engine, precision, prefill, decode, *, kernel_path, model_bytes=None, quality=None, notes=()):
    r = qjoule.bench_decoder(prefill, decode, name=run_name(args, precision), precision=precision,
                             prompt_tokens=args.prompt_tokens, decode_tokens=args.decode_tokens, out=args.out,
                             engine=engine, model=args.model, threads=args.threads, min_time=args.min_time,
                             kernel_path=kernel_path, model_bytes=model_bytes, quality=quality, notes=list(notes))
    ppl = f", PPL {r['lm_ppl']:.4f}" if r.get("lm_ppl") is not None else ""
    print(f"{engine} {precision}: prefill {r['prefill_tokens_per_s_mean']:.1f} tok/s, decode "
          f"{r['decode_tokens_per_s_mean']:.2f} tok/s{ppl}", flush=True)
    return r


def _tensor_bytes(t, seen):
    """Bytes a torch tensor holds (a tensor subclass such as TorchAO's: its inner tensors), each storage once."""
    if hasattr(t, "__tensor_flatten__") and type(t).__name__ not in ("Tensor", "Parameter"):
        names, _ = t.__tensor_flatten__()
        return sum(_tensor_bytes(getattr(t, n), seen) for n in names)
    key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
    if key in seen:
        return 0
    seen.add(key)
    return t.numel() * t.element_size()


def torch_model_bytes(model):
    """A torch model's parameters and buffers (packed codes, scales and zeros included), tied ones once."""
    seen = set()
    return sum(_tensor_bytes(p, seen) for p in list(model.parameters()) + list(model.buffers()))


class KlBase:
    """An FP32 reference as `qjoule ppl --save-kl-base` writes it (eval/kl_base.h, version 2)."""

    def __init__(self, path):
        with open(path, "rb") as f:
            head = f.read(KL_BASE_HEADER.size)
        if len(head) < KL_BASE_HEADER.size:
            raise ValueError(f"{path}: {len(head)} bytes, shorter than a KL base's header")
        magic, self.vocab, ident, self.ctx, self.stride, n_tokens, self.scored, self.nll_sum = \
            KL_BASE_HEADER.unpack(head)
        if magic not in (b"QJKLBAS2", b"QJKLBAS1"):
            raise ValueError(f"{path}: magic {magic!r}, expected QJKLBAS2 (a qjoule KL base)")
        offset = KL_BASE_HEADER.size
        self.ids = np.fromfile(path, dtype="<i4", count=n_tokens, offset=offset).astype(np.int64)
        offset += 4 * n_tokens + ident
        self.log_probs = np.memmap(path, dtype="<f2", mode="r", offset=offset, shape=(self.scored, self.vocab))
        self.path = path

    def windows(self):
        """(begin, end, score_from) as eval::perplexity_windows."""
        out, prev_end, begin = [], 0, 0
        n = len(self.ids)
        while True:
            end = min(begin + self.ctx, n)
            out.append((begin, end, max(begin + 1, prev_end)))
            prev_end = end
            if end == n:
                return out
            begin += self.stride


def quality_on(base, log_probs_of, text=""):
    """The lm_* figures of a model whose log_probs_of(ids) gives [len(ids), vocab] log-softmax rows
    (row j predicts token j + 1), on the base's windows, against the base."""
    nll, base_nll, kl, same = [], [], [], 0
    k = 0
    started = time.perf_counter()
    for begin, end, score_from in base.windows():
        rows = np.asarray(log_probs_of(base.ids[begin:end]), dtype=np.float32)
        for t in range(score_from, end):
            q = rows[t - 1 - begin].astype(np.float64)
            b = base.log_probs[k].astype(np.float64)
            target = base.ids[t]
            nll.append(-q[target])
            base_nll.append(-b[target])
            kl.append(float(np.sum(np.exp(b) * (b - q))))
            same += int(np.argmax(b) == np.argmax(q))
            k += 1
    nll, base_nll, kl = np.array(nll), np.array(base_nll), np.array(kl)
    n = len(nll)
    ppl = math.exp(nll.mean())
    base_ppl = math.exp(base.nll_sum / base.scored)
    # qjoule's definitions (eval/perplexity.cpp): the run's error from its NLL's variance over n, and ΔPPL's
    # paired by the delta method over both runs' NLLs and their covariance.
    ppl_stderr = ppl * math.sqrt(max(0.0, (nll ** 2).mean() - nll.mean() ** 2) / (n - 1))
    vq, vp = nll.var(ddof=1), base_nll.var(ddof=1)
    cov = np.cov(nll, base_nll, ddof=1)[0, 1]
    d_stderr = math.sqrt(max(0.0, (ppl * ppl * vq + base_ppl * base_ppl * vp - 2 * ppl * base_ppl * cov) / n))
    print(f"  quality: {n} tokens of {os.path.basename(base.path)} in {time.perf_counter() - started:.1f} s",
          flush=True)
    figures = {"lm_ctx": int(base.ctx), "lm_stride": int(base.stride),
               "lm_scored_tokens": int(n), "lm_ppl": ppl, "lm_ppl_stderr": ppl_stderr, "lm_base_ppl": base_ppl,
               "lm_delta_ppl": ppl - base_ppl, "lm_delta_ppl_stderr": d_stderr, "lm_kl_mean": float(kl.mean()),
               "lm_kl_stderr": float(kl.std(ddof=1) / math.sqrt(n)), "lm_same_top_rate": same / n}
    if text:  # the text the base was computed from, where its identity says (never the base's own path)
        figures["lm_text"] = text
    return figures


def base_text(path):
    """The text a KL base was computed from (its identity), or ""."""
    with open(path, "rb") as f:
        head = KL_BASE_HEADER.unpack(f.read(KL_BASE_HEADER.size))
        f.seek(KL_BASE_HEADER.size + 4 * head[5])
        ident = f.read(head[2]).decode("utf-8", "replace").strip()
    try:
        return json.loads(ident).get("text", "") if ident else ""
    except json.JSONDecodeError:
        return ""
