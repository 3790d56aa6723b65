"""lipi.dask on a LocalCluster of two worker processes (loopback only)
against the single-machine command line: `lipi count`, `lipi train`,
`lipi embed`, `lipi index` and `lipi search`."""
import os
import signal
import sys

import numpy as np
import pytest

distributed = pytest.importorskip("distributed", reason="python3-distributed is not installed")

import cloudpickle  # noqa: E402  (Dask's; the kill plugin travels by value)

import lipi  # noqa: E402
import lipi.dask  # noqa: E402
from conftest import ROOT, lipi as run_lipi  # noqa: E402

CORPUS = [os.path.join(ROOT, "data/flores200", f) for f in ("hin_Deva.txt", "tam_Taml.txt")]

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address="127.0.0.1:0")
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _cli_counts_and_tokenizer(tmp_path, files, *flags):
    counts = tmp_path / "cli-counts.tsv"
    run_lipi("count", "--quiet", "-o", str(counts), *flags, *files)
    tok = tmp_path / "cli-tok.json"
    run_lipi("train", "--quiet", "--vocab-size", "500", "-o", str(tok), *flags, *files)
    return counts.read_bytes(), tok.read_bytes()


@pytest.mark.parametrize("partitions", [1, 3, 7])
def test_counts_and_tokenizer_are_the_command_line_s(tmp_path, client, partitions):
    want_counts, want_tok = _cli_counts_and_tokenizer(tmp_path, CORPUS)
    cut = lipi.dask.shards(CORPUS, partitions)
    assert len(cut) == partitions
    out = tmp_path / "out"
    path = lipi.dask.count(CORPUS, client, out, partitions=partitions, fan_in=2)
    assert open(path, "rb").read() == want_counts
    assert os.listdir(out) == ["counts.tsv"]  # shard and merge files removed
    tok = lipi.dask.train(CORPUS, client, tmp_path / "out2", vocab_size=500,
                          partitions=partitions)
    assert tok.to_str().encode() == want_tok


def test_unigram_with_text_options(tmp_path, client):
    flags = ["--type", "unigram", "--lowercase", "--fold-digits"]
    tok_cli = tmp_path / "cli.json"
    run_lipi("train", "--quiet", "--vocab-size", "600", "-o", str(tok_cli), *flags, *CORPUS)
    tok = lipi.dask.train(CORPUS, client, tmp_path / "out", type="unigram", vocab_size=600,
                          partitions=5, lowercase=True, fold_digits=True)
    assert tok.to_str().encode() == tok_cli.read_bytes()


def test_shards_cut_at_line_starts(tmp_path):
    a = tmp_path / "a.txt"
    a.write_bytes(b"one\r\ntwo three\n\nfour\nfive")  # no newline at the end
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    data = a.read_bytes()
    for n in range(1, 12):
        cut = lipi.dask.shards([str(a), str(empty)], n)
        assert 1 <= len(cut) <= n
        pieces = [p for s in cut for p in s]
        # the pieces tile the files in order, each starting a line
        assert [p for p in pieces if p[0] == str(a)][0][1] == 0
        ends = {str(a): 0, str(empty): 0}
        for path, start, end in pieces:
            assert start == ends[path] and end >= start
            assert start == 0 or data[start - 1:start] == b"\n"
            ends[path] = end
        assert ends == {str(a): len(data), str(empty): 0}
    assert lipi.dask.shards([str(a)]) == [[(str(a), 0, len(data))]]


