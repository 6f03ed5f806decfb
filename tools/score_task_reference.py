#!/usr/bin/python3
"""An independent scorer for `qjoule score`: multiple-choice log-likelihoods of a tiny decoder in FP64
NumPy, read from its model.safetensors and config.json, tokenized by make_bpe_tokenizer_fixtures'
reference BPE, written from lm-evaluation-harness's definitions (not from qjoule's code):

  task files: JSON Lines of {"context", "choices", "label"} (qjoule), HellaSwag rows (lm-eval's
    hellaswag/utils.py: query = preprocess(activity_label + ": " + ctx_a + " " + ctx_b.capitalize()),
    choices = preprocess(ending)) or ARC rows ("Question: " + question + "\\nAnswer:", choices.text,
    gold = choices.label.index(answerKey)); the first line's fields tell which.
  requests: (context, " " + choice) per choice; _encode_pair moves the context's trailing whitespace to
    the continuation, encodes the context alone and context + continuation (no special tokens), and
    takes the continuation's tokens past the context's count; the model reads
    (context + continuation)[-(max_positions + 1):][:-1] in one causal forward from position 0.
  loglik: sum over the continuation's tokens of log_softmax(logits)[token];
  acc: argmax loglik == gold; acc_norm: argmax loglik / len(choice) (code points) == gold.

Llama / Qwen2 / GPT-2 forwards as tools/make_tiny_decoder_fixtures.py documents them (rope default,
linear or llama3), here in NumPy FP64 (the weights as stored, BF16 widened exactly).

Usage: /usr/bin/python3 tools/score_task_reference.py MODEL_DIR TASK.jsonl OUT.json
Writes {"task", "acc", "acc_norm", "per_item": [{"gold", "chosen", "chosen_norm", "loglik": [...]}]}.
Needs Debian's python3-numpy and python3-regex.
"""
import json
import math
import re
import struct
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_bpe_tokenizer_fixtures import Reference  # noqa: E402


def read_safetensors(path):
    raw = Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        buf = raw[8 + n + a:8 + n + b]
        if t["dtype"] == "F32":
            arr = np.frombuffer(buf, "<f4")
        elif t["dtype"] == "F16":
            arr = np.frombuffer(buf, "<f2")
        elif t["dtype"] == "BF16":
            arr = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            continue
        out[name] = arr.astype(np.float64).reshape(t["shape"])
    return out


def inv_freq_of(cfg, d):
    inv = (1.0 / (cfg["rope_theta"] ** (np.arange(0, d, 2, dtype=np.float32) / d))).astype(np.float32)
    scaling = cfg.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return inv.astype(np.float64)
    if kind == "linear":
        return (inv / np.float32(scaling["factor"])).astype(np.float64)
    if kind == "llama3":
        factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > old / low, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / high) & ~(wavelen > old / low)
        return np.where(medium, smoothed, scaled).astype(np.float32).astype(np.float64)
    raise SystemExit(f"rope type {kind} is not in this reference")


def softmax_causal(scores):
    t = scores.shape[-1]
    scores = np.where(np.tril(np.ones((t, t), dtype=bool)), scores, -np.inf)
    scores = scores - scores.max(-1, keepdims=True)
    e = np.exp(scores)
    return e / e.sum(-1, keepdims=True)


def linear(x, w, prefix):
    y = x @ w[prefix + ".weight"].T
    return y + w[prefix + ".bias"] if prefix + ".bias" in w else y


def rms_norm(x, weight, eps):
    return weight * (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps))


