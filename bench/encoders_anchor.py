#!/usr/bin/python3
"""PyTorch side of bench/encoders.sh (Debian python3-torch).

    encoders_anchor.py make DIR modernbert|nomic   random checkpoint: config.json +
                                                   model.safetensors (F32)
    encoders_anchor.py ids KIND RAW OUT_REAL OUT_FIXED MAXLEN
                                                   the id sets: RAW's lines (a
                                                   tokenizer's ids, one sentence
                                                   a line) with KIND's special
                                                   tokens, at most MAXLEN ids;
                                                   OUT_FIXED: 32 x 128 ids
    encoders_anchor.py run DIR THREADS FIXED REAL OUT
                                                   PyTorch F32 on both id sets

Shapes: ModernBERT-base (22 layers of 768, 12 heads, GeGLU 1152, a local
window of 128 with a global layer every 3rd, rotary thetas 160,000 / 10,000)
and nomic-embed-text-v1.5 (12 layers of 768, 12 heads, SwiGLU 3072, rotary
base 1000, post-norm, no biases, vocabulary 30,528), as bench/long_anchor.py
and the published config.json files give them. The forward passes are
tests/fixtures/make_models.py's plain-PyTorch rewrites of transformers'
modeling_modernbert.py and nomic's modeling_hf_nomic_bert.py (eager
attention, every (heads, L, L) score matrix held), then mean pooling over
attention_mask == 1. Batches as bench/embed_anchor.py makes them: 32
consecutive lines, padded to the longest. Each run prints one line per set:
    pytorch DIR's-name f32 set threads sentences tokens padded wall_s cpu_s rss_kb
(medians over $RUNS timed passes after a warm-up on the first batch) and
writes the REAL set's embeddings (float32, file order) to OUT.
"""
import json
import os
import sys
import warnings

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fixtures"))
sys.path.insert(0, HERE)
import make_models as mm  # noqa: E402
import embed_anchor as ea  # noqa: E402
import long_anchor as la  # noqa: E402

NOMIC = {"model_type": "nomic_bert", "architectures": ["NomicBertModel"], "vocab_size": 30528,
         "pad_vocab_size_multiple": 64, "n_embd": 768, "n_layer": 12, "n_head": 12,
         "n_inner": 3072, "n_positions": 8192, "type_vocab_size": 2,
         "activation_function": "swiglu", "layer_norm_epsilon": 1e-12,
         "rotary_emb_base": 1000, "rotary_emb_fraction": 1.0, "rotary_emb_interleaved": False,
         "rotary_emb_scale_base": None, "rotary_scaling_factor": None,
         "max_trained_positions": 2048, "prenorm": False, "causal": False,
         "qkv_proj_bias": False, "mlp_fc1_bias": False, "mlp_fc2_bias": False,
         "pad_token_id": 0}
SHAPES = {"modernbert": la.SHAPES["modernbert"], "nomic": NOMIC}
# [CLS] / [SEP] of each family's tokenizer: ModernBERT's (OLMo BPE) and
# bert-base-uncased's (nomic-embed-text).
SPECIAL = {"modernbert": (50281, 50282), "nomic": (101, 102)}


def make(d, kind):
    os.makedirs(d, exist_ok=True)
    if os.path.exists(os.path.join(d, "model.safetensors")):
        return
    cfg = SHAPES[kind]
    if kind == "modernbert":
        W = la.weights("modernbert", cfg)
    else:
        mm.V = cfg["vocab_size"]
        W = mm.make_nomic_weights(cfg, 1)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    tmp = os.path.join(d, "model.safetensors.tmp")
    mm.write_safetensors(tmp, [(k, v, "F32") for k, v in W.items()])
    os.replace(tmp, os.path.join(d, "model.safetensors"))


def ids(kind, raw, out_real, out_fixed, maxlen):
    cls, sep = SPECIAL[kind]
    with open(raw) as f, open(out_real, "w") as o:
        for line in f:
            body = line.split()[:maxlen - 2]
            o.write(" ".join([str(cls)] + body + [str(sep)]) + "\n")
    rng = np.random.default_rng(3)
    with open(out_fixed, "w") as o:
        for _ in range(ea.BATCH):
            body = rng.integers(1000, 30000, 126)
            o.write(" ".join(str(i) for i in [cls, *body, sep]) + "\n")


def run(d, threads, fixed, real, out):
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    torch.set_num_threads(threads)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    kind = cfg["model_type"]
    label = os.path.basename(os.path.normpath(d))  # as bench/embed.c names it
    W = la.read_safetensors(os.path.join(d, "model.safetensors"))

    def embed(batch_ids, mask):
        if kind == "modernbert":
            x = mm.forward_modernbert(cfg, W, batch_ids, mask)
        else:
            x = mm.forward_nomic(cfg, W, batch_ids, mask, torch.zeros_like(batch_ids))
        m = mask.unsqueeze(-1).to(x.dtype)
        return (x * m).sum(1) / m.sum(1).clamp(min=1e-9)

    ea.time_sets(embed, "pytorch %s f32" % label, threads, fixed, real, out)


def main():
    a = sys.argv[1:]
    if a and a[0] == "make" and len(a) == 3:
        make(a[1], a[2])
    elif a and a[0] == "ids" and len(a) == 6:
        ids(a[1], a[2], a[3], a[4], int(a[5]))
    elif a and a[0] == "run" and len(a) == 6:
        run(a[1], int(a[2]), a[3], a[4], a[5])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
