"""lipi.Tokenizer against the reference fixtures the C tests use (Hugging
Face tokenizers, tiktoken, SentencePiece outputs) and against the lipi
command; encode_batch on threads; errors; memory over many calls."""
import glob
import json
import lzma
import os
import signal
import threading

import numpy as np
import pytest

import lipi
from conftest import ROOT, lipi as run_lipi, ref_path

ENCODER_FIXTURES = sorted(glob.glob(os.path.join(ROOT, "tests/fixtures/encoder/*.expected.json")))


def _fixture_tokenizer(fx):
    path = fx["tokenizer"]
    if path.startswith("../shared/data/"):
        found = ref_path(path[len("../shared/data/"):])
        if not found:
            pytest.skip(f"../shared/data not found ({path})")
        return found
    return os.path.join(ROOT, path)


@pytest.mark.parametrize("fixture", ENCODER_FIXTURES, ids=os.path.basename)
def test_encode_matches_hugging_face_fixture(fixture):
    with open(fixture, encoding="utf-8") as f:
        fx = json.load(f)
    tok = lipi.Tokenizer.from_file(_fixture_tokenizer(fx))
    assert fx["cases"], "a fixture without cases checks nothing"
    for i, case in enumerate(fx["cases"]):
        if case["max_length"]:
            tok.enable_truncation(case["max_length"])
        else:
            tok.no_truncation()
        e = tok.encode(case["text"], case["pair"], add_special_tokens=case["add_special_tokens"])
        what = f"case {i} {case['text']!r}"
        assert e.ids == case["ids"], what
        assert e.tokens == case["tokens"], what
        assert [list(o) for o in e.offsets] == case["offsets"], what
        assert e.type_ids == case["type_ids"], what
        assert e.special_tokens_mask == case["special_mask"], what
        assert e.attention_mask == [1] * len(e.ids), what
        assert len(e) == len(case["ids"])
        assert tok.decode(e.ids, skip_special_tokens=False) == case["decode"], what
        assert tok.decode(e.ids) == case["decode_skip"], what


def _reader_fixture(path):
    """(tokenizer path or name, [(text, ids)]) of a tests/fixtures/readers
    .tsv.xz file: header lines "# model PATH" / "# encoding NAME", then
    "corpus-file <TAB> line <TAB> ids"."""
    source, cases, files = None, [], {}
    with lzma.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# model "):
                rel = line[len("# model "):]
                source = (ref_path(rel[len("../shared/data/"):]) if rel.startswith("../shared/data/")
                          else os.path.join(ROOT, rel))
            elif line.startswith("# encoding "):
                source = line[len("# encoding "):]
            elif line and not line.startswith("#"):
                name, no, ids = line.split("\t")
                if name not in files:
                    p = os.path.join(ROOT, name) if name.startswith("tests/") else ref_path(name)
                    if p is None:
                        return source, None
                    with open(p, encoding="utf-8", newline="") as t:
                        data = t.read()
                    # llama.cpp's .inp files: cases between separators
                    files[name] = (data.split("\n__ggml_vocab_test__\n") if name.endswith(".inp")
                                   else data.split("\n"))
                text = files[name][int(no) - 1]
                cases.append((text, [int(x) for x in ids.split()]))
    return source, cases


READER_FIXTURES = sorted(glob.glob(os.path.join(ROOT, "tests/fixtures/readers/*.tsv.xz")))


@pytest.mark.parametrize("fixture", READER_FIXTURES, ids=os.path.basename)
def test_encode_matches_tiktoken_and_sentencepiece(fixture):
    source, cases = _reader_fixture(fixture)
    if source is None or cases is None:
        pytest.skip("../shared/data not found (the fixture's model or corpus)")
    tok = lipi.Tokenizer.from_file(source)
    assert cases
    for text, ids in cases:
        assert tok.encode(text).ids == ids, text


def _corpus_lines():
    with open(os.path.join(ROOT, "data/flores200/hin_Deva.txt"), encoding="utf-8") as f:
        return f.read().split("\n")[:200]


@pytest.mark.parametrize("name", ["cl100k_base", "bert-base-multilingual-cased",
                                  "tests/fixtures/unigram/flores.model",
                                  "tests/fixtures/encoder/bytelevel_roberta.json"])
def test_ids_offsets_and_tokens_equal_the_command_line(name):
    lines = [x for x in _corpus_lines() if x]
    out = run_lipi("encode", "-t", name, "--format", "jsonl",
                   input="\n".join(lines).encode() + b"\n").decode().splitlines()
    path = name if not name.startswith("tests/") else os.path.join(ROOT, name)
    tok = lipi.Tokenizer.from_file(path)
    encs = tok.encode_batch(lines)
    assert len(out) == len(lines) == len(encs)
    for line, row, e in zip(lines, out, encs):
        want = json.loads(row)
        assert e.ids == want["ids"]
        if "tokens" in want:
            assert e.tokens == want["tokens"]
        if "offsets" in want:  # the CLI's offsets are bytes
            chars = [_char_span(line.encode(), s, t) for s, t in want["offsets"]]
            assert [tuple(o) for o in e.offsets] == chars


