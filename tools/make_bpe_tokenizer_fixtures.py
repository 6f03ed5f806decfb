#!/usr/bin/python3
"""Writes tests/fixtures/bpe/<name>/{tokenizer.json,expected_ids.jsonl}: tiny BPE tokenizers in
Hugging Face tokenizer.json form, trained here, and the ids (and decoded text) of fixed strings.

  byte_level               GPT-2 style: pre_tokenizer ByteLevel (GPT-2 regex), decoder ByteLevel
  llama3                   Llama-3 style: Sequence[Split(Llama-3 regex), ByteLevel(use_regex=false)],
                           ignore_merges, post_processor Sequence[ByteLevel, TemplateProcessing(<|begin_of_text|> $A)]
  sentencepiece            Llama-2 style: normalizer Sequence[Prepend("▁"), Replace(" ", "▁")], BPE with
                           byte_fallback (all 256 <0xNN> tokens) and fuse_unk, decoder Sequence[Replace,
                           ByteFallback, Fuse, Strip], post_processor TemplateProcessing(<s> $A)
  sentencepiece_metaspace  TinyLlama (newer tokenizers) style: the same model with pre_tokenizer
                           Metaspace(prepend_scheme "first", split false) and no normalizer

The BPE trainer and the reference encoder are written here from the algorithm, following Hugging
Face `tokenizers`: added tokens matched first (leftmost, longest), normalizer per stretch of text,
pre-tokenizer, then merges applied lowest rank first (leftmost on ties). Splitting uses the `regex`
module with the exact pattern strings written into tokenizer.json.

Needs Debian's python3-regex (apt-get install -y python3-regex); the C++ tests only read the
committed outputs. Usage: /usr/bin/python3 tools/make_bpe_tokenizer_fixtures.py [OUT_DIR]
"""
import json
import random
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import regex

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "tests/fixtures/bpe"
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                  r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2_PATTERN = LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")
SPIECE = "\u2581"  # ▁
BYTE_LEVEL_MERGES, SENTENCEPIECE_MERGES = 300, 300

CORPUS = """The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away.
Hello world! Hello there, world. It's a small world after all, isn't it?
We'll see what they've done: I'm sure you'd like it, and they're happy.
Don't stop the music. I'll be there at 10:30 on 2024-05-17, said the 3 friends.
Tokenizers split text into pieces, then merge the most frequent pairs of symbols.
A café serves crème brûlée to a naïve visitor from Zürich and São Paulo.
Numbers like 12345, 678 and 3.14159 appear in the text, as do prices: $9.99 or €20.
Machine learning models read tokens; energy and latency are measured per token.
    def main(): return print("hello world")  # code with    spaces
日本語の文章も少し含まれています。東京は大きな都市です。
The end of the line.\n\nA new paragraph starts here, with more words and more merges.
quantize quantized quantization latency energy accuracy transformer decoder encoder
""" * 2


# ---------------------------------------------------------------------------------------------
# Byte-level alphabet (GPT-2's bytes_to_unicode)

def bytes_to_unicode():
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


BYTE_CHAR = bytes_to_unicode()
CHAR_BYTE = {c: b for b, c in BYTE_CHAR.items()}


def to_byte_chars(text):
    return "".join(BYTE_CHAR[b] for b in text.encode("utf-8"))


def regex_split(text, pattern):
    """Split behavior Isolated: the matches, and any text between them, in order."""
    pieces, last = [], 0
    for m in regex.finditer(pattern, text):
        if m.start() > last:
            pieces.append(text[last:m.start()])
        pieces.append(m.group())
        last = m.end()
    if last < len(text):
        pieces.append(text[last:])
    return pieces


def split_merged_with_next(text, delimiter):
    pieces, start = [], 0
    for i in range(1, len(text)):
        if text[i] == delimiter:
            if i > start:
                pieces.append(text[start:i])
            start = i
    if start < len(text):
        pieces.append(text[start:])
    return pieces


# ---------------------------------------------------------------------------------------------
# Training: the classic BPE loop over word counts; ties go to the smallest pair.

