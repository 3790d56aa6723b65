"""lipi.Index with quantized codes against brute-force NumPy: the binary
codes (bits at 0 or at the rows' means, numpy.packbits), their Hamming and
weighted scores with ties, rescoring, and the search options of `lipi
search` (--rescore-multiplier, --no-rescore, --int8-query, --binary-query)."""
import json

import numpy as np
import pytest

import lipi
from conftest import lipi as run_lipi

N, D, NQ, K = 300, 40, 12, 10


def _fixture():
    """N random unit rows sharing a common direction (as real embeddings
    do: most values of a dimension on one side of 0), rows 7 and 200
    copies of row 3, NQ queries, the first of them row 3."""
    rng = np.random.default_rng(5)
    common = rng.normal(size=D)
    x = rng.normal(size=(N, D)) + 1.5 * common
    x[7] = x[200] = x[3]
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = rng.normal(size=(NQ, D)) + 1.5 * common
    q[0] = x[3]
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return x.astype(np.float32), q.astype(np.float32)


def _top(scores, k):
    """Best k of each row, ties by the lower document (a stable sort of
    minus the scores)."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(scores, order, axis=1)


def _weights(q):
    """|w| and signs of the binary query weights: roundf(q * 7 / max |q|)."""
    s = np.float32(7) / np.abs(q).max(axis=1, keepdims=True)
    w = q * s
    return np.sign(w) * np.floor(np.abs(w) + np.float32(0.5))  # half away from zero


@pytest.mark.parametrize("threshold", ["mean", "zero"])
def test_binary_codes_and_scores_equal_numpy(tmp_path, threshold):
    x, q = _fixture()
    idx = lipi.Index.build(tmp_path / "idx", x, quantize="binary", binary_threshold=threshold)
    assert idx.quantization == "binary" and idx.binary_threshold == threshold
    v = np.load(tmp_path / "idx" / "vectors.npy")  # the rows as stored
    t = v.astype(np.float64).mean(axis=0).astype(np.float32) if threshold == "mean" \
        else np.zeros(D, np.float32)
    stored_t = np.load(tmp_path / "idx" / "binary_thresholds.npy")
    assert stored_t.shape == (1, D)
    assert np.array_equal(stored_t[0], t) if threshold == "zero" else \
        np.allclose(stored_t[0], t, rtol=0, atol=1e-7)
    t = stored_t[0]
    bits = v > t
    assert np.array_equal(np.load(tmp_path / "idx" / "quantized.npy"), np.packbits(bits, axis=1))
    meta = json.loads((tmp_path / "idx" / "meta.json").read_text())
    assert meta["binary_threshold"] == threshold
    assert meta["version"] == (2 if threshold == "mean" else 1)
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    # Bits: minus the Hamming distance of the query's codes at the same t.
    ham = -(bits[None, :, :] != (qn > t)[:, None, :]).sum(axis=2).astype(np.float64)
    want_ids, want_s = _top(ham, K)
    ids, scores = idx.search(q, k=K, no_rescore=True, binary_query="bits")
    assert ids.tolist() == want_ids.tolist()
    assert scores.tolist() == want_s.tolist()
    assert ids[0, :3].tolist() == [3, 7, 200]  # row 3 and its copies tie, in order
    # Weights (the default): minus sum |w| [bit != (q > 0)].
    w = _weights(qn)
    weighted = -(np.abs(w)[:, None, :] * (bits[None, :, :] != (qn > 0)[:, None, :])).sum(axis=2)
    want_ids, want_s = _top(weighted, K)
    for how in ({}, {"binary_query": "weights"}):
        ids, scores = idx.search(q, k=K, no_rescore=True, **how)
        assert ids.tolist() == want_ids.tolist()
        assert scores.tolist() == want_s.tolist()


def test_rescoring_returns_the_exact_top_k_of_the_candidates(tmp_path):
    x, q = _fixture()
    idx = lipi.Index.build(tmp_path / "idx", x, quantize="binary")
    exact_ids, exact_s = idx.search(q, k=K, exact=True)
    for mult in (1, 3, 30):
        cand, _ = idx.search(q, k=mult * K, no_rescore=True)
        ids, scores = idx.search(q, k=K, rescore_multiplier=mult)
        for i in range(NQ):
            c = cand[i]
            s = (x[c].astype(np.float64) @ q[i].astype(np.float64)).astype(np.float32)
            order = np.lexsort((c, -s))[:K]
            assert ids[i].tolist() == c[order].tolist()
            assert np.allclose(scores[i], s[order], atol=1e-6)
            if set(exact_ids[i]) <= set(c):  # the true top k among the candidates
                assert ids[i].tolist() == exact_ids[i].tolist()
    # 30 x 10 = every document: exact search.
    ids, _ = idx.search(q, k=K, rescore_multiplier=30)
    assert ids.tolist() == exact_ids.tolist()


def test_search_options_follow_the_command_line(tmp_path):
    x, q = _fixture()
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "q.npy", q)
    (tmp_path / "docs.txt").write_text("".join(f"doc {i}\n" for i in range(N)))
    for quant, opt, values in (("int8", "int8_query", ("weights", "codes")),
                               ("binary", "binary_query", ("weights", "bits"))):
        d = tmp_path / quant
        run_lipi("index", "--quiet", "--quantize", quant, "--vectors", str(tmp_path / "x.npy"),
                 "-o", str(d), str(tmp_path / "docs.txt"))
        idx = lipi.Index(d)
        rankings = []
        for value in values:
            for extra, kw in ((["--no-rescore"], {"no_rescore": True}),
                              (["--rescore-multiplier", "2"], {"rescore_multiplier": 2})):
                out = run_lipi("search", "--index", str(d), "--query-vectors",
                               str(tmp_path / "q.npy"), "-k", "3",
                               "--" + opt.replace("_", "-"), value, *extra).decode().splitlines()
                ids, scores = idx.search(q, k=3, **{opt: value}, **kw)
                got = [f"{i + 1}\t{r + 1}\t{ids[i, r] + 1}\t{scores[i, r]:.6f}\tdoc {ids[i, r]}"
                       for i in range(NQ) for r in range(3)]
                assert got == out
                rankings.append(ids.tolist())
        assert rankings[0] != rankings[2]  # the two scorings differ unrescored
        with pytest.raises(ValueError):
            idx.search(q, **{opt: "other"})
        with pytest.raises(ValueError):
            idx.search(q, exact=True, **{opt: values[0]})
        other = "binary_query" if quant == "int8" else "int8_query"
        with pytest.raises(ValueError, match="needs"):
            idx.search(q, **{other: "weights"})
    plain = lipi.Index.build(tmp_path / "plain", x)
    assert plain.quantization is None and plain.binary_threshold is None
    with pytest.raises(ValueError, match="quantized"):
        plain.search(q, no_rescore=True)
    with pytest.raises(ValueError, match="binary_threshold"):
        lipi.Index.build(tmp_path / "bad", x, quantize="int8", binary_threshold="zero")
    with pytest.raises(ValueError, match="binary_threshold"):
        lipi.Index.build(tmp_path / "bad", x, quantize="binary", binary_threshold="median")
