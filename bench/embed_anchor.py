#!/usr/bin/python3
"""PyTorch side of bench/embed.sh (Debian python3-torch).

    embed_anchor.py make DIR bert|minilm   random checkpoint (config.json +
                                           model.safetensors) and model.onnx
    embed_anchor.py run DIR THREADS f32|int8 FIXED REAL OUT
                                           PyTorch anchor on two id sets
    embed_anchor.py sets DIR LINES FLORES LANG...
                                           DIR/real.txt: the first LINES
                                           lines of each language, longest
                                           first; DIR/fixed.ids: 32 x 128 ids
    embed_anchor.py diff DIM REF OUT...    max abs diff / min cosine of
                                           embedding files against REF

The model below is BERT in plain PyTorch, step by step as transformers'
modeling_bert computes it with eager attention (q, k, v projections, scores
+ additive mask of the dtype's minimum, softmax, exact GELU), mean pooling
over attention_mask == 1 as sentence-transformers' Pooling does. Inputs are
fed the way sentence-transformers feeds them: the id file's lines are
already sorted by length, taken in batches of 32 and padded to the longest
line of each batch. int8 is torch.ao.quantization.quantize_dynamic on every
nn.Linear (per-tensor int8 weights, dynamic per-tensor activations).

Each run prints one line per id set:
    tool model dtype set threads sentences tokens padded wall_s cpu_s rss_kb
(wall_s, cpu_s: medians over RUNS timed passes after a warm-up on the
first batch) and
writes the REAL set's embeddings (float32, file order) to OUT.
"""
import json
import os
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

SHAPES = {
    # multilingual BERT's vocabulary, so FLORES ids tokenized by mBERT fit
    "bert": dict(layers=12, hidden=768, heads=12, inter=3072, vocab=119547),
    "minilm": dict(layers=6, hidden=384, heads=12, inter=1536, vocab=119547),
}
BATCH = 32
LINEAR = ["attention.self.query", "attention.self.key", "attention.self.value",
          "attention.output.dense", "intermediate.dense", "output.dense"]


def tensors(shape, seed=7):
    rng = np.random.default_rng(seed)
    C, I, V = shape["hidden"], shape["inter"], shape["vocab"]
    out = {}

    def rnd(*dims):
        return (rng.standard_normal(dims, dtype=np.float32) * 0.02).astype(np.float32)

    def ln(name):
        out[name + ".weight"] = (1.0 + rnd(C)).astype(np.float32)
        out[name + ".bias"] = rnd(C)

    out["embeddings.word_embeddings.weight"] = rnd(V, C)
    out["embeddings.position_embeddings.weight"] = rnd(512, C)
    out["embeddings.token_type_embeddings.weight"] = rnd(2, C)
    ln("embeddings.LayerNorm")
    for layer in range(shape["layers"]):
        p = "encoder.layer.%d." % layer
        for k, name in enumerate(LINEAR):
            n_out = I if k == 4 else C
            n_in = I if k == 5 else C
            out[p + name + ".weight"] = rnd(n_out, n_in)
            out[p + name + ".bias"] = rnd(n_out)
        ln(p + "attention.output.LayerNorm")
        ln(p + "output.LayerNorm")
    return out


def write_safetensors(path, ts):
    header, off = {}, 0
    for name, a in ts.items():
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for a in ts.values():
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())
    os.replace(path + ".tmp", path)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, d in header.items():
        a, b = d["data_offsets"]
        out[name] = torch.from_numpy(
            np.frombuffer(data[a:b], dtype="<f4").reshape(d["shape"]).copy())
    return out


class Layer(torch.nn.Module):
    def __init__(self, C, I, H):
        super().__init__()
        self.H, self.D = H, C // H
        self.q, self.k, self.v = (torch.nn.Linear(C, C) for _ in range(3))
        self.ao = torch.nn.Linear(C, C)
        self.ln1 = torch.nn.LayerNorm(C, eps=1e-12)
        self.ff1 = torch.nn.Linear(C, I)
        self.ff2 = torch.nn.Linear(I, C)
        self.ln2 = torch.nn.LayerNorm(C, eps=1e-12)

    def heads(self, x):
        B, L, _ = x.shape
        return x.view(B, L, self.H, self.D).permute(0, 2, 1, 3)

    def forward(self, x, ext_mask):
        B, L, C = x.shape
        q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
        s = torch.matmul(q, k.transpose(-1, -2)) / (self.D ** 0.5) + ext_mask
        p = torch.softmax(s, dim=-1)
        a = torch.matmul(p, v).permute(0, 2, 1, 3).reshape(B, L, C)
        x = self.ln1(self.ao(a) + x)
        return self.ln2(self.ff2(F.gelu(self.ff1(x))) + x)


