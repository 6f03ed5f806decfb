#!/usr/bin/python3
"""Writes tests/fixtures/decoders/trained-llama: a small LlamaForCausalLM trained on WikiText-2's
validation split, for the tests that need a model whose numbers mean something (calibrated 4-bit:
a barely trained model shrugs off any rounding, a trained one does not).

  architecture  LlamaForCausalLM, hidden 128, 3 layers, 4 heads, 2 KV heads (GQA), head_dim 32,
                MLP 384, rope_theta 1e4 (no scaling), rms_norm_eps 1e-5, untied lm_head, 128 positions;
                stored as BF16 (like most Llama checkpoints); about 0.75 M weights (1.5 MB).
  tokenizer     tests/fixtures/bpe/sentencepiece (Llama-2 style, 610 tokens, template "<s> $A").
  training      ../shared/data/wikitext2/valid.txt tokenized whole (no BOS), cut into windows of 128
                tokens, AdamW (lr 3e-3 with cosine decay, weight decay 0.01, betas 0.9 / 0.95), batch 32,
                STEPS steps, fixed seeds; the weights rounded to BF16 at the end.
  reference     reference_ppl.json: PyTorch's perplexity of the stored (BF16-valued) weights on the first
                MAX_TOKENS tokens of test.txt (with BOS), ctx 128, stride 64, as `qjoule ppl` scores.

Plain PyTorch (Debian's python3-torch) and the forward of tools/make_tiny_decoder_fixtures.py.
Usage: /usr/bin/python3 tools/train_tiny_decoder_fixture.py [OUT_DIR] [STEPS]
Needs Debian's python3-torch and python3-regex (for the tokenizer reference); ../shared for the text.
"""
import json
import math
import shutil
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from safetensors_writer import safetensors_bytes  # noqa: E402
from make_tiny_decoder_fixtures import (BPE, SHARED, load_tokenizer, llama_forward, perplexity,  # noqa: E402
                                        rope_parameters, token_id)

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests/fixtures/decoders/trained-llama"
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
SEQ, BATCH, MAX_TOKENS = 128, 32, 20000


def config(vocab_size, bos, eos):
    return {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": bos, "eos_token_id": eos, "head_dim": 32, "hidden_act": "silu", "hidden_size": 128,
        "initializer_range": 0.02, "intermediate_size": 384, "max_position_embeddings": SEQ, "mlp_bias": False,
        "model_type": "llama", "num_attention_heads": 4, "num_hidden_layers": 3, "num_key_value_heads": 2,
        "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": vocab_size,
    }


def initial_weights(cfg, gen):
    h, f, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    kv = cfg["num_key_value_heads"] * cfg["head_dim"]
    std, out_std = 0.02, 0.02 / math.sqrt(2 * layers)
    w = {"model.embed_tokens.weight": torch.randn(cfg["vocab_size"], h, generator=gen) * std,
         "lm_head.weight": torch.randn(cfg["vocab_size"], h, generator=gen) * std,
         "model.norm.weight": torch.ones(h)}
    for i in range(layers):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = torch.ones(h)
        w[p + "post_attention_layernorm.weight"] = torch.ones(h)
        for name, shape, s in (("self_attn.q_proj", (h, h), std), ("self_attn.k_proj", (kv, h), std),
                               ("self_attn.v_proj", (kv, h), std), ("self_attn.o_proj", (h, h), out_std),
                               ("mlp.gate_proj", (f, h), std), ("mlp.up_proj", (f, h), std),
                               ("mlp.down_proj", (h, f), out_std)):
            w[p + name + ".weight"] = torch.randn(*shape, generator=gen) * s
    return w


