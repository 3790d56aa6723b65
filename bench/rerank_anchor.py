#!/usr/bin/python3
"""PyTorch side of bench/rerank.sh (Debian python3-torch).

    rerank_anchor.py make DIR VOCAB_TXT     a BertForSequenceClassification
                                            checkpoint (one label) of BERT-base
                                            shape with VOCAB_TXT's vocabulary,
                                            random weights; vocab.txt copied
    rerank_anchor.py pairs FLORES NQ NP OUT query<TAB>passage lines: the first
                                            NQ English lines against NP
                                            passages taken in turn from eight
                                            languages
    rerank_anchor.py run DIR PAIRS THREADS f32|int8 OUT
                                            PyTorch forward of every pair

The model is embed_anchor.py's plain-PyTorch BERT with token types, then
BertForSequenceClassification's head: pooler tanh(dense(h[CLS])),
classifier, sigmoid (sentence-transformers' CrossEncoder for one label).
Pairs are tokenized by lipi's Python package (build/python) as
`[CLS] query [SEP] passage [SEP]` with token type ids, truncated to 512,
and fed as CrossEncoder.predict feeds them: batches of 32 in file order,
each padded to its longest pair. `run` prints
    pytorch DTYPE THREADS pairs tokens padded wall_s cpu_s rss_kb
(wall_s, cpu_s: medians over RUNS timed passes after a warm-up batch; the
forward passes only) and writes the scores, one per line, to OUT.
"""
import os
import resource
import shutil
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import embed_anchor as ea  # noqa: E402

BATCH = 32
LANGS = ["hin_Deva", "ben_Beng", "tam_Taml", "eng_Latn", "tel_Telu", "arb_Arab",
         "rus_Cyrl", "zho_Hans"]


def vocab_size(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def make(d, vocab):
    os.makedirs(d, exist_ok=True)
    stamp = os.path.join(d, "stamp")
    if os.path.exists(stamp):
        return
    shape = dict(ea.SHAPES["bert"], vocab=vocab_size(vocab))
    ts = {"bert." + k: v for k, v in ea.tensors(shape).items()}
    rng = np.random.default_rng(11)
    C = shape["hidden"]
    ts["bert.pooler.dense.weight"] = (rng.standard_normal((C, C)) * 0.02).astype(np.float32)
    ts["bert.pooler.dense.bias"] = np.zeros(C, np.float32)
    # Large enough that the scores spread over (0, 1) rather than sit at 0.5.
    ts["classifier.weight"] = (rng.standard_normal((1, C)) * 0.1).astype(np.float32)
    ts["classifier.bias"] = np.zeros(1, np.float32)
    cfg = {"architectures": ["BertForSequenceClassification"], "model_type": "bert",
           "vocab_size": shape["vocab"], "hidden_size": C,
           "num_hidden_layers": shape["layers"], "num_attention_heads": shape["heads"],
           "intermediate_size": shape["inter"], "max_position_embeddings": 512,
           "type_vocab_size": 2, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
           "pad_token_id": 0, "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}
    import json
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    ea.write_safetensors(os.path.join(d, "model.safetensors"), ts)
    shutil.copy(vocab, os.path.join(d, "vocab.txt"))
    with open(stamp, "w") as f:
        f.write("ok\n")


def pairs(flores, nq, npass, out):
    def lines(lang):
        with open(os.path.join(flores, lang + ".txt"), encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f]
    queries = lines("eng_Latn")[:nq]
    by_lang = [lines(lang) for lang in LANGS]
    passages = [by_lang[i % len(LANGS)][100 + i // len(LANGS)] for i in range(npass)]
    with open(out, "w", encoding="utf-8") as f:
        for q in queries:
            for p in passages:
                f.write(q + "\t" + p + "\n")


class Cross(ea.Bert):
    def __init__(self, shape):
        super().__init__(shape)
        C = shape["hidden"]
        self.pool = torch.nn.Linear(C, C)
        self.cls = torch.nn.Linear(C, 1)

    def load_state_dict(self, sd, strict=True):
        # embed_anchor's load gives the encoder; the head is set after it.
        return super().load_state_dict(sd, strict=False)

    def forward(self, ids, types, mask):
        L = ids.shape[1]
        pos = torch.arange(L).unsqueeze(0)
        x = self.ln(self.word(ids) + self.tok_type(types) + self.pos(pos))
        m = mask.to(x.dtype)
        ext = (1.0 - m[:, None, None, :]) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, ext)
        return torch.sigmoid(self.cls(torch.tanh(self.pool(x[:, 0])))).squeeze(-1)


def run(d, path, threads, dtype, out):
    import lipi  # the Python package, PYTHONPATH=build/python
    tok = lipi.Tokenizer.from_file(os.path.join(d, "vocab.txt"))
    tok.enable_truncation(512)
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t", 1) for line in f if line.strip()]
    encs = [tok.encode(a, pair=b, add_special_tokens=True) for a, b in rows]
    torch.set_num_threads(threads)
    shape = dict(ea.SHAPES["bert"], vocab=tok.get_vocab_size())
    model = Cross(shape)
    ts = ea.read_safetensors(os.path.join(d, "model.safetensors"))
    base = {k[5:]: v for k, v in ts.items() if k.startswith("bert.embeddings.") or
            k.startswith("bert.encoder.")}
    model.load(base)
    model.pool.weight.data = ts["bert.pooler.dense.weight"]
    model.pool.bias.data = ts["bert.pooler.dense.bias"]
    model.cls.weight.data = ts["classifier.weight"]
    model.cls.bias.data = ts["classifier.bias"]
    model.eval()
    if dtype == "int8":
        torch.backends.quantized.engine = "onednn"
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear},
                                                       dtype=torch.qint8)
    batches = []
    for b0 in range(0, len(encs), BATCH):
        group = encs[b0:b0 + BATCH]
        L = max(len(e.ids) for e in group)
        ids = torch.zeros(len(group), L, dtype=torch.long)
        types = torch.zeros(len(group), L, dtype=torch.long)
        mask = torch.zeros(len(group), L, dtype=torch.long)
        for i, e in enumerate(group):
            n = len(e.ids)
            ids[i, :n] = torch.tensor(e.ids)
            types[i, :n] = torch.tensor(e.type_ids)
            mask[i, :n] = 1
        batches.append((ids, types, mask))
    runs = int(os.environ.get("RUNS", "3"))
    walls, cpus, scores = [], [], []
    with torch.inference_mode():
        for r in range(runs + 1):
            scores = []
            w0, c0 = time.perf_counter(), time.process_time()
            for b in (batches if r else batches[:1]):
                scores.append(model(*b))
            if r:
                walls.append(time.perf_counter() - w0)
                cpus.append(time.process_time() - c0)
    tokens = sum(len(e.ids) for e in encs)
    padded = sum(b[0].numel() for b in batches)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("pytorch %s %d %d %d %d %.4f %.4f %d" % (dtype, threads, len(encs), tokens, padded,
                                                   ea.median(walls), ea.median(cpus), rss),
          flush=True)
    with open(out, "w") as f:
        for s in torch.cat(scores).tolist():
            f.write("%.6f\n" % s)


def main():
    a = sys.argv[1:]
    if a and a[0] == "make" and len(a) == 3:
        make(a[1], a[2])
    elif a and a[0] == "pairs" and len(a) == 5:
        pairs(a[1], int(a[2]), int(a[3]), a[4])
    elif a and a[0] == "run" and len(a) == 6:
        run(a[1], a[2], int(a[3]), a[4], a[5])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
