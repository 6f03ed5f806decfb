#!/usr/bin/python3
"""Writes tests/fixtures/tasks/wikitext2_endings.jsonl: a 500-item multiple-choice task for language
models (`qjoule score`, `qjoule bench --task`) in qjoule's task shape, from WikiText-2's test split
(../shared/data/wikitext2/test.txt; the trained fixture decoder learned from valid.txt):

  context  the sentence before (where both fit in 20 words) and the first half of a sentence;
  choices  the rest of that sentence (3 to 6 words), and the ends of two sentences of other articles
           with as many words, in an order drawn at random (chance: 1/3);
  label    where the true ending is.

Why endings, not whole next sentences: with the true next sentence among two from other articles, the
trained fixture (3 layers, hidden 128, 128 positions) scores at chance (acc 0.33-0.38 over the variants
tried: sentence lengths capped at 20-30 words, contexts of 1-3 sentences, distractors of matched length,
pairs that share a name); a sentence's end is something its context decides for a model this small too.

Articles begin at level-1 headings (" = Title = "); sentences are a paragraph's words up to and with each
" . " (WikiText's tokenized full stop), used with 8 to 40 words and at most one <unk>; the half is
len // 2 words. Items are drawn with random.Random(43), then the distractors and the answer's place.
Deterministic: the same file on every run.

Usage: /usr/bin/python3 tools/make_sentence_ending_task.py [OUT_FILE]
"""
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXT = ROOT.parent / "shared" / "data" / "wikitext2" / "test.txt"
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests/fixtures/tasks/wikitext2_endings.jsonl"
ITEMS, CONTEXT_WORDS, MIN_END, MAX_END = 500, 20, 3, 6


def sentences_of(paragraph):
    out, words = [], []
    for w in paragraph.split():
        words.append(w)
        if w == ".":
            out.append(words)
            words = []
    return out


def articles_of(text):
    articles = []  # each a list of paragraphs, each a list of sentences (word lists)
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("= ") and s.endswith(" =") and not s.startswith("= ="):
            articles.append([])
        elif not s.startswith("=") and articles:
            articles[-1].append(sentences_of(s))
    return articles


def main():
    articles = articles_of(TEXT.read_text(encoding="utf-8"))
    items, ends = [], []
    for a, paragraphs in enumerate(articles):
        for sentences in paragraphs:
            for i, words in enumerate(sentences):
                if not 8 <= len(words) <= 40 or words.count("<unk>") > 1:
                    continue
                half = len(words) // 2
                if not MIN_END <= len(words) - half <= MAX_END:
                    continue
                context = words[:half]
                if i > 0 and len(sentences[i - 1]) + half <= CONTEXT_WORDS:
                    context = sentences[i - 1] + context
                items.append((a, " ".join(context), " ".join(words[half:])))
                ends.append((a, " ".join(words[half:])))
    rng = random.Random(43)
    with OUT.open("w", encoding="utf-8") as f:
        for article, context, ending in rng.sample(items, ITEMS):
            distractors = []
            while len(distractors) < 2:
                a, other = ends[rng.randrange(len(ends))]
                if a != article and other != ending and other not in distractors and \
                        len(other.split()) == len(ending.split()):
                    distractors.append(other)
            label = rng.randrange(3)
            choices = distractors[:label] + [ending] + distractors[label:]
            f.write(json.dumps({"context": context, "choices": choices, "label": label}, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}: {ITEMS} items of {len(items)} sentences in {len(articles)} articles")


if __name__ == "__main__":
    main()
