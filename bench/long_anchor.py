#!/usr/bin/python3
"""PyTorch side of bench/long.sh: one long sequence through an encoder with
the score matrices materialized (eager attention), on the same random
weights lipi reads.

    long_anchor.py make DIR modernbert|bert L      writes DIR/config.json + model.safetensors
    long_anchor.py run DIR L THREADS OUT           times one forward, writes the hidden states

The forward passes are tests/fixtures/make_models.py's plain-PyTorch
rewrites of transformers' modeling_modernbert.py / modeling_bert.py (every
(heads, L, L) score matrix is held, as transformers' eager and SDPA-on-CPU
paths do). Token ids: 5 + (i * 7919) % (vocab - 5), as bench/long.c makes
them. Prints: tool model L threads wall_s cpu_s rss_kb
"""
import json
import warnings
import os
import resource
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fixtures"))
import make_models as mm  # noqa: E402

SHAPES = {
    # ModernBERT-base: 22 layers, 768, 12 heads, GeGLU 1152, window 128,
    # a global layer every 3rd, 8,192 positions
    "modernbert": {"model_type": "modernbert", "architectures": ["ModernBertModel"],
                   "vocab_size": 50368, "hidden_size": 768, "num_hidden_layers": 22,
                   "num_attention_heads": 12, "intermediate_size": 1152,
                   "max_position_embeddings": 8192, "hidden_activation": "gelu",
                   "norm_eps": 1e-5, "norm_bias": False, "attention_bias": False,
                   "mlp_bias": False, "local_attention": 128,
                   "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0,
                   "local_rope_theta": 10000.0, "pad_token_id": 50283},
    # BERT-base with an 8,192-row position table
    "bert": {"model_type": "bert", "architectures": ["BertModel"], "vocab_size": 30522,
             "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
             "intermediate_size": 3072, "max_position_embeddings": 8192,
             "type_vocab_size": 2, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
             "pad_token_id": 0},
}


def weights(kind, cfg):
    mm.V = cfg["vocab_size"]
    if kind == "modernbert":
        return mm.make_modernbert_weights(cfg, 1)
    return mm.make_weights("bert", cfg, 1)


def ids_for(cfg, L):
    v = cfg["vocab_size"]
    return torch.tensor([[5 + (i * 7919) % (v - 5) for i in range(L)]], dtype=torch.long)


def read_safetensors(path):
    """name -> float32 array (F32 only, as make writes them)."""
    with open(path, "rb") as f:
        buf = f.read()
    n = int.from_bytes(buf[:8], "little")
    header = json.loads(buf[8:8 + n])
    base, W = 8 + n, {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        W[name] = np.frombuffer(buf, dtype="<f4", count=(b - a) // 4,
                                offset=base + a).reshape(t["shape"])
    return W


def main():
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    torch.set_grad_enabled(False)
    if sys.argv[1] == "make":
        d, kind = sys.argv[2], sys.argv[3]
        os.makedirs(d, exist_ok=True)
        if os.path.exists(os.path.join(d, "model.safetensors")):
            return
        cfg = SHAPES[kind]
        W = weights(kind, cfg)
        mm.write_safetensors(os.path.join(d, "model.safetensors"),
                             [(k, v, "F32") for k, v in W.items()])
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        return
    d, L, threads, out = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    torch.set_num_threads(threads)
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    kind = cfg["model_type"]
    W = read_safetensors(os.path.join(d, "model.safetensors"))
    ids = ids_for(cfg, L)
    mask = torch.ones_like(ids)
    types = torch.zeros_like(ids)
    t0, c0 = time.perf_counter(), time.process_time()
    if kind == "modernbert":
        x = mm.forward_modernbert(cfg, W, ids, mask)
    else:
        x = mm.forward("bert", cfg, W, ids, mask, types)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    x.numpy().astype("<f4").tofile(out)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print("pytorch %s %d %d %.2f %.2f %d" % (kind, L, threads, wall, cpu, rss))


if __name__ == "__main__":
    main()