def batched_loss(cfg, w, ids):
    """Mean next-token cross entropy of ids [B, T]: llama_forward's arithmetic, batched."""
    b, t = ids.shape
    heads, kv_heads, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps = cfg["rms_norm_eps"]
    inv_freq, _ = rope_parameters(d, cfg["rope_theta"], cfg["rope_scaling"], cfg["max_position_embeddings"])
    freqs = torch.arange(t, dtype=torch.float32)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()

    def rms(x, g):
        return g * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def rot(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    mask = torch.ones(t, t, dtype=torch.bool).tril()
    x = w["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms(x, w[p + "input_layernorm.weight"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(b, t, heads, d).transpose(1, 2)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(b, t, kv_heads, d).transpose(1, 2)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(b, t, kv_heads, d).transpose(1, 2)
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        k, v = k.repeat_interleave(heads // kv_heads, dim=1), v.repeat_interleave(heads // kv_heads, dim=1)
        scores = (q @ k.transpose(-1, -2)) * d ** -0.5
        probs = torch.softmax(scores.masked_fill(~mask, torch.finfo(torch.float32).min), dim=-1)
        ctx = (probs @ v).transpose(1, 2).reshape(b, t, heads * d)
        x = x + ctx @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        a = torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)
        x = x + a @ w[p + "mlp.down_proj.weight"].T
    logits = rms(x, w["model.norm.weight"]) @ w["lm_head.weight"].T
    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def main():
    torch.manual_seed(20261127)
    doc, ref, vocab_size = load_tokenizer("sentencepiece")
    bos, eos = token_id(doc, "<s>"), token_id(doc, "</s>")
    cfg = config(vocab_size, bos, eos)
    start = time.time()
    train = torch.tensor(ref.encode((SHARED / "data/wikitext2/valid.txt").read_text(encoding="utf-8")),
                         dtype=torch.int64)
    windows = train[: len(train) // SEQ * SEQ].view(-1, SEQ)
    print(f"valid.txt: {len(train)} tokens, {len(windows)} windows of {SEQ} ({time.time() - start:.0f} s)")
    w = {k: v.requires_grad_() for k, v in initial_weights(cfg, torch.Generator().manual_seed(7)).items()}
    decay = [v for k, v in w.items() if k.endswith("proj.weight") or k.endswith("head.weight")]
    rest = [v for k, v in w.items() if not (k.endswith("proj.weight") or k.endswith("head.weight"))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}],
                            lr=3e-3, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 100) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / STEPS))))
    order = torch.Generator().manual_seed(11)
    for step in range(STEPS):
        batch = windows[torch.randint(0, len(windows), (BATCH,), generator=order)]
        loss = batched_loss(cfg, w, batch)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(w.values()), 1.0)
        opt.step()
        sched.step()
        if step % 100 == 0 or step == STEPS - 1:
            print(f"step {step}: loss {float(loss):.4f} ({time.time() - start:.0f} s)", flush=True)

    stored = {k: v.detach().to(torch.bfloat16) for k, v in w.items()}
    values = {k: v.to(torch.float32) for k, v in stored.items()}
    test_ids = ref.encode((SHARED / "data/wikitext2/test.txt").read_text(encoding="utf-8"), add_special_tokens=True)
    kept = test_ids[:MAX_TOKENS]
    with torch.no_grad():
        nll, scored = perplexity(cfg, values, llama_forward, kept, SEQ, SEQ // 2)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    (OUT / "model.safetensors").write_bytes(safetensors_bytes(stored))
    shutil.copyfile(BPE / "sentencepiece" / "tokenizer.json", OUT / "tokenizer.json")
    (OUT / "reference_ppl.json").write_text(json.dumps(
        {"text": "data/wikitext2/test.txt", "max_tokens": MAX_TOKENS, "ctx": SEQ, "stride": SEQ // 2,
         "n_tokens": len(kept), "scored_tokens": scored, "nll_sum": nll, "ppl": math.exp(nll / scored),
         "steps": STEPS, "train_tokens": len(train)}, indent=1) + "\n")
    print(f"wrote {OUT}: test ppl {math.exp(nll / scored):.4f} over {scored} tokens ({time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