def test_default_and_per_file_cuts_give_the_command_line_s_counts(tmp_path, client):
    # The default cut follows the cluster (2 workers x 1 thread: 4 shards);
    # cut= takes shards() as given, here one per file. Intermediate files
    # are counts runs; only the final file is the TSV.
    files = CORPUS + [str(tmp_path / "small.txt")]
    (tmp_path / "small.txt").write_text("a few words\nनमस्ते दुनिया\n", encoding="utf-8")
    want = tmp_path / "cli.tsv"
    run_lipi("count", "--quiet", "-o", str(want), *files)
    assert len(lipi.dask.shards(files, 4, whole_files=True)) == 4
    for name, kw in (("default", {}), ("per-file", {"cut": lipi.dask.shards(files)})):
        out = tmp_path / name
        got = lipi.dask.count(files, client, out, keep=True, **kw)
        assert open(got, "rb").read() == want.read_bytes(), name
        runs = [f for f in os.listdir(out) if f != "counts.tsv"]
        assert runs and all(f.endswith(".run") for f in runs), runs
        assert all((out / f).read_bytes()[:8] == b"LIPIRUN\x01" for f in runs)
    # a damaged intermediate file is an error naming it, not a wrong sum
    run = out / runs[0]
    run.write_bytes(run.read_bytes()[:-1])
    with pytest.raises(lipi.LipiError) as ex:
        lipi._lipi._counts_merge_runs([str(run)], str(tmp_path / "x.tsv"), True)
    assert ex.value.path == str(run) and ex.value.code == "EFORMAT"


