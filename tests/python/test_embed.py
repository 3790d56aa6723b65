"""lipi.Embedder and lipi.Index against `lipi embed`, `classify`, `index`
and `search` on the fixture models (tiny checkpoints made by
tests/fixtures/make_models.py, with tests/model_dir.c's word-level
tokenizer: "t4 t17" is ids [4, 17])."""
import json
import threading

import numpy as np
import pytest

import lipi
from conftest import lipi as run_lipi

TEXTS = ["t72 t16 t30 t67 t90 t31 t15", "t86 t7 t84 t54 t50 t84 t35 t67 t42 t38 t63 t89",
         "t16", "t19 t19 t55 t44 t57 t97 t14 t1 t38"] * 10


def _write(tmp_path, lines):
    p = tmp_path / "texts.txt"
    p.write_text("\n".join(lines) + "\n")
    return str(p)


@pytest.mark.parametrize("fixture", ["st_mean", "bert", "st_mpnet", "xlmr"])
def test_encode_equals_lipi_embed_bit_for_bit(tmp_path, model_dir, fixture):
    d = model_dir(fixture)
    run_lipi("embed", "--quiet", "-m", d, "-o", str(tmp_path / "cli.npy"), _write(tmp_path, TEXTS))
    want = np.load(tmp_path / "cli.npy")
    model = lipi.Embedder(d, threads=2)
    got = model.encode(TEXTS)
    assert got.dtype == np.float32 and got.shape == want.shape == (len(TEXTS), model.dim)
    assert got.tobytes() == want.tobytes()
    one = model.encode(TEXTS[0])
    assert one.shape == (model.dim,)


def test_options_follow_the_command_line(tmp_path, model_dir):
    d = model_dir("st_mean")
    path = _write(tmp_path, TEXTS)
    run_lipi("embed", "--quiet", "-m", d, "--normalize", "--batch", "4", "--dtype", "int8",
             "-o", str(tmp_path / "cli.npy"), path)
    got = lipi.Embedder(d, dtype="int8").encode(TEXTS, batch_size=4, normalize_embeddings=True)
    assert got.tobytes() == np.load(tmp_path / "cli.npy").tobytes()
    assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)


def test_classify_equals_lipi_classify(tmp_path, model_dir):
    d = model_dir("bert_cls")
    out = run_lipi("classify", "--quiet", "-m", d, _write(tmp_path, TEXTS)).decode().splitlines()
    model = lipi.Embedder(d)
    probs = model.classify(TEXTS)
    assert probs.shape == (len(TEXTS), len(model.labels))
    for row, p in zip(out, probs):
        want = json.loads(row)["probs"]
        assert [want[label] for label in model.labels] == pytest.approx(p.tolist(), abs=5e-7)
    with pytest.raises(ValueError):
        lipi.Embedder(model_dir("st_mean")).classify(TEXTS)


def test_similarity_is_cosine(model_dir):
    model = lipi.Embedder(model_dir("st_mean"))
    s = model.similarity(TEXTS[:3], TEXTS[:2])
    v = model.encode(TEXTS[:3])
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    assert s.shape == (3, 2) and np.allclose(s, v @ v[:2].T, atol=1e-6)
    assert s[0, 0] == pytest.approx(1, abs=1e-6)


def test_embedder_errors_and_threads(model_dir, tmp_path):
    with pytest.raises(lipi.LipiError) as ex:
        lipi.Embedder(tmp_path / "nothing-here")
    assert ex.value.code in ("EIO", "EINVAL", "EFORMAT")
    with pytest.raises(ValueError):
        lipi.Embedder(model_dir("st_mean"), dtype="f16")
    model = lipi.Embedder(model_dir("st_mean"), threads=2)
    with pytest.raises(lipi.LipiError) as ex:
        model.encode(["t5", ""])  # a text with no tokens
    assert "text 2" in str(ex.value)
    want = model.encode(TEXTS)
    got = [None] * 4

    def work(i):
        got[i] = model.encode(TEXTS)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(g.tobytes() == want.tobytes() for g in got)


def test_index_search_equals_lipi_search(tmp_path, model_dir):
    d = model_dir("st_mean")
    docs = _write(tmp_path, TEXTS[:4] + ["t5 t6 t7", "t8 t9 t10 t11", "t12 t13"])
    run_lipi("index", "--quiet", "-m", d, "-o", str(tmp_path / "cli_idx"), docs)
    queries = ["t72 t16 t30", "t5 t6", "t19 t55"]
    qfile = tmp_path / "q.txt"
    qfile.write_text("\n".join(queries) + "\n")
    out = run_lipi("search", "--index", str(tmp_path / "cli_idx"), "--queries", str(qfile),
                   "-k", "3").decode().splitlines()
    model = lipi.Embedder(d)
    # The same index written from Python: the same files' vectors and hits.
    with open(docs) as f:
        doc_texts = f.read().splitlines()
    idx = lipi.Index.build(tmp_path / "py_idx", model.encode(doc_texts), texts=doc_texts,
                           embedder=model)
    assert np.load(tmp_path / "py_idx" / "vectors.npy").tobytes() == \
        np.load(tmp_path / "cli_idx" / "vectors.npy").tobytes()
    for index in (lipi.Index.load(tmp_path / "cli_idx"), idx):
        ids, scores = index.search(model.encode(queries), k=3)
        assert ids.shape == scores.shape == (3, 3)
        got = [f"{q + 1}\t{r + 1}\t{ids[q, r] + 1}\t{scores[q, r]:.6f}\t{index.text(ids[q, r])}"
               for q in range(3) for r in range(3)]
        assert got == out
    with pytest.raises(ValueError):
        idx.search(np.zeros((1, 3), dtype=np.float32))
    with pytest.raises(lipi.LipiError):
        lipi.Index.load(tmp_path / "no-index")


def test_progress_bar_keeps_the_vectors(model_dir, capsys):
    model = lipi.Embedder(model_dir("st_mean"))
    want = model.encode(TEXTS, batch_size=4)
    got = model.encode(TEXTS, batch_size=4, show_progress_bar=True)
    assert got.tobytes() == want.tobytes()
    assert f"{len(TEXTS)}/{len(TEXTS)} sentences" in capsys.readouterr().err


@pytest.mark.skipif(not lipi._lipi.has_faiss, reason="lipi built without FAISS")
def test_faiss_flat_index_finds_what_exact_search_finds(tmp_path, model_dir):
    model = lipi.Embedder(model_dir("st_mean"))
    docs = [f"t{i} t{(i * 7) % 100} t{(i * 13) % 100}" for i in range(2, 60)]
    idx = lipi.Index.build(tmp_path / "idx", model.encode(docs), texts=docs, faiss="Flat")
    assert idx.has_faiss
    q = model.encode(docs[:5])
    ids, scores = idx.search(q, k=3)
    exact_ids, exact_scores = idx.search(q, k=3, exact=True)
    assert ids.tolist() == exact_ids.tolist()
    assert np.allclose(scores, exact_scores, atol=1e-5)
    assert ids[:, 0].tolist() == list(range(5))
