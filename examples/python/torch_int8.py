#!/usr/bin/env python3
"""A PyTorch DistilBERT in FP32 and through torch.ao's quantize_dynamic INT8, measured with qjoule.bench
into one results folder beside `qjoule bench` runs of the same checkpoint, and one `qjoule report` over
all of them (issue: qjoule from Python).

The model is the SST-2 DistilBERT classifier in ../shared (a Hugging Face folder), read with numpy from
its safetensors file and run by the small DistilBERT below (Debian has python3-torch, not transformers).
Accuracy is the torch model's own on SST-2 dev, from the token ids the folder's reference/ holds; it is
recorded as supplied by the caller. Needs Debian's python3-torch (apt install python3-torch).

    PYTHONPATH=build/release/python python3 examples/python/torch_int8.py --out /tmp/torch-vs-qjoule
"""

import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch

import qjoule

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def read_safetensors(path):
    """{name: float32 numpy array} of an F32 safetensors file (8-byte header length, JSON header, data)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise SystemExit(f"{path}: tensor {name} is {t['dtype']}, this example reads F32 only")
        begin, end = t["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=np.float32).reshape(t["shape"])
    return out


class DistilBert(torch.nn.Module):
    """DistilBertForSequenceClassification's forward (eval mode), with nn.Linear layers so that
    torch.ao.quantization.quantize_dynamic quantizes them."""

    def __init__(self, config, weights):
        super().__init__()
        dim, self.heads = config["dim"], config["n_heads"]
        p = "distilbert."
        w = {k: torch.from_numpy(v.copy()) for k, v in weights.items()}
        self.word = torch.nn.Embedding.from_pretrained(w[p + "embeddings.word_embeddings.weight"])
        self.position = torch.nn.Embedding.from_pretrained(w[p + "embeddings.position_embeddings.weight"])
        self.embedding_norm = self._norm(w, p + "embeddings.LayerNorm", dim)
        self.layers = torch.nn.ModuleList()
        for i in range(config["n_layers"]):
            q = f"{p}transformer.layer.{i}."
            layer = torch.nn.Module()
            for name in ("q_lin", "k_lin", "v_lin", "out_lin"):
                setattr(layer, name, self._linear(w, q + "attention." + name))
            layer.lin1 = self._linear(w, q + "ffn.lin1")
            layer.lin2 = self._linear(w, q + "ffn.lin2")
            layer.sa_norm = self._norm(w, q + "sa_layer_norm", dim)
            layer.out_norm = self._norm(w, q + "output_layer_norm", dim)
            self.layers.append(layer)
        self.pre_classifier = self._linear(w, "pre_classifier")
        self.classifier = self._linear(w, "classifier")

    @staticmethod
    def _linear(w, name):
        weight = w[name + ".weight"]
        linear = torch.nn.Linear(weight.shape[1], weight.shape[0])
        linear.weight.data.copy_(weight)
        linear.bias.data.copy_(w[name + ".bias"])
        return linear

    @staticmethod
    def _norm(w, name, dim):
        norm = torch.nn.LayerNorm(dim, eps=1e-12)
        norm.weight.data.copy_(w[name + ".weight"])
        norm.bias.data.copy_(w[name + ".bias"])
        return norm

    def forward(self, ids, mask):
        b, s = ids.shape
        x = self.embedding_norm(self.word(ids) + self.position(torch.arange(s).unsqueeze(0)))
        d = x.shape[-1] // self.heads
        keep = mask[:, None, None, :].bool()
        for l in self.layers:
            def split(t):
                return t.view(b, s, self.heads, d).transpose(1, 2)
            q, k, v = split(l.q_lin(x)) / math.sqrt(d), split(l.k_lin(x)), split(l.v_lin(x))
            scores = (q @ k.transpose(-1, -2)).masked_fill(~keep, torch.finfo(x.dtype).min)
            ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, -1)
            x = l.sa_norm(l.out_lin(ctx) + x)
            x = l.out_norm(l.lin2(torch.nn.functional.gelu(l.lin1(x))) + x)
        return self.classifier(torch.relu(self.pre_classifier(x[:, 0])))


def read_token_ids(path, max_length):
    rows = []
    with open(path) as f:
        for line in f:
            index, ids = line.rstrip("\n").split("\t")
            rows.append([int(t) for t in ids.split()][:max_length])
    return rows


def read_labels(path):
    with open(path) as f:
        next(f)
        return [int(line.rstrip("\n").split("\t")[-1]) for line in f if line.strip()]


def padded(rows):
    n = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), n, dtype=torch.long)
    mask = torch.zeros(len(rows), n, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r)
        mask[i, :len(r)] = 1
    return ids, mask


@torch.no_grad()
def evaluate(model, rows, labels, batch=32):
    logits = []
    for i in range(0, len(rows), batch):
        ids, mask = padded(rows[i:i + batch])
        logits.append(model(ids, mask))
    logits = torch.cat(logits)
    correct = int((logits.argmax(-1) == torch.tensor(labels)).sum())
    return correct, logits


def model_bytes(model):
    """Bytes of parameters and packed quantized weights as the module holds them."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    for m in model.modules():
        if isinstance(m, torch.ao.nn.quantized.dynamic.Linear):
            weight, bias = m.weight(), m.bias()
            per_channel = weight.qscheme() == torch.per_channel_affine
            total += weight.int_repr().numel()  # one byte a weight
            total += weight.q_per_channel_scales().numel() * 12 if per_channel else 12  # scale + zero point
            total += 0 if bias is None else bias.numel() * 4
    return total


