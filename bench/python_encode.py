#!/usr/bin/python3
"""Python side of bench/python.sh: lipi's Python package against the C
library and Debian's python3-sentencepiece on one SentencePiece .model.

    python_encode.py TEXT MODEL BENCH_ENCODE RUNS

Rows (input MB/s, 10^6 bytes of text without newlines per wall second;
median of RUNS; pairs of rows run alternately so a slow minute of this
shared machine hits both):
  C library   bench/encode (lipi_encode_batch from C, batches of 1000
              lines, new sessions per run), 1 and 2 threads;
  lipi numpy  Tokenizer.encode_batch_numpy(lines, padded=False) on a new
              Tokenizer per run (no warm caches), 1 and 2 threads;
  lipi list   Tokenizer.encode_batch(lines): an Encoding per line, ids read;
  sentencepiece  SentencePieceProcessor.encode(lines) (one thread: the
              Debian 0.1.97 binding has no num_threads).
Then the per-call cost of one short string: encode("Hello world") and
sentencepiece's encode of it, best of 5 x 100,000 calls.
Ids are checked first: lipi's (special tokens as text, as SentencePiece
reads them) against sentencepiece's, line by line."""
import statistics
import subprocess
import sys
import time
import timeit

import lipi
import sentencepiece as spm

text, model, bench_encode, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with open(text, encoding="utf-8") as f:
    lines = f.read().split("\n")
if lines and lines[-1] == "":
    lines.pop()
nbytes = sum(len(x.encode()) for x in lines)
sp = spm.SentencePieceProcessor(model_file=model)


def fresh():
    t = lipi.Tokenizer.from_file(model)
    t.set_special("text")
    return t


# -- the ids first ----------------------------------------------------------
tok = fresh()
ref = sp.encode(lines)
flat, starts = tok.encode_batch_numpy(lines, padded=False)
mismatch = sum(1 for i, r in enumerate(ref) if flat[starts[i]:starts[i + 1]].tolist() != r)
ntokens = len(flat)
print(f"# text {text}: {len(lines)} lines, {nbytes} bytes, {ntokens} tokens; model {model};"
      f" lines whose ids differ from sentencepiece's: {mismatch}")


def c_library(threads):
    out = subprocess.run([bench_encode, "-t", model, "--threads", str(threads), "--runs", "1", text],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    kv = dict(x.split("=", 1) for x in out.split() if "=" in x)
    return float(kv["MB/s"].split()[0])


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return nbytes / 1e6 / (time.perf_counter() - t0)


def lipi_numpy(threads):
    t = fresh()
    return timed(lambda: t.encode_batch_numpy(lines, threads=threads, padded=False))


def lipi_list(threads):
    t = fresh()
    return timed(lambda: [e.ids for e in t.encode_batch(lines, threads=threads)])


rows = {}
for r in range(runs):
    for th in (1, 2):
        rows.setdefault(f"C library, {th} thread(s)", []).append(c_library(th))
        rows.setdefault(f"lipi numpy, {th} thread(s)", []).append(lipi_numpy(th))
    rows.setdefault("lipi list, 2 threads", []).append(lipi_list(2))
    rows.setdefault("sentencepiece, 1 thread", []).append(timed(lambda: sp.encode(lines)))

print("| row | MB/s median | range |")
print("|---|---|---|")
med = {}
for name, v in rows.items():
    med[name] = statistics.median(v)
    print(f"| {name} | {med[name]:.2f} | {min(v):.2f}-{max(v):.2f} |")
for th in (1, 2):
    print(f"lipi numpy / C library, {th} thread(s): "
          f"{med[f'lipi numpy, {th} thread(s)'] / med[f'C library, {th} thread(s)']:.3f}")
print(f"lipi numpy 2 threads / sentencepiece: "
      f"{med['lipi numpy, 2 thread(s)'] / med['sentencepiece, 1 thread']:.2f}x")
print(f"lipi numpy 1 thread / sentencepiece: "
      f"{med['lipi numpy, 1 thread(s)'] / med['sentencepiece, 1 thread']:.2f}x")

# -- one short string ---------------------------------------------------------
tok = fresh()
s = "Hello world"
n = 100000
for name, stmt in [("lipi encode(s).ids", lambda: tok.encode(s).ids),
                   ("lipi encode(s)", lambda: tok.encode(s)),
                   ("sentencepiece encode(s)", lambda: sp.encode(s))]:
    best = min(timeit.repeat(stmt, number=n, repeat=5)) / n
    print(f"per call, {name!r}: {best * 1e6:.2f} us")