class Bert(torch.nn.Module):
    """BertModel + mean pooling: (input_ids, attention_mask) -> (B, C)."""

    def __init__(self, shape):
        super().__init__()
        C, I, H, V = shape["hidden"], shape["inter"], shape["heads"], shape["vocab"]
        self.word = torch.nn.Embedding(V, C)
        self.pos = torch.nn.Embedding(512, C)
        self.tok_type = torch.nn.Embedding(2, C)
        self.ln = torch.nn.LayerNorm(C, eps=1e-12)
        self.layers = torch.nn.ModuleList(Layer(C, I, H) for _ in range(shape["layers"]))

    def forward(self, ids, mask):
        L = ids.shape[1]
        pos = torch.arange(L, device=ids.device).unsqueeze(0)
        x = self.ln(self.word(ids) + self.tok_type.weight[0] + self.pos(pos))
        m = mask.to(x.dtype)
        ext = (1.0 - m[:, None, None, :]) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, ext)
        return (x * m.unsqueeze(-1)).sum(1) / m.sum(1, keepdim=True).clamp(min=1e-9)

    def load(self, ts):
        names = {"q": LINEAR[0], "k": LINEAR[1], "v": LINEAR[2], "ao": LINEAR[3],
                 "ff1": LINEAR[4], "ff2": LINEAR[5],
                 "ln1": "attention.output.LayerNorm", "ln2": "output.LayerNorm"}
        sd = {"word.weight": ts["embeddings.word_embeddings.weight"],
              "pos.weight": ts["embeddings.position_embeddings.weight"],
              "tok_type.weight": ts["embeddings.token_type_embeddings.weight"],
              "ln.weight": ts["embeddings.LayerNorm.weight"],
              "ln.bias": ts["embeddings.LayerNorm.bias"]}
        for i in range(len(self.layers)):
            for mine, hf in names.items():
                for wb in ("weight", "bias"):
                    sd["layers.%d.%s.%s" % (i, mine, wb)] = \
                        ts["encoder.layer.%d.%s.%s" % (i, hf, wb)]
        self.load_state_dict(sd)


def make(d, kind):
    shape = SHAPES[kind]
    os.makedirs(d, exist_ok=True)
    stamp = os.path.join(d, "stamp")
    if os.path.exists(stamp):
        return
    cfg = {"architectures": ["BertModel"], "model_type": "bert",
           "vocab_size": shape["vocab"], "hidden_size": shape["hidden"],
           "num_hidden_layers": shape["layers"], "num_attention_heads": shape["heads"],
           "intermediate_size": shape["inter"], "max_position_embeddings": 512,
           "type_vocab_size": 2, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
           "pad_token_id": 0}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    write_safetensors(os.path.join(d, "model.safetensors"), tensors(shape))
    model = Bert(shape)
    model.load(read_safetensors(os.path.join(d, "model.safetensors")))
    model.eval()
    ids = torch.ones(2, 16, dtype=torch.long)
    mask = torch.ones(2, 16, dtype=torch.long)
    torch.onnx.export(model, (ids, mask), os.path.join(d, "model.onnx"),
                      input_names=["input_ids", "attention_mask"], output_names=["embedding"],
                      dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                    "attention_mask": {0: "batch", 1: "seq"},
                                    "embedding": {0: "batch"}},
                      opset_version=14, do_constant_folding=True)
    with open(os.path.join(d, "shape"), "w") as f:
        f.write(kind + "\n")
    with open(stamp, "w") as f:
        f.write("ok\n")


def read_ids(path):
    with open(path) as f:
        return [[int(t) for t in line.split()] for line in f if line.strip()]


