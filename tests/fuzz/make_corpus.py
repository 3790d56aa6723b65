#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz harnesses, tests/fuzz/corpus/<h>/,
from the project's fixtures (tests/fixtures, data/) and small synthetic
files (GGUF, a tiny BERT checkpoint, an index). Run from the repository
root: python3 tests/fuzz/make_corpus.py. Standard library only."""
import json, os, struct, random, shutil

SEP = b"\n\xff\xfe--next-file--\xfe\xff\n"
OUT = "tests/fuzz/corpus"
random.seed(1)


def put(h, name, data):
    d = os.path.join(OUT, h)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(p):
    with open(p, "rb") as f:
        return f.read()


TEXTS = [
    "Hello, world! It's 2024.".encode(),
    "नमस्ते दुनिया, हिन्दीEnglish १२३ क्षि".encode(),
    "ശ്‍ ශ්‍රී Café ΣΑΣ ﬁ ① 日本語 👨‍👩‍👧".encode(),
    b"a\r\nb\rc\x00d\t  e",
    b"bad \xff\xc0\x80 \xed\xa0\x80 \xf4\x90\x80\x80 end\xe0\xa4",
    "ক্ষ ਖ਼ ਜ਼ ૪ ௫ ౬ ೭ ൮ \u200c\u200d x\u200d".encode(),
]

# UTF-8 + normalizers: byte 0 picks the normalizer, byte 1 the options.
for n in range(7):
    for i, t in enumerate(TEXTS):
        put("normalize", "n%d_t%d" % (n, i), bytes([n, (i * 5 + n) % 16]) + t)

# Pre-tokenizers: byte 0 picks one of nine.
for n in range(9):
    for i, t in enumerate(TEXTS[:4]):
        put("pretokenize", "p%d_t%d" % (n, i), bytes([n]) + t)

# tokenizer.json fixtures (the small ones).
for d in ("tests/fixtures/tokenizer_json", "tests/fixtures/encoder", "tests/fixtures/bpe"):
    for f in sorted(os.listdir(d)):
        p = os.path.join(d, f)
        if f.endswith(".json") and "expected" not in f and "hf_ids" not in f \
                and os.path.getsize(p) < 20000:
            put("tokenizer_json", d.split("/")[-1] + "_" + f, read(p))

# SentencePiece models.
for f in ("bpe_bytes.model", "unigram_user.model"):
    put("spm", f, read("tests/fixtures/readers/" + f))

# vocab.txt (+ tokenizer_config.json).
vocab = read("data/vocab/bert-base-multilingual-cased/vocab.txt").split(b"\n")
small = b"\n".join(vocab[:120] + vocab[1000:1100] + vocab[100000:100100]) + b"\n"
put("vocab_txt", "mbert_head", small)
put("vocab_txt", "mbert_lower", small + SEP + b'{"do_lower_case": true, "strip_accents": false}')
put("vocab_txt", "mbert_cased", small + SEP + b'{"do_lower_case": false, "tokenize_chinese_chars": true}')

# vocab.json + merges.txt from a byte-level BPE fixture.
for f in ("bytelevel_roberta.json", "bytelevel_generic.json"):
    tj = json.loads(read("tests/fixtures/encoder/" + f))
    m = tj["model"]
    merges = [x if isinstance(x, str) else " ".join(x) for x in m["merges"]]
    v = json.dumps(m["vocab"], ensure_ascii=False).encode()
    mt = ("#version: 0.2\n" + "\n".join(merges) + "\n").encode()
    put("gpt2", f.replace(".json", ""), v + SEP + mt)
    put("gpt2", f.replace(".json", "_cfg"), v + SEP + mt + SEP + b'{"add_prefix_space": true}')

# A small byte-level vocabulary (the allocation-failure loop runs it).
tiny = {"a": 0, "b": 1, "c": 2, "\u0120": 3, "ab": 4, "\u0120a": 5, "abc": 6, "<|endoftext|>": 7}
put("gpt2", "tiny", json.dumps(tiny).encode() + SEP + "#version: 0.2\na b\n\u0120 a\nab c\n".encode())

# tiktoken rank files: the first ranks of cl100k_base (+ a meta.json).
ranks = read("data/vocab/tiktoken/cl100k_base.tiktoken").split(b"\n")
head = b"\n".join(ranks[:300]) + b"\n"
put("tiktoken", "cl100k_head", head)
put("tiktoken", "cl100k_meta", head + SEP + json.dumps(
    {"pat_str": r"'s|'t| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+", "special_tokens":
     {"<|endoftext|>": 300, "<|fim|>": 301}}).encode())


# GGUF: keys with typed values (version 3).
def gs(s):
    s = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(s)) + s


def kv(key, typ, val):
    b = gs(key) + struct.pack("<I", typ)
    if typ == 8:
        return b + gs(val)
    if typ == 9:
        et, items = val
        b += struct.pack("<IQ", et, len(items))
        for it in items:
            b += gs(it) if et == 8 else struct.pack({6: "<f", 5: "<i", 4: "<I", 7: "<?"}[et], it)
        return b
    return b + struct.pack({4: "<I", 5: "<i", 6: "<f", 7: "<?"}[typ], val)


def gguf(kvs):
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs)


toks = ["a", "b", "ab", "Ġ", "Ġa", "<|end|>", "c", "abc"]
put("gguf", "gpt2", gguf([kv("general.architecture", 8, "gpt2"), kv("tokenizer.ggml.model", 8, "gpt2"),
                          kv("tokenizer.ggml.pre", 8, "gpt-2"),
                          kv("tokenizer.ggml.tokens", 9, (8, toks)),
                          kv("tokenizer.ggml.merges", 9, (8, ["a b", "Ġ a", "ab c"])),
                          kv("tokenizer.ggml.eos_token_id", 4, 5)]))
sp = ["<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "ab", "<0x41>", "<0xE0>"]
put("gguf", "llama", gguf([kv("tokenizer.ggml.model", 8, "llama"),
                           kv("tokenizer.ggml.tokens", 9, (8, sp)),
                           kv("tokenizer.ggml.scores", 9, (6, [0.0, 0, 0, -1, -2, -3, -1.5, -2.5, 0, 0])),
                           kv("tokenizer.ggml.token_type", 9, (5, [2, 3, 3, 1, 1, 1, 1, 1, 6, 6])),
                           kv("tokenizer.ggml.add_bos_token", 7, True)]))
put("gguf", "t5", gguf([kv("tokenizer.ggml.model", 8, "t5"),
                        kv("tokenizer.ggml.tokens", 9, (8, ["<pad>", "</s>", "<unk>", "▁", "a", "▁ab"])),
                        kv("tokenizer.ggml.scores", 9, (6, [0.0, 0, 0, -1, -2, -1.5])),
                        kv("tokenizer.ggml.token_type", 9, (5, [3, 3, 2, 1, 1, 1]))]))
put("gguf", "bert", gguf([kv("tokenizer.ggml.model", 8, "bert"),
                          kv("tokenizer.ggml.tokens", 9, (8, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                                                "a", "##b", "hello", ","])),
                          kv("tokenizer.ggml.token_type", 9, (5, [3, 3, 3, 3, 3, 1, 1, 1, 1]))]))

# Counts files.
put("counts", "plain", "the\t10\nनमस्ते\t7\nof\t3\n".encode())
put("counts", "escapes", b"\xef\xbb\xbfa\\tb\t5\r\nback\\\\slash\t2\r\nnl\\n\t18446744073709551615\n")


# Counts runs (trainer.h): words in the order of lipi's table hash.
M64 = (1 << 64) - 1


def fold_mul(a, b):
    r = a * b
    return (r & M64) ^ (r >> 64)


def word_hash(w):
    k0, k1, k2 = 0xa0761d6478bd642f, 0xe7037ed1a0b428db, 0x8ebc6af09c88c6e3
    h = fold_mul(len(w) ^ k0, k1)
    i = 0
    while len(w) - i >= 8:
        h = fold_mul(int.from_bytes(w[i:i + 8], "little") ^ k1, h ^ k2)
        i += 8
    return fold_mul(int.from_bytes(w[i:], "little") ^ k0, h ^ k2)


def varint(v):
    out = b""
    while v >= 0x80:
        out += bytes([(v & 0x7f) | 0x80])
        v >>= 7
    return out + bytes([v])


def counts_run(counts):
    out, total = b"LIPIRUN\x01", 0
    words = sorted(counts, key=lambda w: (word_hash(w), w))
    for w in words:
        out += varint(len(w)) + w + varint(counts[w])
        h = word_hash(w)
        total = ((fold_mul(total ^ h ^ 0x9e3779b97f4a7c15, counts[w] ^ 0xe7037ed1a0b428db) + h)
                 & M64)
    return out + b"\0" + struct.pack("<QQ", len(words), total)


put("counts_run", "plain", counts_run({b"the": 10, "नमस्ते".encode(): 7, b"of": 3}))
put("counts_run", "long_words", counts_run({b"tab\there": 5, b"a longer word of 29 bytes...": 300,
                                            "क्षत्रिय".encode(): 2 ** 64 - 1, b"x": 1}))
put("counts_run", "empty", counts_run({}))


# A tiny BERT checkpoint: config.json + model.safetensors.
def safetensors(tensors, dtype="F32"):
    header, blob = {}, b""
    for name, shape in tensors:
        n = 1
        for s in shape:
            n *= s
        data = struct.pack("<%df" % n, *[random.uniform(-0.5, 0.5) for _ in range(n)])
        if dtype == "F16":
            data = struct.pack("<%de" % n, *[random.uniform(-0.5, 0.5) for _ in range(n)])
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + blob


def tiny_bert(H=4, I=8, V=12, P=8, L=1, labels=0, prefix="bert."):
    t = [(prefix + "embeddings.word_embeddings.weight", [V, H]),
         (prefix + "embeddings.position_embeddings.weight", [P, H]),
         (prefix + "embeddings.token_type_embeddings.weight", [2, H]),
         (prefix + "embeddings.LayerNorm.weight", [H]), (prefix + "embeddings.LayerNorm.bias", [H])]
    for l in range(L):
        p = prefix + "encoder.layer.%d." % l
        for w in ("attention.self.query", "attention.self.key", "attention.self.value",
                  "attention.output.dense"):
            t += [(p + w + ".weight", [H, H]), (p + w + ".bias", [H])]
        t += [(p + "attention.output.LayerNorm.weight", [H]), (p + "attention.output.LayerNorm.bias", [H]),
              (p + "intermediate.dense.weight", [I, H]), (p + "intermediate.dense.bias", [I]),
              (p + "output.dense.weight", [H, I]), (p + "output.dense.bias", [H]),
              (p + "output.LayerNorm.weight", [H]), (p + "output.LayerNorm.bias", [H])]
    if labels:
        t += [(prefix + "pooler.dense.weight", [H, H]), (prefix + "pooler.dense.bias", [H]),
              ("classifier.weight", [labels, H]), ("classifier.bias", [labels])]
    cfg = {"architectures": ["BertForSequenceClassification" if labels else "BertModel"],
           "hidden_act": "gelu", "hidden_size": H, "intermediate_size": I, "layer_norm_eps": 1e-12,
           "max_position_embeddings": P, "model_type": "bert", "num_attention_heads": 2,
           "num_hidden_layers": L, "pad_token_id": 0, "type_vocab_size": 2, "vocab_size": V}
    if labels:
        cfg["id2label"] = {str(i): "L%d" % i for i in range(labels)}
    return json.dumps(cfg, indent=1).encode(), t


c, t = tiny_bert()
put("model", "tiny_bert", c + SEP + safetensors(t))
c, t = tiny_bert(labels=3)
put("model", "tiny_bert_cls", c + SEP + safetensors(t))
c, t = tiny_bert(prefix="")
put("model", "tiny_bert_f16", c + SEP + safetensors(t, "F16"))
# The rotary architectures as their fixtures are (ModernBERT's local
# windows and global layers, NomicBERT's padded vocabulary and gated width,
# GTE's NTK rope_scaling and fused up_gate_proj).
for f in ("modernbert", "nomic_bert", "gte"):
    d = os.path.join("tests/fixtures/models", f)
    put("model", f, read(os.path.join(d, "config.json")) + SEP +
        read(os.path.join(d, "model.safetensors")))


# An index folder: meta.json, vectors.npy, offsets.npy, texts.
def npy(descr, shape, payload):
    d = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (
        descr, "(%d,)" % shape[0] if len(shape) == 1 else "(%d, %d)" % tuple(shape))
    total = 10 + len(d) + 1
    d += " " * ((64 - total % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode() + payload


texts = ["first doc", "दूसरा", "third one here"]
offs, tb = [0], b""
for s in texts:
    tb += s.encode()
    offs.append(len(tb))
D = 4
vec = struct.pack("<%df" % (3 * D), *[random.uniform(-1, 1) for _ in range(3 * D)])
for name, model in (("precomputed", None), ("model", {"name": "tiny", "path": "/m", "fingerprint": "0123456789abcdef"})):
    meta = {"format": "lipi-index", "version": 1, "dimension": D, "count": 3, "model": model,
            "pooling": "mean", "normalize": True, "lipi_version": "0.1", "faiss": None}
    put("index", name, json.dumps(meta).encode() + SEP + npy("<f4", [3, D], vec) + SEP +
        npy("<u8", [4], struct.pack("<4Q", *offs)) + SEP + tb)

# PyTorch checkpoints: the small torch.save files of tests/fixtures/torchbin
# (make_torchbin.py), valid and hostile.
TB = "tests/fixtures/torchbin"
for f in ("tiny.bin", "tiny_deflate.bin"):
    put("torchbin", f, read(os.path.join(TB, f)))
for f in sorted(os.listdir(os.path.join(TB, "hostile"))):
    if os.path.getsize(os.path.join(TB, "hostile", f)) < 4096:
        put("torchbin", "hostile_" + f, read(os.path.join(TB, "hostile", f)))
# lipi serve's request bodies: byte 0 picks the route (0 /v1/embeddings,
# 1 /embed, 2 /tokenize, 3 /decode, 4 /classify, 5 /rerank).
SERVE = {
    "openai_texts": (0, {"input": ["नमस्ते दुनिया", "hello"], "model": "m",
                         "encoding_format": "base64", "dimensions": 4}),
    "openai_ids": (0, {"input": [[101, 2054, 102], [7]], "encoding_format": "float"}),
    "openai_bad_dim": (0, {"input": "x", "dimensions": 9}),
    "embed": (1, {"inputs": ["a", "b"], "normalize": False, "truncate": True}),
    "tokenize": (2, {"inputs": "Café ΣΑΣ", "add_special_tokens": False}),
    "decode": (3, {"ids": [[1, 2], [3]], "skip_special_tokens": True}),
    "classify": (4, {"inputs": ["good", "bad"], "raw_scores": True}),
    "rerank": (5, {"query": "q", "texts": ["p1", "p2"], "return_text": True}),
}
for name, (route, body) in SERVE.items():
    put("serve", name, bytes([route]) + json.dumps(body, ensure_ascii=False,
                                                   separators=(",", ":")).encode())
put("serve", "bad_utf8", b'\x01{"inputs":"bad \xff"}')
put("serve", "truncated", b'\x00{"input":')
