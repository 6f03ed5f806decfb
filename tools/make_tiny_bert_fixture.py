#!/usr/bin/python3
"""Writes tests/fixtures/tiny-bert: a tiny random BertForSequenceClassification checkpoint in
Hugging Face layout, a labelled TSV, PyTorch's token ids and FP32 logits for it.

Plain PyTorch (Debian's python3-torch), written from BERT's definition (no transformers package):
  embeddings = LayerNorm(word[ids] + position[0..S) + token_type[0])
  per layer (post-LN): x = LN(x + Wo·attention(Wq x, Wk x, Wv x)); x = LN(x + W2·gelu(W1 x))
  attention = softmax(q kᵀ / sqrt(d_head) + mask) v, masked keys get float32's minimum
  head: logits = classifier(tanh(pooler(x[:, 0])))
Usage: /usr/bin/python3 tools/make_tiny_bert_fixture.py [OUT_DIR]
"""
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from safetensors_writer import safetensors_bytes  # noqa: E402

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "tests/fixtures/tiny-bert"
HIDDEN, LAYERS, HEADS, FFN, POSITIONS, TYPES, LABELS = 32, 2, 4, 64, 40, 2, 3
EPS = 1e-12
WORDS = ("the a film movie is was and but not very good bad great awful funny dull story actors plot "
         "love hate it this that of to in with boring brilliant charming mess best worst ever "
         "##s ##ly ##ing fun slow fast smart dumb").split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PUNCT = [".", ",", "!", "?", "'"]


def make_weights(gen):
    def normal(*shape, std=0.2):
        return torch.randn(*shape, generator=gen) * std

    w = {
        "bert.embeddings.word_embeddings.weight": normal(len(VOCAB), HIDDEN, std=0.5),
        "bert.embeddings.position_embeddings.weight": normal(POSITIONS, HIDDEN, std=0.5),
        "bert.embeddings.token_type_embeddings.weight": normal(TYPES, HIDDEN, std=0.5),
        "bert.embeddings.LayerNorm.weight": 1 + normal(HIDDEN, std=0.1),
        "bert.embeddings.LayerNorm.bias": normal(HIDDEN, std=0.1),
        "bert.embeddings.position_ids": torch.arange(POSITIONS, dtype=torch.int64).unsqueeze(0),  # HF buffer
    }
    for i in range(LAYERS):
        p = f"bert.encoder.layer.{i}."
        for name, out_f, in_f in [("attention.self.query", HIDDEN, HIDDEN), ("attention.self.key", HIDDEN, HIDDEN),
                                  ("attention.self.value", HIDDEN, HIDDEN), ("attention.output.dense", HIDDEN, HIDDEN),
                                  ("intermediate.dense", FFN, HIDDEN), ("output.dense", HIDDEN, FFN)]:
            w[p + name + ".weight"] = normal(out_f, in_f, std=1.0 / math.sqrt(in_f))
            w[p + name + ".bias"] = normal(out_f, std=0.1)
        for name in ["attention.output.LayerNorm", "output.LayerNorm"]:
            w[p + name + ".weight"] = 1 + normal(HIDDEN, std=0.1)
            w[p + name + ".bias"] = normal(HIDDEN, std=0.1)
    w["bert.pooler.dense.weight"] = normal(HIDDEN, HIDDEN, std=1.0 / math.sqrt(HIDDEN))
    w["bert.pooler.dense.bias"] = normal(HIDDEN, std=0.1)
    w["classifier.weight"] = normal(LABELS, HIDDEN, std=1.0)
    w["classifier.bias"] = normal(LABELS, std=0.1)
    return w


def layer_norm(x, w, prefix):
    return torch.nn.functional.layer_norm(x, (HIDDEN,), w[prefix + ".weight"], w[prefix + ".bias"], EPS)


def linear(x, w, prefix):
    return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]


