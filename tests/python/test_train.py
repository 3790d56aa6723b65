"""lipi.train gives the bytes `lipi train` writes: from files, from a
Python iterator of strings and from a counts file."""
import os

import pytest

import lipi
from conftest import ROOT, lipi as run_lipi

CORPUS = [os.path.join(ROOT, "data/flores200", f) for f in ("hin_Deva.txt", "tam_Taml.txt")]


def _cli_train(tmp_path, *args):
    out = tmp_path / "cli.json"
    run_lipi("train", "--quiet", "-o", str(out), *args)
    return out.read_bytes()


@pytest.mark.parametrize("type,options,flags", [
    ("bpe", {"vocab_size": 600}, ["--vocab-size", "600"]),
    ("bpe", {"vocab_size": 700, "units": "byte", "min_frequency": 3},
     ["--vocab-size", "700", "--units", "byte", "--min-frequency", "3"]),
    ("unigram", {"vocab_size": 500, "special_tokens": ["<unk>", "<s>", "</s>", "<pad>"]},
     ["--vocab-size", "500", "--special-tokens", "<unk>,<s>,</s>,<pad>"]),
])
def test_train_from_files_is_byte_identical_to_the_command_line(tmp_path, type, options, flags):
    want = _cli_train(tmp_path, "--type", type, *flags, *CORPUS)
    tok = lipi.train(CORPUS, type=type, **options)
    assert isinstance(tok, lipi.Tokenizer)
    tok.enable_truncation(4)  # the whole Python class, not only the C base
    assert len(tok.encode("नमस्ते दुनिया, नमस्ते").ids) == 4
    tok.no_truncation()
    tok.save(tmp_path / "py.json")
    assert (tmp_path / "py.json").read_bytes() == want
    assert tok.to_str().encode() == want


def test_train_from_an_iterator_is_the_same_as_from_the_file(tmp_path):
    want = _cli_train(tmp_path, "--type", "unigram", "--vocab-size", "600", *CORPUS)

    def lines():
        for path in CORPUS:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    yield line.rstrip("\n")

    tok = lipi.train(lines(), type="unigram", vocab_size=600)
    assert tok.to_str().encode() == want
    # and the model it saves is a SentencePiece model lipi reads back
    tok.save_spm(tmp_path / "m.model")
    back = lipi.Tokenizer.from_file(tmp_path / "m.model")
    text = "नमस्ते दुनिया"
    assert back.encode(text).ids == tok.encode(text).ids


def test_train_from_counts(tmp_path):
    counts = tmp_path / "counts.tsv"
    run_lipi("count", "--quiet", "-o", str(counts), *CORPUS)
    want = _cli_train(tmp_path, "--vocab-size", "600", "--from-counts", str(counts))
    tok = lipi.train(from_counts=counts, vocab_size=600)
    assert tok.to_str().encode() == want


def test_train_errors(tmp_path):
    with pytest.raises(TypeError):
        lipi.train(CORPUS, vocab_sise=100)
    with pytest.raises(ValueError):
        lipi.train(CORPUS, type="wordpiece")
    with pytest.raises(ValueError):
        lipi.train(CORPUS, type="unigram", units="byte")
    with pytest.raises(TypeError):
        lipi.train(iter(["a", 3]))
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"good line\nbad \xff byte\n")
    with pytest.raises(lipi.LipiError) as ex:
        lipi.train([bad], vocab_size=300)
    assert ex.value.path == str(bad) and ex.value.line == 2 and ex.value.offset == 14


def test_balanced_training_is_the_command_line_s(tmp_path):
    hi, ta = CORPUS
    want = _cli_train(tmp_path, "--vocab-size", "700", "--balance", "smoothed", "--alpha", "0.5",
                      "--lang-file", f"hin_Deva={hi}", "--lang-file", f"tam_Taml={ta}")
    tok = lipi.train(vocab_size=700, balance="smoothed", alpha=0.5,
                     lang_files={"hin_Deva": hi, "tam_Taml": ta})
    assert tok.to_str().encode() == want