def train_merges(words, alphabet, num_merges):
    """words: Counter of words (strings); returns merges [(a, b)] and the final vocabulary order."""
    vocab = list(alphabet)
    known = set(vocab)
    split = {w: [c for c in w] for w in words}
    merges = []
    while len(merges) < num_merges:
        pairs = Counter()
        for w, count in words.items():
            s = split[w]
            for a, b in zip(s, s[1:]):
                if a in known and b in known:  # characters left out of the alphabet never merge
                    pairs[(a, b)] += count
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        merged = best[0] + best[1]
        if merged not in known:
            known.add(merged)
            vocab.append(merged)
        for w in words:
            s, out, i = split[w], [], 0
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == best:
                    out.append(merged)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            split[w] = out
    return merges, vocab


# ---------------------------------------------------------------------------------------------
# Reference encoder / decoder (the Hugging Face tokenizers pipeline, for what these files use)

class Reference:
    def __init__(self, doc):
        self.doc = doc
        model = doc["model"]
        self.vocab = model["vocab"]
        self.ranks = {}
        for i, (a, b) in enumerate(m.split(" ") if isinstance(m, str) else m for m in model["merges"]):
            self.ranks[(a, b)] = i
        self.byte_fallback = model.get("byte_fallback", False)
        self.fuse_unk = model.get("fuse_unk", False)
        self.ignore_merges = model.get("ignore_merges", False)
        self.unk = model.get("unk_token")
        self.added = sorted(doc["added_tokens"], key=lambda t: -len(t["content"]))
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        for t in doc["added_tokens"]:
            self.id_to_token[t["id"]] = t["content"]
        self.prefix, self.suffix = [], []
        post = doc.get("post_processor")
        for step in (post["processors"] if post and post["type"] == "Sequence" else [post] if post else []):
            if step["type"] != "TemplateProcessing":
                continue
            seen_a = False
            for piece in step["single"]:
                if "Sequence" in piece:
                    seen_a = True
                else:
                    ids = step["special_tokens"][piece["SpecialToken"]["id"]]["ids"]
                    (self.suffix if seen_a else self.prefix).extend(ids)

    def split_added(self, text):
        """[(text, id or None, offset)], leftmost match, longest token first."""
        out, plain, i = [], 0, 0
        while i < len(text):
            match = next((t for t in self.added if text.startswith(t["content"], i)), None)
            if match is None:
                i += 1
                continue
            if i > plain:
                out.append((text[plain:i], None, plain))
            out.append((match["content"], match["id"], i))
            i = plain = i + len(match["content"])
        if plain < len(text):
            out.append((text[plain:], None, plain))
        return out

    def normalize(self, text):
        node = self.doc.get("normalizer")
        for step in (node["normalizers"] if node and node["type"] == "Sequence" else [node] if node else []):
            if step["type"] == "Prepend":
                text = step["prepend"] + text if text else text
            elif step["type"] == "Replace":
                text = text.replace(step["pattern"]["String"], step["content"])
            elif step["type"] == "NFC":
                text = unicodedata.normalize("NFC", text)
        return text

    def pre_tokenize(self, text, at_start):
        node = self.doc.get("pre_tokenizer")
        pieces = [text] if text else []
        for step in (node["pretokenizers"] if node and node["type"] == "Sequence" else [node] if node else []):
            out = []
            for i, p in enumerate(pieces):
                if step["type"] == "ByteLevel":
                    if step["add_prefix_space"] and not p.startswith(" "):
                        p = " " + p
                    words = regex_split(p, GPT2_PATTERN) if step["use_regex"] else [p]
                    out += [to_byte_chars(w) for w in words]
                elif step["type"] == "Split":
                    out += regex_split(p, step["pattern"]["Regex"])
                elif step["type"] == "Metaspace":
                    p = p.replace(" ", step["replacement"])
                    scheme = step["prepend_scheme"]
                    if (scheme == "always" or (scheme == "first" and at_start and i == 0)) and not p.startswith(
                            step["replacement"]):
                        p = step["replacement"] + p
                    out += split_merged_with_next(p, step["replacement"]) if step["split"] else [p]
            pieces = [p for p in out if p]
        return pieces

    def bpe(self, word):
        if self.ignore_merges and word in self.vocab:
            return [self.vocab[word]]
        symbols, last_unk = [], False
        for ch in word:
            if ch in self.vocab:
                symbols.append(ch)
                last_unk = False
                continue
            byte_tokens = ["<0x%02X>" % b for b in ch.encode("utf-8")]
            if self.byte_fallback and all(t in self.vocab for t in byte_tokens):
                symbols += byte_tokens
                last_unk = False
                continue
            if self.unk is None:
                continue
            if not (self.fuse_unk and last_unk):
                symbols.append(self.unk)
            last_unk = True
        while len(symbols) > 1:
            candidates = [(self.ranks[(a, b)], i) for i, (a, b) in enumerate(zip(symbols, symbols[1:]))
                          if (a, b) in self.ranks]
            if not candidates:
                break
            _, i = min(candidates)
            symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
        return [self.vocab[s] for s in symbols]

    def encode(self, text, add_special_tokens=False):
        ids = list(self.prefix) if add_special_tokens else []
        for segment, token_id, offset in self.split_added(text):
            if token_id is not None:
                ids.append(token_id)
                continue
            for word in self.pre_tokenize(self.normalize(segment), offset == 0):
                ids += self.bpe(word)
        return ids + (list(self.suffix) if add_special_tokens else [])

    def decode(self, ids):
        tokens = [self.id_to_token[i] for i in ids]
        node = self.doc["decoder"]
        for step in node["decoders"] if node["type"] == "Sequence" else [node]:
            kind = step["type"]
            if kind == "ByteLevel":
                raw = b""
                for t in tokens:
                    raw += bytes(CHAR_BYTE[c] for c in t) if all(c in CHAR_BYTE for c in t) else t.encode()
                tokens = [raw.decode("utf-8", errors="replace")]
            elif kind == "Replace":
                tokens = [t.replace(step["pattern"]["String"], step["content"]) for t in tokens]
            elif kind == "ByteFallback":
                out, pending = [], b""
                for t in tokens + [None]:
                    if t is not None and len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
                        pending += bytes([int(t[3:5], 16)])
                        continue
                    if pending:
                        try:
                            out.append(pending.decode("utf-8"))
                        except UnicodeDecodeError:
                            out += ["\ufffd"] * len(pending)
                        pending = b""
                    if t is not None:
                        out.append(t)
                tokens = out
            elif kind == "Fuse":
                tokens = ["".join(tokens)]
            elif kind == "Strip":
                out = []
                for t in tokens:
                    start = 0
                    while start < step["start"] and start < len(t) and t[start] == step["content"]:
                        start += 1
                    stop = 0
                    while stop < step["stop"] and stop < len(t) - start and t[len(t) - 1 - stop] == step["content"]:
                        stop += 1
                    out.append(t[start:len(t) - stop])
                tokens = out
        return "".join(tokens)