def forward(w, ids, mask):
    batch, seq = ids.shape
    x = (w["bert.embeddings.word_embeddings.weight"][ids] + w["bert.embeddings.position_embeddings.weight"][:seq]
         + w["bert.embeddings.token_type_embeddings.weight"][0])
    x = layer_norm(x, w, "bert.embeddings.LayerNorm")
    d = HIDDEN // HEADS
    bias = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    for i in range(LAYERS):
        p = f"bert.encoder.layer.{i}."
        heads = lambda t: t.view(batch, seq, HEADS, d).transpose(1, 2)  # noqa: E731
        q = heads(linear(x, w, p + "attention.self.query"))
        k = heads(linear(x, w, p + "attention.self.key"))
        v = heads(linear(x, w, p + "attention.self.value"))
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d) + bias, dim=-1)
        ctx = (probs @ v).transpose(1, 2).reshape(batch, seq, HIDDEN)
        x = layer_norm(x + linear(ctx, w, p + "attention.output.dense"), w, p + "attention.output.LayerNorm")
        h = torch.nn.functional.gelu(linear(x, w, p + "intermediate.dense"))
        x = layer_norm(x + linear(h, w, p + "output.dense"), w, p + "output.LayerNorm")
    pooled = torch.tanh(linear(x[:, 0], w, "bert.pooler.dense"))
    return linear(pooled, w, "classifier")


def main():
    gen = torch.Generator().manual_seed(20261123)
    global VOCAB
    VOCAB = SPECIALS + PUNCT + WORDS
    ids_of = {t: i for i, t in enumerate(VOCAB)}
    w = make_weights(gen)
    whole = [t for t in WORDS + PUNCT if not t.startswith("##")]
    sentences, token_ids, labels = [], [], []
    for n in range(12):
        length = 1 + int(torch.randint(0, 14, (1,), generator=gen))
        words = [whole[int(torch.randint(0, len(whole), (1,), generator=gen))] for _ in range(length)]
        if n == 3:
            words[0] = words[0].capitalize()  # exercises lower-casing
        sentences.append(" ".join(words))
        token_ids.append([ids_of["[CLS]"]] + [ids_of[x.lower()] for x in words] + [ids_of["[SEP]"]])
        labels.append(int(torch.randint(0, LABELS, (1,), generator=gen)))

    rows = []
    with torch.no_grad():
        for ids in token_ids:  # one at a time: no padding in the reference
            logits = forward(w, torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.int64))[0]
            rows.append(logits.tolist())

    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "model.safetensors").write_bytes(safetensors_bytes(w))
    config = {
        "architectures": ["BertForSequenceClassification"], "model_type": "bert", "vocab_size": len(VOCAB),
        "hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "intermediate_size": FFN, "hidden_act": "gelu", "max_position_embeddings": POSITIONS,
        "type_vocab_size": TYPES, "layer_norm_eps": EPS, "pad_token_id": 0,
        "id2label": {"0": "NEGATIVE", "1": "NEUTRAL", "2": "POSITIVE"},
        "label2id": {"NEGATIVE": 0, "NEUTRAL": 1, "POSITIVE": 2},
    }
    (OUT / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (OUT / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "model_max_length": POSITIONS}) + "\n")
    (OUT / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (OUT / "dataset.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{l}\n" for s, l in zip(sentences, labels)))
    (OUT / "reference_token_ids.tsv").write_text("".join(f"{i}\t{' '.join(map(str, t))}\n" for i, t in enumerate(token_ids)))
    header = "index\tlabel\tpred\t" + "\t".join(f"logit{j}" for j in range(LABELS)) + "\n"
    body = "".join(f"{i}\t{labels[i]}\t{max(range(LABELS), key=lambda j: r[j])}\t" + "\t".join(f"{v:.9g}" for v in r) + "\n"
                   for i, r in enumerate(rows))
    (OUT / "reference_logits.tsv").write_text(header + body)
    print(f"wrote {OUT}: {len(VOCAB)} tokens, {len(sentences)} examples")


if __name__ == "__main__":
    main()
