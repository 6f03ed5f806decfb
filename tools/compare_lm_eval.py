#!/usr/bin/env python3
"""Runs lm-evaluation-harness (its Hugging Face backend, float32 on the CPU) and `qjoule score` on the same
decoder and multiple-choice task file (qjoule's rows: context, choices, label), and compares them item by
item: each choice's log-likelihood (largest |difference|, items beyond --budget), the choice each picks,
acc and acc_norm. Prints one line each; exits 1 when an item is beyond the budget or the accuracies differ.

lm-eval's own task for the file is written to a temporary folder (dataset_path json, doc_to_text the
context, doc_to_choice the choices, doc_to_target the label, acc and acc_norm), so no dataset is fetched.
By default qjoule scores as lm-eval's `_encode_pair` does with no BOS (README, "Task accuracy") and this
script gives lm-eval `add_bos_token=False`; with --special-tokens both encode with the tokenizer's special
tokens (its BOS): `qjoule score --special-tokens` and lm-eval's own default from 0.4.10.

A model folder without tokenizer_config.json (the fixtures) is copied with one naming <s> / </s> (lm-eval
needs a prefix token). Beside qjoule, never in CI:
  python3 -m venv /tmp/lmeval && /tmp/lmeval/bin/pip install lm_eval==0.4.13 torch transformers
  /tmp/lmeval/bin/python tools/compare_lm_eval.py --qjoule build/release/src/cli/qjoule \
      --model tests/fixtures/decoders/trained-llama --task tests/fixtures/tasks/wikitext2_endings.jsonl
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--qjoule", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--task", required=True, help="a task file in qjoule's rows (context, choices, label)")
    p.add_argument("--budget", type=float, default=1e-4, help="largest |log-likelihood difference| accepted")
    p.add_argument("--special-tokens", action="store_true",
                   help="both with the tokenizer's BOS (lm-eval's default; qjoule score --special-tokens)")
    a = p.parse_args()
    import lm_eval

    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.abspath(a.model)
        if not os.path.exists(os.path.join(model, "tokenizer_config.json")):
            model = os.path.join(tmp, "model")
            shutil.copytree(a.model, model)
            with open(os.path.join(model, "tokenizer_config.json"), "w") as f:
                json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
                           "unk_token": "<unk>"}, f)
        tasks = os.path.join(tmp, "tasks")
        os.makedirs(tasks)
        with open(os.path.join(tasks, "qjoule_task.yaml"), "w") as f:
            f.write(f"""task: qjoule_task
dataset_path: json
dataset_kwargs:
  data_files:
    test: {os.path.abspath(a.task)}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{context}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{label}}}}"
metric_list:
  - metric: acc
  - metric: acc_norm
""")
        model_args = f"pretrained={model},dtype=float32" + ("" if a.special_tokens else ",add_bos_token=False")
        out = os.path.join(tmp, "out")
        subprocess.run([sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", model_args, "--tasks",
                        "qjoule_task", "--include_path", tasks, "--device", "cpu", "--batch_size", "16",
                        "--log_samples", "--output_path", out], check=True, capture_output=True,
                       env=dict(os.environ, HF_DATASETS_OFFLINE="1"))
        samples = sorted((json.loads(line) for line in open(glob.glob(os.path.join(out, "*", "samples_*.jsonl"))[0])),
                         key=lambda s: s["doc_id"])
        results = json.load(open(glob.glob(os.path.join(out, "*", "results_*.json"))[0]))["results"]["qjoule_task"]
        score = os.path.join(tmp, "score.json")
        subprocess.run([a.qjoule, "score", "--model", a.model, "--task", a.task, "--json", score] +
                       (["--special-tokens"] if a.special_tokens else []), check=True, capture_output=True)
        q = json.load(open(score))["tasks"][0]
    worst, beyond, same = 0.0, 0, 0
    for s, item in zip(samples, q["per_item"]):
        theirs = [float(r[0]) if isinstance(r, list) else float(r) for r in s["filtered_resps"]]
        d = max(abs(x - y) for x, y in zip(theirs, item["loglik"]))
        worst, beyond = max(worst, d), beyond + (d > a.budget)
        same += max(range(len(theirs)), key=lambda i: theirs[i]) == item["chosen"]
    print(f"lm-eval {lm_eval.__version__} ({'its default: the tokenizer BOS' if a.special_tokens else 'add_bos_token=False'}) vs qjoule, "
          f"{len(samples)} items: max |Δ log-likelihood| {worst:.3g}, {beyond} beyond {a.budget:g}, "
          f"the same choice in {same}")
    print(f"acc lm-eval {results['acc,none']:.4f} qjoule {q['acc']:.4f}; acc_norm lm-eval {results['acc_norm,none']:.4f} "
          f"qjoule {q['acc_norm']:.4f}")
    equal = abs(results["acc,none"] - q["acc"]) < 1e-9 and abs(results["acc_norm,none"] - q["acc_norm"]) < 1e-9
    return 0 if beyond == 0 and equal and len(samples) == len(q["per_item"]) else 1


if __name__ == "__main__":
    sys.exit(main())
