#!/usr/bin/python3
"""lipi.Embedder.encode against a plain PyTorch forward of the same weights
in the same process (bench/python.sh; Debian python3-torch).

    python_embed.py MODEL_DIR VOCAB FLORES_DIR THREADS RUNS LINES LANG...

MODEL_DIR: a random checkpoint of bench/embed_anchor.py (make DIR minilm|
bert), given VOCAB (multilingual BERT's vocab.txt, whose 119,547 tokens the
checkpoint has) as its tokenizer. Sentences: the first LINES lines of each
LANG's FLORES-200 devtest file, sorted longest first as
sentence-transformers' encode sorts them; batches of 32. lipi: Embedder(
dtype f32, mean pooling, max_length 128).encode; PyTorch: embed_anchor's
Bert (eager attention, exact GELU, mean pooling) on the same ids padded to
each batch's longest, torch.set_num_threads(THREADS), inference_mode. The
median of RUNS timed passes after a warm-up pass, alternating the two.
The vectors are compared (min cosine) before timing."""
import os
import shutil
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import embed_anchor  # noqa: E402
import lipi  # noqa: E402

d, vocab, flores, threads, runs, lines = sys.argv[1:7]
threads, runs, lines = int(threads), int(runs), int(lines)
langs = sys.argv[7:]
if not os.path.exists(os.path.join(d, "vocab.txt")):
    shutil.copy(vocab, os.path.join(d, "vocab.txt"))
texts = []
for lang in langs:
    with open(os.path.join(flores, lang + ".txt"), encoding="utf-8") as f:
        texts += f.read().split("\n")[:lines]
texts.sort(key=len, reverse=True)

model = lipi.Embedder(d, dtype="f32", threads=threads, pooling="mean", max_length=128)
tok = lipi.Tokenizer.from_file(os.path.join(d, "vocab.txt"))
tok.enable_truncation(128)
seqs = [e.ids for e in tok.encode_batch(texts, add_special_tokens=True)]
with open(os.path.join(d, "shape")) as f:
    kind = f.read().strip()
torch.set_num_threads(threads)
ref = embed_anchor.Bert(embed_anchor.SHAPES[kind])
ref.load(embed_anchor.read_safetensors(os.path.join(d, "model.safetensors")))
ref.eval()
bs = embed_anchor.batches(seqs)


def run_torch():
    with torch.inference_mode():
        return torch.cat([ref(ids, mask) for ids, mask in bs]).numpy()


def run_lipi():
    return model.encode(texts, batch_size=32)


a, b = run_lipi(), run_torch()
cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
tokens = sum(len(s) for s in seqs)
print(f"# {kind}, {len(texts)} sentences ({tokens} tokens, {lines} lines of {len(langs)} "
      f"languages), {threads} threads, torch {torch.__version__}; min cosine lipi vs torch "
      f"{cos.min():.6f}")
times = {"lipi": [], "torch": []}
for _ in range(runs):
    for name, fn in (("lipi", run_lipi), ("torch", run_torch)):
        t0 = time.perf_counter()
        fn()
        times[name].append(time.perf_counter() - t0)
med = {k: statistics.median(v) for k, v in times.items()}
for k, v in times.items():
    print(f"| {k} | {len(texts) / med[k]:.1f} sentences/s | {tokens / med[k]:.0f} tokens/s |"
          f" wall {med[k]:.3f} s ({min(v):.3f}-{max(v):.3f}) |")
print(f"lipi / torch: {med['torch'] / med['lipi']:.2f}x")