def batches(seqs):
    """Padded (ids, mask) tensors of 32 consecutive sequences each."""
    out = []
    for i in range(0, len(seqs), BATCH):
        group = seqs[i:i + BATCH]
        L = max(len(s) for s in group)
        ids = torch.zeros(len(group), L, dtype=torch.long)
        mask = torch.zeros(len(group), L, dtype=torch.long)
        for r, s in enumerate(group):
            ids[r, :len(s)] = torch.tensor(s)
            mask[r, :len(s)] = 1
        out.append((ids, mask))
    return out


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def time_sets(forward, prefix, threads, fixed, real, out):
    """Times forward(ids, mask) over the fixed and the real set (RUNS runs
    after a warm-up batch), prints a "PREFIX set threads sequences tokens
    padded wall cpu rss" line per set and writes the real set's vectors to
    out as little-endian float32."""
    runs = int(os.environ.get("RUNS", "3"))
    for name, path in (("32x128", fixed), ("real", real)):
        seqs = read_ids(path)
        bs = batches(seqs)
        walls, cpus, vecs = [], [], []
        with torch.inference_mode():
            for r in range(runs + 1):
                vecs = []
                w0, c0 = time.perf_counter(), time.process_time()
                for ids, mask in (bs if r else bs[:1]):
                    vecs.append(forward(ids, mask))
                if r:
                    walls.append(time.perf_counter() - w0)
                    cpus.append(time.process_time() - c0)
        tokens = sum(len(s) for s in seqs)
        padded = sum(ids.numel() for ids, _ in bs)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print("%s %s %d %d %d %d %.4f %.4f %d" % (
            prefix, name, threads, len(seqs), tokens, padded, median(walls),
            median(cpus), rss), flush=True)
        if name == "real":
            torch.cat(vecs).numpy().astype("<f4").tofile(out)


def run(d, threads, dtype, fixed, real, out):
    with open(os.path.join(d, "shape")) as f:
        kind = f.read().strip()
    torch.set_num_threads(threads)
    model = Bert(SHAPES[kind])
    model.load(read_safetensors(os.path.join(d, "model.safetensors")))
    model.eval()
    if dtype == "int8":
        torch.backends.quantized.engine = "onednn"
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear},
                                                       dtype=torch.qint8)
    time_sets(model, "pytorch %s %s" % (kind, dtype), threads, fixed, real, out)


def diff(dim, ref, outs):
    a = np.fromfile(ref, dtype="<f4")
    for o in outs:
        b = np.fromfile(o, dtype="<f4")
        if b.size != a.size:
            print("%s: %d values, expected %d" % (o, b.size, a.size))
            continue
        n = a.size // dim
        x, y = a.reshape(n, -1), b.reshape(n, -1)
        cos = (x * y).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(y, axis=1)
        print("%s max_abs_diff %.3g min_cosine %.6f" %
              (os.path.basename(o), np.abs(x - y).max(), cos.min()))


def sets(d, lines, flores, langs):
    """sentence-transformers' encode() sorts by -len(text) in characters
    (a stable argsort), so the batches are those runs of 32."""
    text = []
    for lang in langs:
        with open(os.path.join(flores, lang + ".txt"), encoding="utf-8") as f:
            text += [next(f).rstrip("\n") for _ in range(lines)]
    order = np.argsort([-len(t) for t in text], kind="stable")
    with open(os.path.join(d, "real.txt"), "w", encoding="utf-8") as f:
        f.writelines(text[i] + "\n" for i in order)
    rng = np.random.default_rng(3)
    with open(os.path.join(d, "fixed.ids"), "w") as f:
        for _ in range(BATCH):
            ids = [101] + list(rng.integers(1000, 100000, 126)) + [102]
            f.write(" ".join(str(i) for i in ids) + "\n")


def main():
    a = sys.argv[1:]
    if a and a[0] == "make" and len(a) == 3:
        make(a[1], a[2])
    elif a and a[0] == "run" and len(a) == 7:
        run(a[1], int(a[2]), a[3], a[4], a[5], a[6])
    elif a and a[0] == "sets" and len(a) >= 5:
        sets(a[1], int(a[2]), a[3], a[4:])
    elif a and a[0] == "diff" and len(a) >= 4:
        diff(int(a[1]), a[2], a[3:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