def _char_span(b, s, t):
    """Hugging Face's BytesToCharOffsetConverter: a span starting past the
    text keeps its byte offsets; an end at the text's end is one past the
    last character."""
    if s >= len(b):
        return s, t
    chars = lambda n: len(b[:n].decode(errors="ignore"))
    return chars(s), chars(t) if t < len(b) else len(b.decode())


def test_the_numpy_fast_path_equals_encode_batch():
    tok = lipi.Tokenizer.from_file("cl100k_base")
    lines = _corpus_lines()
    encs = tok.encode_batch(lines)
    ids, mask = tok.encode_batch_numpy(lines)
    assert ids.dtype == np.int64 and ids.shape == (len(lines), max(len(e.ids) for e in encs))
    flat, starts = tok.encode_batch_numpy(lines, padded=False)
    assert flat.dtype == np.uint32 and starts.shape == (len(lines) + 1,)
    for i, e in enumerate(encs):
        n = len(e.ids)
        assert ids[i, :n].tolist() == e.ids and not ids[i, n:].any()
        assert mask[i].tolist() == [1] * n + [0] * (ids.shape[1] - n)
        assert flat[starts[i]:starts[i + 1]].tolist() == e.ids


def test_padding_and_truncation_as_hugging_face():
    tok = lipi.Tokenizer.from_file(os.path.join(ROOT, "tests/fixtures/encoder/wordpiece.json"))
    tok.enable_padding(pad_id=3, pad_token="[PAD]")
    a, b = tok.encode_batch(["Hello world", "Hello"], add_special_tokens=True)
    assert len(a) == len(b)
    assert b.attention_mask[-1] == 0 and b.ids[-1] == 3 and b.tokens[-1] == "[PAD]"
    assert b.special_tokens_mask[-1] == 1 and b.offsets[-1] == (0, 0)
    tok.enable_padding(length=16, direction="left", pad_id=3)
    e = tok.encode("Hello")
    assert len(e) == 16 and e.ids[0] == 3 and e.attention_mask[0] == 0 and e.attention_mask[-1] == 1
    tok.no_padding()
    tok.enable_truncation(3)
    assert len(tok.encode("The quick brown fox jumps").ids) == 3
    assert tok.truncation["max_length"] == 3
    with pytest.raises(ValueError):
        tok.enable_truncation(3, strategy="sideways")


def test_vocabulary_lookups():
    tok = lipi.Tokenizer.from_file("cl100k_base")
    assert tok.get_vocab_size() == 100277
    assert tok.token_to_id("hello") == 15339
    assert tok.id_to_token(15339) == "hello"
    assert tok.token_to_id("no such token at all") is None
    assert tok.id_to_token(10 ** 12) is None
    assert tok.decode_batch([[15339], [15339, 1917]]) == ["hello", "hello world"]


def test_special_token_policy_as_the_command_line():
    tok = lipi.Tokenizer.from_file("cl100k_base")
    assert tok.encode("a<|endoftext|>").ids[-1] == 100257
    assert 100257 not in tok.encode("a<|endoftext|>", special="text").ids
    with pytest.raises(lipi.LipiError) as ex:
        tok.encode("a<|endoftext|>", special="error")
    assert ex.value.code == "EINVAL" and ex.value.offset == 1
    with pytest.raises(ValueError):
        tok.encode("a", special="sometimes")