# ---------------------------------------------------------------------------------------------
# The tokenizer.json files

def added(content, token_id, special=True):
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": not special, "special": special}


def template(token, token_id):
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": token, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": token, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": token, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {token: {"id": token, "ids": [token_id], "tokens": [token]}}}


def byte_level_words(pattern):
    words = Counter()
    for line in CORPUS.splitlines(keepends=True):
        for piece in regex_split(line, pattern):
            words[to_byte_chars(piece)] += 1
    return words


def byte_level_tokenizer(pattern, specials, llama3):
    alphabet = [BYTE_CHAR[b] for b in range(256)]
    merges, vocab = train_merges(byte_level_words(pattern), alphabet, BYTE_LEVEL_MERGES)
    ids = {t: i for i, t in enumerate(vocab)}
    added_tokens = [added(t, len(vocab) + i) for i, t in enumerate(specials)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": not llama3}
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens, "normalizer": None}
    if llama3:
        doc["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated", "invert": False},
            byte_level]}
        doc["post_processor"] = {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            template(specials[0], added_tokens[0]["id"])]}
    else:
        doc["pre_tokenizer"] = byte_level
        doc["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                                 "use_regex": True}
    doc["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    doc["model"] = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                    "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                    "ignore_merges": llama3, "vocab": ids,
                    # Llama-3 files list merges as pairs (tokenizers >= 0.20), GPT-2 as "a b" strings.
                    "merges": [[a, b] for a, b in merges] if llama3 else [f"{a} {b}" for a, b in merges]}
    return doc


def sentencepiece_tokenizer(metaspace):
    words = Counter()
    for line in CORPUS.splitlines():
        words.update(split_merged_with_next(SPIECE + line.replace(" ", SPIECE), SPIECE))
    chars = Counter(c for w, n in words.items() for c in w for _ in range(n))
    # Rare characters stay out of the alphabet, so that byte_fallback has work to do.
    alphabet = sorted((c for c, n in chars.items() if n >= 4), key=lambda c: (-chars[c], c))
    specials = ["<unk>", "<s>", "</s>"]
    base = specials + ["<0x%02X>" % b for b in range(256)]
    merges, vocab = train_merges(words, alphabet, SENTENCEPIECE_MERGES)
    ids = {t: i for i, t in enumerate(base + vocab)}
    doc = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [added(t, i) for i, t in enumerate(specials)]}
    if metaspace:
        doc["normalizer"] = None
        doc["pre_tokenizer"] = {"type": "Metaspace", "replacement": SPIECE, "prepend_scheme": "first", "split": False}
    else:
        doc["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPIECE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPIECE}]}
        doc["pre_tokenizer"] = None
    doc["post_processor"] = template("<s>", 1)
    doc["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": SPIECE}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    doc["model"] = {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                    "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                    "vocab": ids, "merges": [f"{a} {b}" for a, b in merges]}
    return doc


TEXTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "café naïve",
    "crème brûlée in Zürich",
    "🙂👍",
    "日本語のテキスト",
    " leading space",
    "   three leading spaces",
    "multiple   spaces  between",
    "trailing spaces   ",
    "a\n\nb",
    "line one\r\nline two\n",
    "tabs\tand\t\ttabs",
    "12345",
    "1234567 and 3.14159",
    "don't I'll we've they're she'd",
    "DON'T WE'LL It'S",
    "quantization latency energy",
    "unseen zyzzyva xylophone",
    "   ",
    "x",
    "",
    "Ω≈ç√∫˜µ≤≥÷",
    "mixed 日本 text, ümlauts and 123abc!!",
    "    def main(): return 0  # code",
    "x  \n  y",
    "?!\r\n\r\nnext",
    "it's  'quoted'  ",
    "\u0661\u0662\u0663\u0664 \u216b \u00bd",
    "\u00a0nbsp\u2003em\u3000space",
    "tab\t\nnewline \n",
]


def special_texts(specials):
    a, b = specials[0], specials[-1]
    return [f"{a}Hello world{b}", f"Hello {a} world", f"{a}{b}{a}", f"text with {b}\nand more", f" {a} x"]


def write(name, doc, specials):
    ref = Reference(doc)
    out = OUT / name
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    lines = []
    for text in TEXTS + special_texts(specials):
        for add_special in ([False, True] if text in ("Hello world", "") else [False]):
            ids = ref.encode(text, add_special)
            lines.append(json.dumps({"text": text, "add_special_tokens": add_special, "ids": ids,
                                     "decoded": ref.decode(ids)}, ensure_ascii=False))
    (out / "expected_ids.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{name}: vocab {len(doc['model']['vocab'])}, merges {len(doc['model']['merges'])}, {len(lines)} texts")


# Characters that exercise every branch of the split patterns: contractions in both cases (and the
# long s that (?i) folds to 's'), Unicode letters / digits / spaces, newlines, punctuation, emoji.
SPLIT_ALPHABET = list("aZé日'sStTlLrRevVmMdD") + list("09\u0663\u216b\u00bd") + \
    [" ", " ", " ", "\n", "\r", "\t", "\u00a0", "\u3000", "!", ".", "(", "\U0001f642", "\u017f", "_"]


def write_split_cases():
    """tests/fixtures/bpe/split_patterns.jsonl: random strings and the regex module's pieces."""
    rng = random.Random(20240517)
    lines = []
    for name, pattern in [("gpt2", GPT2_PATTERN), ("llama3", LLAMA3_PATTERN), ("qwen2", QWEN2_PATTERN)]:
        for _ in range(150):
            text = "".join(rng.choice(SPLIT_ALPHABET) for _ in range(rng.randint(1, 14)))
            lines.append(json.dumps({"pattern": name, "text": text, "pieces": regex_split(text, pattern)},
                                    ensure_ascii=False))
    (OUT / "split_patterns.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"split_patterns: {len(lines)} cases")


def main():
    write_split_cases()
    gpt2_specials = ["<|endoftext|>", "<|pad|>"]
    write("byte_level", byte_level_tokenizer(GPT2_PATTERN, gpt2_specials, llama3=False), gpt2_specials)
    llama3_specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    write("llama3", byte_level_tokenizer(LLAMA3_PATTERN, llama3_specials, llama3=True), llama3_specials)
    sp_specials = ["<s>", "</s>"]
    write("sentencepiece", sentencepiece_tokenizer(metaspace=False), sp_specials)
    write("sentencepiece_metaspace", sentencepiece_tokenizer(metaspace=True), sp_specials)


if __name__ == "__main__":
    main()