def test_whole_files_moves_cuts_to_the_nearer_file_end(tmp_path):
    sizes = [300, 50, 400, 120, 130]
    files = []
    for i, n in enumerate(sizes):
        f = tmp_path / f"f{i}.txt"
        f.write_bytes((b"x" * 9 + b"\n") * (n // 10))
        files.append(str(f))
    # a cut in a file no bigger than a shard (1000 / 4 = 250 bytes) moves to
    # its nearer end; the 300- and 400-byte files are still cut
    cut = lipi.dask.shards(files, 4, whole_files=True)
    pieces = [p for s in cut for p in s]
    assert [(os.path.basename(p), a, b) for p, a, b in pieces] == [
        ("f0.txt", 0, 250), ("f0.txt", 250, 300), ("f1.txt", 0, 50), ("f2.txt", 0, 150),
        ("f2.txt", 150, 400), ("f3.txt", 0, 120), ("f4.txt", 0, 130)]
    assert [len(s) for s in cut] == [1, 3, 1, 2]


def test_byte_ranges_keep_a_bom_inside_the_file_as_text(tmp_path, client):
    # A U+FEFF starting a later line is text for `lipi count`; a shard
    # starting at that line must not drop it as a file's BOM.
    f = tmp_path / "bom.txt"
    f.write_bytes(b"\xef\xbb\xbfhead line\n" + b"plain words here\n" * 50 +
                  b"\xef\xbb\xbfinner bom\n" + b"more words\n" * 50)
    want = tmp_path / "cli.tsv"
    run_lipi("count", "--quiet", "-o", str(want), str(f))
    inner = f.read_bytes().index(b"\xef\xbb\xbfinner")
    for n in (2, 3, 4):
        got = lipi.dask.count([str(f)], client, tmp_path / f"o{n}", partitions=n)
        assert open(got, "rb").read() == want.read_bytes(), n
    got = lipi.dask.count([str(f)], client, tmp_path / "at", shard_bytes=inner)
    assert open(got, "rb").read() == want.read_bytes()
    assert inner in {start for s in lipi.dask.shards([str(f)], shard_bytes=inner) for _, start, _ in s}


def test_corrupt_shard_names_the_file_line_and_byte(tmp_path, client, model_dir):
    bad = tmp_path / "bad.txt"
    lines = [f"line {i} नमस्ते".encode() for i in range(300)]
    lines[211] = b"bad \xff byte"
    bad.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(lipi.LipiError) as single:
        lipi.train([str(bad)], vocab_size=300)
    for files, n in (([bad], 1), ([bad], 4), ([CORPUS[0], bad], 2)):
        if n == 4:  # the bad line is in a byte range that does not start the file
            at = bad.read_bytes().index(b"\xff")
            assert any(0 < a <= at < b for s in lipi.dask.shards([str(bad)], 4) for _, a, b in s)
        with pytest.raises(lipi.LipiError) as ex:
            lipi.dask.count([str(f) for f in files], client, tmp_path / f"o{n}", partitions=n)
        e = ex.value
        assert (e.path, e.line, e.offset) == (str(bad), 212, single.value.offset)
        assert e.code == "EFORMAT" and "invalid UTF-8" in e.msg
        assert str(e).startswith(f"{bad}:212: byte {e.offset}: ")
        # no merged counts file for a failed run
        assert not os.path.exists(tmp_path / f"o{n}" / "counts.tsv")
    with pytest.raises(lipi.LipiError) as ex:  # embedding reads lines the same way
        lipi.dask.embed([str(bad)], model_dir("st_mean"), client, tmp_path / "emb", partitions=4)
    assert (ex.value.path, ex.value.line, ex.value.offset) == (str(bad), 212, single.value.offset)


class KillOnce(distributed.WorkerPlugin):
    """SIGKILLs the worker process when it starts the second counting task
    of the run; once, as the marker file says (a retry must not die too)."""

    def __init__(self, marker):
        self.marker = marker
        self.started = 0

    def transition(self, key, start, finish, **kwargs):
        if finish != "executing" or not str(key).startswith("lipi-count-"):
            return
        self.started += 1
        if self.started < 2:
            return
        try:
            os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        os.kill(os.getpid(), signal.SIGKILL)


def test_a_worker_killed_during_count_gives_the_same_result(tmp_path, client):
    want_counts, want_tok = _cli_counts_and_tokenizer(tmp_path, CORPUS)
    marker = tmp_path / "killed"
    client.register_worker_plugin(KillOnce(str(marker)), name="kill-once")
    try:
        tok = lipi.dask.train(CORPUS, client, tmp_path / "out", vocab_size=500, partitions=8,
                              keep=True)
    finally:
        client.unregister_worker_plugin("kill-once")
    assert marker.exists()  # a worker did die
    assert (tmp_path / "out" / "counts.tsv").read_bytes() == want_counts
    assert tok.to_str().encode() == want_tok
    client.wait_for_workers(2, timeout=60)  # the nanny restarted it


def _token_lines(n, seed=7):
    rng = np.random.default_rng(seed)
    return [" ".join(f"t{t}" for t in rng.integers(2, 100, size=rng.integers(1, 20)))
            for _ in range(n)]


@pytest.mark.parametrize("partitions", [1, 3, 7])
def test_embeddings_index_and_search_are_the_command_line_s(tmp_path, client, model_dir,
                                                            partitions):
    d = model_dir("st_mean")
    docs = tmp_path / "docs.txt"
    docs.write_text("\n".join(_token_lines(150)) + "\n")
    more = tmp_path / "more.txt"
    more.write_text("\r\n".join(_token_lines(40, seed=8)))  # CRLF, no final newline
    files = [str(docs), str(more)]
    run_lipi("embed", "--quiet", "-m", d, "-o", str(tmp_path / "cli.npy"), *files)
    run_lipi("index", "--quiet", "-m", d, "-o", str(tmp_path / "cli.idx"), *files)
    queries = tmp_path / "q.txt"
    queries.write_text("\n".join(_token_lines(6, seed=9)) + "\n")
    hits = run_lipi("search", "--index", str(tmp_path / "cli.idx"), "--queries", str(queries),
                    "-k", "5").decode().splitlines()

    shards = lipi.dask.embed(files, d, client, tmp_path / "emb", partitions=partitions)
    assert len(shards) == partitions
    got = np.concatenate([np.load(s["npy"]) for s in shards])
    assert got.tobytes() == np.load(tmp_path / "cli.npy").tobytes()
    assert [s["first"] for s in shards] == list(np.cumsum([0] + [s["rows"] for s in shards])[:-1])

    idx = lipi.dask.index(str(tmp_path / "emb" / "embeddings.json"), tmp_path / "dask.idx",
                          model=d)
    for f in ("vectors.npy", "texts", "offsets.npy"):
        assert (tmp_path / "dask.idx" / f).read_bytes() == (tmp_path / "cli.idx" / f).read_bytes()
    model = lipi.Embedder(d)
    q = model.encode(queries.read_text().splitlines())
    ids, scores = idx.search(q, k=5)
    want = [h.split("\t") for h in hits]
    assert [(int(w[0]), int(w[1]), int(w[2])) for w in want] == \
        [(i + 1, r + 1, int(ids[i, r]) + 1) for i in range(len(q)) for r in range(5)]
    assert [float(w[3]) for w in want] == pytest.approx(scores.ravel().tolist(), abs=1e-4)
    assert [w[4] for w in want] == [idx.text(int(i)) for i in ids.ravel()]


def test_embed_loads_the_model_once_per_worker(tmp_path, client, model_dir):
    d = model_dir("st_mean")
    docs = tmp_path / "docs.txt"
    docs.write_text("\n".join(_token_lines(60)) + "\n")

    def opened():
        return client.run(lambda: {k[0]: id(m) for k, m in lipi.dask._MODELS.items()})

    lipi.dask.embed([str(docs)], d, client, tmp_path / "emb", partitions=6)
    first = opened()
    assert any(d in models for models in first.values())
    lipi.dask.embed([str(docs)], d, client, tmp_path / "emb2", partitions=6)
    again = opened()
    for worker, models in first.items():  # the same objects: not opened again
        assert all(again[worker].get(name) == ident for name, ident in models.items())


@pytest.mark.skipif(not lipi._lipi.has_faiss, reason="lipi built without FAISS")
def test_faiss_index_searches_as_the_command_line_s(tmp_path, client, model_dir):
    d = model_dir("st_mean")
    docs = tmp_path / "docs.txt"
    docs.write_text("\n".join(_token_lines(120)) + "\n")
    run_lipi("index", "--quiet", "-m", d, "--faiss", "Flat", "-o", str(tmp_path / "cli.idx"),
             str(docs))
    queries = tmp_path / "q.txt"
    queries.write_text("\n".join(_token_lines(4, seed=3)) + "\n")
    hits = run_lipi("search", "--index", str(tmp_path / "cli.idx"), "--queries", str(queries),
                    "-k", "3").decode().splitlines()
    shards = lipi.dask.embed([str(docs)], d, client, tmp_path / "emb", partitions=3)
    idx = lipi.dask.index(shards, tmp_path / "dask.idx", model=d, faiss="Flat")
    assert idx.has_faiss
    ids, _ = idx.search(lipi.Embedder(d).encode(queries.read_text().splitlines()), k=3)
    assert [int(h.split("\t")[2]) - 1 for h in hits] == ids.ravel().tolist()


@pytest.mark.parametrize("partitions,toks", [
    (1, ["o200k_base"]), (3, ["cl100k_base", "bert-base-multilingual-cased"]),
    (7, ["cl100k_base"])])
def test_inflation_rows_are_lipi_inflation_s(client, partitions, toks):
    folder = os.path.join(ROOT, "data/flores200")
    got = lipi.dask.inflation(toks, folder, client, partitions=partitions)
    assert got == lipi.inflation(toks, parallel=folder)


def test_inflation_skipped_lines_and_a_bad_line(tmp_path, client):
    files = []
    for name in ("eng_Latn.txt", "hin_Deva.txt", "tam_Taml.txt"):
        lines = open(os.path.join(ROOT, "data/flores200", name), "rb").read().split(b"\n")
        if name == "hin_Deva.txt":
            lines[5] = lines[150] = b""  # skipped in every language
        (tmp_path / name).write_bytes(b"\n".join(lines))
        files.append(str(tmp_path / name))
    want = lipi.inflation(["cl100k_base"], parallel=files)
    assert lipi.dask.inflation("cl100k_base", files, client, partitions=4) == want
    assert want[0]["lines"] == 198
    bad = tmp_path / "tam_Taml.txt"
    data = bad.read_bytes().split(b"\n")
    data[120] = b"\xc3(" + data[120]
    bad.write_bytes(b"\n".join(data))
    with pytest.raises(lipi.LipiError) as single:
        lipi.inflation(["cl100k_base"], parallel=files)
    # the driver reads every file once to check the line counts (as lipi
    # does), so a bad line fails before any task; the shards' reading would
    # name it the same way
    with pytest.raises(lipi.LipiError) as ex:
        lipi.dask.inflation("cl100k_base", files, client, partitions=4)
    assert (ex.value.path, ex.value.line, ex.value.offset) == \
        (single.value.path, single.value.line, single.value.offset) == \
        (str(bad), 121, single.value.offset)