def llama_forward(cfg, w, ids):
    t, heads, kv = len(ids), cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim") or cfg["hidden_size"] // heads
    eps = cfg["rms_norm_eps"]
    freqs = np.arange(t, dtype=np.float64)[:, None] * inv_freq_of(cfg, d)[None, :]
    emb = np.concatenate([freqs, freqs], -1)
    cos, sin = np.cos(emb), np.sin(emb)

    def rope(u):  # [heads, t, d]
        half = u.shape[-1] // 2
        return u * cos + np.concatenate([-u[..., half:], u[..., :half]], -1) * sin

    x = w["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = rope(linear(h, w, p + "self_attn.q_proj").reshape(t, heads, d).transpose(1, 0, 2))
        k = rope(linear(h, w, p + "self_attn.k_proj").reshape(t, kv, d).transpose(1, 0, 2))
        v = linear(h, w, p + "self_attn.v_proj").reshape(t, kv, d).transpose(1, 0, 2)
        k, v = np.repeat(k, heads // kv, 0), np.repeat(v, heads // kv, 0)
        probs = softmax_causal(q @ k.transpose(0, 2, 1) * d ** -0.5)
        x = x + linear((probs @ v).transpose(1, 0, 2).reshape(t, heads * d), w, p + "self_attn.o_proj")
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate, up = linear(h, w, p + "mlp.gate_proj"), linear(h, w, p + "mlp.up_proj")
        x = x + linear(gate / (1 + np.exp(-gate)) * up, w, p + "mlp.down_proj")
    x = rms_norm(x, w["model.norm.weight"], eps)
    return x @ w.get("lm_head.weight", w["model.embed_tokens.weight"]).T


def gpt2_forward(cfg, w, ids):
    t, hidden, heads, eps = len(ids), cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    d = hidden // heads

    def ln(x, prefix):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w[prefix + ".weight"] + w[prefix + ".bias"]

    def conv1d(x, prefix):
        return x @ w[prefix + ".weight"] + w[prefix + ".bias"]

    def gelu_new(x):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    x = w["wte.weight"][ids] + w["wpe.weight"][:t]
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        qkv = conv1d(ln(x, p + "ln_1"), p + "attn.c_attn")
        q, k, v = (qkv[:, j * hidden:(j + 1) * hidden].reshape(t, heads, d).transpose(1, 0, 2) for j in range(3))
        probs = softmax_causal(q @ k.transpose(0, 2, 1) / math.sqrt(d))
        x = x + conv1d((probs @ v).transpose(1, 0, 2).reshape(t, hidden), p + "attn.c_proj")
        x = x + conv1d(gelu_new(conv1d(ln(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    return ln(x, "ln_f") @ w["wte.weight"].T


def hellaswag_preprocess(text):
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def read_task(path):
    items = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        doc = json.loads(line)
        if "context" in doc:
            items.append((doc["context"], doc["choices"], int(doc["label"])))
        elif "endings" in doc:
            if "ctx_a" in doc and "ctx_b" in doc:
                ctx = doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
            else:
                ctx = doc["ctx"]
            query = doc["activity_label"] + ": " + ctx if doc.get("activity_label") else ctx
            items.append((hellaswag_preprocess(query), [hellaswag_preprocess(e) for e in doc["endings"]],
                          int(doc["label"])))
        else:
            items.append(("Question: " + doc["question"] + "\nAnswer:", doc["choices"]["text"],
                          doc["choices"]["label"].index(doc["answerKey"])))
    return items


def encode_pair(tok, context, continuation):
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = tok.encode(context + continuation)
    context_enc = tok.encode(context)
    return context_enc, whole[len(context_enc):]


def main():
    model_dir, task_path, out_path = (Path(a) for a in sys.argv[1:4])
    cfg = json.loads((model_dir / "config.json").read_text())
    w = read_safetensors(model_dir / "model.safetensors")
    tok = Reference(json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8")))
    gpt2 = cfg["model_type"] == "gpt2"
    forward = gpt2_forward if gpt2 else llama_forward
    positions = cfg["n_positions"] if gpt2 else cfg["max_position_embeddings"]
    per_item, correct, correct_norm = [], 0, 0
    for context, choices, gold in read_task(task_path):
        lls = []
        for choice in choices:
            ctx_enc, cont_enc = encode_pair(tok, context, " " + choice)
            ids = (ctx_enc + cont_enc)[-(positions + 1):][:-1]
            logits = forward(cfg, w, np.array(ids))
            logits = logits - logits.max(-1, keepdims=True)
            logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
            n = len(cont_enc)
            rows = logp[len(ids) - n:]
            lls.append(float(sum(rows[i, cont_enc[i]] for i in range(n))))
        chosen = int(np.argmax(lls))
        chosen_norm = int(np.argmax([ll / len(c) for ll, c in zip(lls, choices)]))
        correct += chosen == gold
        correct_norm += chosen_norm == gold
        per_item.append({"gold": gold, "chosen": chosen, "chosen_norm": chosen_norm, "loglik": lls})
    n = len(per_item)
    out = {"task": Path(task_path).stem, "items": n, "acc": correct / n, "acc_norm": correct_norm / n,
           "per_item": per_item}
    Path(out_path).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