def test_errors_carry_lipi_s_file_line_and_byte(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"version": "1.0",\n  "model": [}')
    with pytest.raises(lipi.LipiError) as ex:
        lipi.Tokenizer.from_file(bad)
    assert ex.value.code == "EFORMAT" and ex.value.path == str(bad)
    assert ex.value.line == 2 and str(bad) in str(ex.value)
    with pytest.raises(lipi.LipiError) as ex:
        lipi.Tokenizer.from_file(tmp_path / "missing.model")
    assert ex.value.code == "EIO"
    tok = lipi.Tokenizer.from_file("cl100k_base")
    with pytest.raises(TypeError):
        tok.encode(b"bytes are not text")
    with pytest.raises(TypeError):
        tok.encode_batch(["a", 3])
    with pytest.raises(TypeError):
        tok.encode_batch("not a list")
    with pytest.raises(ValueError):
        tok.decode([-1])
    with pytest.raises(lipi.LipiError):
        tok.decode([10 ** 6])
    with pytest.raises(ValueError):
        tok.encode_batch(["a"], threads=0)
    with pytest.raises(TypeError):
        lipi.Tokenizer()


def test_encode_batch_is_the_same_on_any_number_of_threads():
    tok = lipi.Tokenizer.from_file("cl100k_base")
    lines = _corpus_lines() * 5
    one = [e.ids for e in tok.encode_batch(lines, threads=1)]
    assert [e.ids for e in tok.encode_batch(lines, threads=2)] == one
    assert one == [tok.encode(x).ids for x in lines]


def test_four_python_threads_encode_batch_at_once():
    tok = lipi.Tokenizer.from_file("cl100k_base")
    lines = _corpus_lines() * 10
    want = [e.ids for e in tok.encode_batch(lines, threads=1)]
    got = [None] * 4
    start = threading.Barrier(4)

    def work(i):
        start.wait()
        for _ in range(3):
            got[i] = [e.ids for e in tok.encode_batch(lines, threads=2)]

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(g == want for g in got)


def test_100000_calls_keep_memory_flat():
    tok = lipi.Tokenizer.from_file("cl100k_base")
    text = "नमस्ते दुनिया, hello world"

    def loop(n):
        for _ in range(n):
            e = tok.encode(text)
            e.ids, e.tokens, e.offsets
            tok.decode(e.ids)
        tok.encode_batch([text] * 100)
        tok.encode_batch_numpy([text] * 100)

    loop(10000)  # warm up: allocator pools, caches
    before = lipi._lipi._rss()
    loop(100000)
    grown = lipi._lipi._rss() - before
    # A leak of one token array per call would be megabytes (100,000 calls
    # x 11 tokens x 40 bytes and more); allocator noise is far below that.
    assert grown < 2 << 20, f"RSS grew by {grown} bytes over 100,000 calls"


def test_keyboard_interrupt_stops_a_long_batch():
    tok = lipi.Tokenizer.from_file("cl100k_base")
    # 200 MB of text, about 50 chunks between signal checks on one thread:
    # seconds of work even on a fast machine, so a timer thread that a
    # loaded machine wakes late still fires while the batch runs.
    lines = ["hello world, a short line " * 40] * 200_000
    timer = threading.Timer(0.05, lambda: signal.pthread_kill(threading.main_thread().ident,
                                                              signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        tok.encode_batch(lines, threads=1)
    timer.join()
    assert tok.encode("hello").ids == [15339]  # still usable


def test_the_stubs_name_the_whole_api():
    import ast
    with open(os.path.join(os.path.dirname(lipi.__file__), "__init__.pyi")) as f:
        stub = ast.parse(f.read())
    names = {n.name for n in stub.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    assert set(lipi.__all__) - {"__version__"} <= names
    methods = {n.name for c in stub.body if isinstance(c, ast.ClassDef) and c.name == "Tokenizer"
               for n in c.body if isinstance(n, ast.FunctionDef)}
    public = {m for m in dir(lipi.Tokenizer) if not m.startswith("_")}
    assert public <= methods, public - methods
    assert lipi.Tokenizer.encode.__doc__ and lipi.Embedder.encode.__doc__


def _llama_vectors(name):
    """llama.cpp's test-tokenizer-0 cases of vectors/llama.cpp/NAME.gguf:
    [(text, ids)] (Hugging Face's ids, no special tokens)."""
    inp, out = ref_path(f"vectors/llama.cpp/{name}.gguf.inp"), ref_path(f"vectors/llama.cpp/{name}.gguf.out")
    with open(inp, encoding="utf-8", newline="") as f:
        texts = f.read().split("\n__ggml_vocab_test__\n")[:-1]
    with open(out, encoding="utf-8") as f:
        ids = [[int(x) for x in line.split()] for line in f.read().split("\n")]
    assert len(texts) > 10
    return list(zip(texts, ids))


def _gpt2_files(tmp_path):
    """GPT-2's OpenAI files under the names Hugging Face's hub uses."""
    d = tmp_path / "gpt2"
    d.mkdir()
    src = ref_path("vocab/gpt2/encoder.json")
    (d / "vocab.json").write_bytes(open(src, "rb").read())
    (d / "merges.txt").write_bytes(open(ref_path("vocab/gpt2/vocab.bpe"), "rb").read())
    return d / "vocab.json"


@pytest.mark.parametrize("source", ["tokenizer.json", "vocab.json+merges.txt", "gguf"])
def test_every_gpt2_format_gives_hugging_face_s_ids(tmp_path, source):
    if source == "tokenizer.json":
        path = ref_path("vocab/gpt2/tokenizer.json")
    elif source == "gguf":
        path = ref_path("vectors/llama.cpp/ggml-vocab-gpt-2.gguf")
        if path is None:
            pytest.skip("../shared/data not found (ggml-vocab-gpt-2.gguf)")
    else:
        path = _gpt2_files(tmp_path)
    tok = lipi.Tokenizer.from_file(path)
    for text, ids in _llama_vectors("ggml-vocab-gpt-2"):
        assert tok.encode(text).ids == ids, repr(text)


def test_vocab_txt_gives_hugging_face_s_ids():
    # bge-small-en's tokenizer is bert-base-uncased's (llama.cpp's bert-bge vectors)
    tok = lipi.Tokenizer.from_file(ref_path("vocab/bert-base-uncased/vocab.txt"))
    for text, ids in _llama_vectors("ggml-vocab-bert-bge"):
        assert tok.encode(text).ids == ids, repr(text)