def main():
    shared = os.path.join(ROOT, "..", "shared", "data")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=os.path.join(shared, "models", "sst2-distilbert-mini"))
    parser.add_argument("--dataset", default=os.path.join(shared, "sst2", "dev.tsv"))
    parser.add_argument("--qjoule", default=os.path.join(ROOT, "build", "release", "src", "cli", "qjoule"))
    parser.add_argument("--out", required=True, help="results folder (qjoule bench's runs, then the torch runs)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--min-time", type=float, default=2.0)
    a = parser.parse_args()
    torch.set_num_threads(os.cpu_count())
    # What this torch build multiplies FP32 with (Debian's python3-torch 1.13: BLAS_INFO=generic, a
    # reference BLAS), said in the record's kernel path.
    blas = next((part.split("=", 1)[1] for part in torch.__config__.show().replace(",", " ").split()
                 if part.startswith("BLAS_INFO=")), "unknown")

    # 1. qjoule's own runs of the checkpoint (skipped when the folder has them).
    if not os.path.exists(os.path.join(a.out, "results.jsonl")):
        subprocess.run([a.qjoule, "bench", "--model", a.model, "--dataset", a.dataset, "--precisions", "fp32,int8",
                        "--batch", str(a.batch), "--seq", str(a.seq), "--out", a.out], check=True)

    # 2. The same checkpoint in PyTorch, FP32 and dynamic INT8.
    with open(os.path.join(a.model, "config.json")) as f:
        config = json.load(f)
    fp32 = DistilBert(config, read_safetensors(os.path.join(a.model, "model.safetensors"))).eval()
    int8 = torch.ao.quantization.quantize_dynamic(fp32, {torch.nn.Linear}, dtype=torch.qint8)
    rows = read_token_ids(os.path.join(a.model, "reference", "dev_token_ids.tsv"), a.seq)
    labels = read_labels(a.dataset)
    generator = torch.Generator().manual_seed(7)
    ids = torch.randint(1000, config["vocab_size"], (a.batch, a.seq), generator=generator)
    mask = torch.ones_like(ids)
    _, reference = evaluate(fp32, rows, labels)
    with qjoule.Meter() as meter:
        for label, model, kernel in (("torch-fp32", fp32, f"torch {torch.__version__} nn.Linear fp32 (aten::linear, BLAS_INFO={blas})"),
                                     ("torch-int8-dynamic", int8,
                                      f"torch {torch.__version__} torch.ao quantize_dynamic qint8 "
                                      f"(engine {torch.backends.quantized.engine})")):
            correct, logits = evaluate(model, rows, labels)
            p, q = reference.log_softmax(-1), logits.log_softmax(-1)
            fidelity = {"top1_agreement": float((logits.argmax(-1) == reference.argmax(-1)).float().mean()),
                        "mean_kl": float((p.exp() * (p - q)).sum(-1).mean().clamp(min=0)),
                        "max_abs_dlogit": float((logits - reference).abs().max()), "examples": len(rows)}

            def forward(model=model):
                with torch.no_grad():
                    model(ids, mask)

            record = qjoule.bench(forward, name=f"{label}_s{a.seq}_bs{a.batch}", precision=label, batch=a.batch,
                                  tokens=a.seq, out=a.out, model=a.model, dataset=a.dataset,
                                  accuracy=(correct, len(labels)), fidelity=fidelity, model_bytes=model_bytes(model),
                                  kernel_path=kernel, threads=torch.get_num_threads(), min_time=a.min_time,
                                  meter=meter)
            print(f"{record['run_name']}: p50 {record['latency_p50_ms']:.2f} ms, accuracy {correct}/{len(labels)}, "
                  f"energy {record['energy_j'] if record['energy_j'] is not None else record['energy_unavailable']}")

    # 3. One report over all of them.
    report = os.path.join(a.out, "report.html")
    subprocess.run([a.qjoule, "report", os.path.join(a.out, "results.jsonl"), "-o", report], check=True)
    print(f"wrote {report}")
    for r in qjoule.read_results(a.out):
        print(f"{r['run_name']:<55} {r['precision']:<20} p50 {r['latency_p50_ms']:8.2f} ms  "
              f"accuracy {r['accuracy']:.4f}  {r['kernel_paths'][0][:60]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
