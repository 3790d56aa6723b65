"""lipi's corpus work on a Dask cluster: word counts (and training from
them), embeddings and their index, and the token-inflation report, spread
over the workers of an existing distributed.Client.

    >>> from distributed import Client, LocalCluster
    >>> import lipi.dask
    >>> client = Client(LocalCluster(n_workers=2, threads_per_worker=1))
    >>> counts = lipi.dask.count(["big.txt"], client, "shared/out", partitions=30)
    >>> tok = lipi.train(from_counts=counts, vocab_size=32000)
    >>> tok = lipi.dask.train(["big.txt"], client, "shared/out", vocab_size=32000)  # the same

    >>> shards = lipi.dask.embed(["docs.txt"], "model/", client, "shared/emb")
    >>> idx = lipi.dask.index(shards, "shared/idx", model="model/")
    >>> rows = lipi.dask.inflation(["cl100k_base"], "flores/", client, partitions=8)

The inputs are cut into shards: whole files, or byte ranges of big ones
cut at line starts. One task per shard writes its output into out_dir (a
folder every worker and the driver can reach: a shared file system),
atomically under a name derived from the shard, so a task Dask runs again
after a worker died overwrites its first try, never adds to it. Counts
(binary counts runs, see trainer/trainer.h) are then added up by a tree of
merge tasks (what `lipi count --merge` does), fan_in files per task, so no
task holds every shard's table; the last one writes the TSV. The result is
the bytes `lipi count` writes on one machine, for any number of shards or
workers. Compressed files (.gz, .xz, .zst) are whole-file shards.

Progress shows on Dask's dashboard; progress=True also draws Dask's
progress bar (distributed.progress) while waiting.
"""
import hashlib as _hashlib
import json as _json
import os as _os
import tempfile as _tempfile
import uuid as _uuid

import lipi as _lipi_pkg
from . import _lipi
from ._lipi import LipiError

__all__ = ["shards", "count", "train", "embed", "index", "inflation"]

# The options that decide what a word is: counting and training must get
# the same ones (lipi count's --normalizer, --pattern, ...).
TEXT_OPTIONS = ("normalizer", "pattern", "regex", "lowercase", "strip_accents", "fold_digits",
                "invalid")
_COMPRESSED = (".gz", ".xz", ".zst")
_BOM = b"\xef\xbb\xbf"


# ---------------------------------------------------------------------------
# Shards
# ---------------------------------------------------------------------------

def _line_start_at_or_after(path, pos, size):
    """The first line start >= pos in path (size if none)."""
    if pos <= 0:
        return 0
    with open(path, "rb") as f:
        f.seek(pos - 1)
        while True:
            block = f.read(1 << 16)
            if not block:
                return size
            i = block.find(b"\n")
            if i >= 0:
                return f.tell() - len(block) + i + 1


def shards(paths, partitions=None, shard_bytes=None, whole_files=False):
    """Cuts the files into at most `partitions` shards of about equal size
    (or shards of about shard_bytes each; default: one shard per file).
    A shard is a list of pieces (path, start, end): byte ranges starting at
    line starts; a compressed file is never cut. Empty shards are dropped,
    so fewer than `partitions` may come back for small inputs.
    whole_files=True moves a cut that falls in a file no bigger than a
    shard to the nearer end of that file (no file is copied in part)."""
    paths = [_os.fspath(p) for p in ([paths] if isinstance(paths, (str, bytes, _os.PathLike))
                                      else paths)]
    for p in paths:
        if p == "-":
            raise ValueError("lipi.dask reads files, not standard input")
    sizes = [_os.path.getsize(p) for p in paths]
    total = sum(sizes)
    if partitions is None and shard_bytes is None:
        return [[(p, 0, s)] for p, s in zip(paths, sizes)]
    if partitions is not None:
        if partitions < 1:
            raise ValueError("partitions must be at least 1")
        cuts = [total * k // partitions for k in range(1, partitions)]
    else:
        if shard_bytes < 1:
            raise ValueError("shard_bytes must be at least 1")
        cuts = list(range(shard_bytes, total, shard_bytes))
    if whole_files and cuts:
        share = total / (len(cuts) + 1)
        snapped, base, i = [], 0, 0
        for c in cuts:
            while c >= base + sizes[i]:
                base += sizes[i]
                i += 1
            small = sizes[i] <= share
            snapped.append((base if c - base < base + sizes[i] - c else base + sizes[i])
                           if small else c)
        cuts = snapped
    # Each cut (a position in the files laid end to end) moves to the next
    # line start of its file; a cut in a compressed file moves to its end.
    out, cur, base, ci = [], [], 0, 0
    for p, size in zip(paths, sizes):
        start = 0
        while ci < len(cuts) and cuts[ci] < base + size:
            local = cuts[ci] - base
            ci += 1
            if p.endswith(_COMPRESSED):
                continue
            at = _line_start_at_or_after(p, local, size)
            if at > start and at < size:
                cur.append((p, start, at))
                out.append(cur)
                cur, start = [], at
        if size > start or size == 0:
            cur.append((p, start, size))
        if ci < len(cuts) and cuts[ci] == base + size and cur:
            out.append(cur)
            cur = []
            while ci < len(cuts) and cuts[ci] <= base + size:
                ci += 1
        base += size
    if cur:
        out.append(cur)
    return out


def _shard_name(prefix, shard, extra=""):
    """A file name derived from the shard (its pieces) and the options."""
    h = _hashlib.sha256()
    for p, a, b in shard:
        h.update(f"{_os.path.abspath(p)}\0{a}\0{b}\0".encode("utf-8", "surrogateescape"))
    h.update(extra.encode())
    return f"{prefix}-{h.hexdigest()[:20]}"


class _Pieces:
    """The shard's pieces as files lipi's reader can open: whole files as
    they are, byte ranges copied to a local temporary file. A range that
    does not start the file gets a BOM in front, which the reader skips
    (so a U+FEFF that starts the range stays text, as in the whole file)."""

    def __init__(self, shard, folder=None):
        self.shard, self.folder = shard, folder  # folder: copies keep their names there
        self.files, self._tmp = [], []

    def __enter__(self):
        try:
            self._copy()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _copy(self):
        for p, a, b in self.shard:
            if a == 0 and b == _os.path.getsize(p):
                self.files.append(p)
                continue
            if self.folder:
                tmp = _os.path.join(self.folder, _os.path.basename(p))
                fd = _os.open(tmp, _os.O_WRONLY | _os.O_CREAT | _os.O_EXCL, 0o600)
            else:
                fd, tmp = _tempfile.mkstemp(prefix="lipi-dask-", suffix=".txt")
            self._tmp.append(tmp)  # removed by __exit__, even after a failed copy
            with open(p, "rb") as src, _os.fdopen(fd, "wb") as dst:
                if a > 0:
                    dst.write(_BOM)
                src.seek(a)
                left = b - a
                while left:
                    block = src.read(min(left, 1 << 20))
                    if not block:
                        raise ValueError(f"{p}: shorter than when it was cut into shards "
                                         f"(expected {b} bytes)")
                    dst.write(block)
                    left -= len(block)
            self.files.append(tmp)

    def __exit__(self, *exc):
        for t in self._tmp:
            try:
                _os.unlink(t)
            except OSError:
                pass

    def where(self, path, line, offset):
        """(file, line, byte offset) in the original file of an error the
        reader reported at (path, line, offset) of a piece."""
        for (p, a, b), f in zip(self.shard, self.files):
            if f != path:
                continue
            if a == 0:
                return p, line, offset
            with open(p, "rb") as src:  # lines before the range, on the error path only
                before, left = 0, a
                while left:
                    block = src.read(min(left, 1 << 20))
                    before += block.count(b"\n")
                    left -= len(block)
            return p, before + line, a + offset - len(_BOM) if offset >= len(_BOM) else a
        return path, line, offset


def _relocated(e, pieces):
    """LipiError e, reported on a piece's file, as an error of the shard's
    original file (its path, line and byte)."""
    if not getattr(e, "path", ""):
        return e
    path, line, offset = pieces.where(e.path, e.line, e.offset)
    if path == e.path:
        return e
    what = f"{path}:{line}: byte {offset}: {e.msg}" if line else f"{path}: {e.msg}"
    err = LipiError(what)
    err.code, err.path, err.line, err.offset, err.msg = e.code, path, line, offset, e.msg
    return err


# ---------------------------------------------------------------------------
# Counting and training
# ---------------------------------------------------------------------------

def _count_task(shard, out_path, type, options):
    with _Pieces(shard) as pieces:
        try:
            _lipi._count_to_run(pieces.files, out_path, type, options)
        except LipiError as e:
            raise _relocated(e, pieces) from None
    return out_path


def _merge_task(paths, out_path, tsv):
    _lipi._counts_merge_runs(paths, out_path, tsv)
    return out_path


def _client(client):
    if client is None:
        from distributed import get_client
        return get_client()
    return client


def _wait(client, futures, progress):
    if progress:
        from distributed import progress as _progress
        _progress(futures)
    return client.gather(futures)


# The largest shard of count's default cut: a task of ~20 s on one core,
# so a retry redoes little and the progress bar moves.
DEFAULT_SHARD_BYTES = 1 << 30


def _default_partitions(client, paths):
    """Two shards per worker thread, so a slow worker's share can move
    (fewer tasks than this leave a core idle at the end, many more add
    intermediate files to write and merge)."""
    threads = sum(client.nthreads().values()) or 1
    p = [paths] if isinstance(paths, (str, bytes, _os.PathLike)) else paths
    total = sum(_os.path.getsize(_os.fspath(f)) for f in p)
    return max(2 * threads, -(-total // DEFAULT_SHARD_BYTES))


def count(paths, client=None, out_dir=".", *, partitions=None, shard_bytes=None, fan_in=8,
          type="bpe", normalizer=None, pattern=None, regex=None, lowercase=None,
          strip_accents=None, fold_digits=None, invalid="error", threads=1, keep=False,
          progress=False, name="counts.tsv", cut=None):
    """Counts the words of the files on the cluster and returns the path of
    the merged counts file (out_dir/name), the bytes `lipi count` with the
    same options writes. One task per shard (see shards(); partitions or
    shard_bytes choose the cut), then merges of fan_in files at a time.
    The default cut is sized to the cluster: two shards per worker thread
    (more when the input passes DEFAULT_SHARD_BYTES a shard), whole files
    kept together where they are smaller than a shard. Each task writes a
    counts run (trainer.h's binary form, cheap to write and read back);
    only the final merge writes the TSV. cut: shards made by shards()
    (e.g. shards(paths), one per file) instead of partitions/shard_bytes. The text options are lipi.train's; type
    'unigram' makes the default pattern Unigram's, as training does.
    threads: counting threads per task (1 suits one task per worker core).
    keep=True keeps the per-shard and intermediate counts files.
    A bad line raises LipiError naming the original file, line and byte."""
    if fan_in < 2:
        raise ValueError("fan_in must be at least 2")
    client = _client(client)
    out_dir = _os.path.abspath(_os.fspath(out_dir))
    _os.makedirs(out_dir, exist_ok=True)
    options = {k: v for k, v in dict(normalizer=normalizer, pattern=pattern, regex=regex,
                                     lowercase=lowercase, strip_accents=strip_accents,
                                     fold_digits=fold_digits, invalid=invalid,
                                     threads=threads).items() if v is not None}
    tag = _json.dumps([type, sorted(options.items())])
    run = _uuid.uuid4().hex[:8]  # task keys of this call (file names follow the shards)
    if cut is not None:
        cut = [list(s) for s in cut]
    elif partitions is None and shard_bytes is None:
        cut = shards(paths, _default_partitions(client, paths), whole_files=True)
    else:
        cut = shards(paths, partitions, shard_bytes)
    if not cut:
        raise ValueError("no input files")
    level = []  # (future, the path it writes)
    for s in cut:
        out = _os.path.join(out_dir, _shard_name("count", s, tag) + ".run")
        level.append((client.submit(_count_task, s, out, type, options, pure=False,
                                    key=f"lipi-{_os.path.basename(out)[:-4]}-{run}"), out))
    futures, depth = [f for f, _ in level], 0
    final = _os.path.join(out_dir, name)
    while True:
        depth += 1
        groups = [level[i:i + fan_in] for i in range(0, len(level), fan_in)]
        nxt = []
        for g in groups:
            ins = [p for _, p in g]
            h = _hashlib.sha256("\0".join(ins).encode("utf-8", "surrogateescape")).hexdigest()[:20]
            last = len(groups) == 1
            out = final if last else _os.path.join(out_dir, f"merge-{depth}-{h}.run")
            nxt.append((client.submit(_merge_task, [f for f, _ in g], out, last, pure=False,
                                      key=f"lipi-merge-{depth}-{h}-{run}"), out))
        futures += [f for f, _ in nxt]
        level = nxt
        if len(level) == 1:
            break
    made = _wait(client, futures, progress)
    if not keep:
        for p in made[:-1]:
            try:
                _os.unlink(p)
            except OSError:
                pass
    return final


def train(paths, client=None, out_dir=".", type="bpe", vocab_size=32000, *, partitions=None,
          shard_bytes=None, fan_in=8, keep=False, progress=False, cut=None, **options):
    """count() on the cluster, then lipi.train(from_counts=...) on this
    machine with the same text options: the tokenizer `lipi train` trains
    on the files, byte for byte. options are lipi.train's."""
    text = {k: options[k] for k in TEXT_OPTIONS if options.get(k) is not None}
    counts = count(paths, client, out_dir, partitions=partitions, shard_bytes=shard_bytes,
                   fan_in=fan_in, type=type, keep=keep, progress=progress, cut=cut, **text)
    return _lipi_pkg.train(from_counts=counts, type=type, vocab_size=vocab_size, **options)


# ---------------------------------------------------------------------------
# Embeddings and their index
# ---------------------------------------------------------------------------

# The models a worker process has opened, by their arguments: a model is
# loaded once per worker, not per task.
_MODELS = {}


def _embedder(model, kw):
    key = (model, tuple(sorted(kw.items())))
    m = _MODELS.get(key)
    if m is None:
        m = _MODELS[key] = _lipi_pkg.Embedder(model, **kw)
    return m


def _shard_lines(shard, invalid):
    """The lines of a shard, as `lipi embed` reads them."""
    texts = []
    with _Pieces(shard) as pieces:
        for f in pieces.files:
            try:
                texts += _lipi._read_lines(f, invalid)
            except LipiError as e:
                raise _relocated(e, pieces) from None
    return texts


def _save_npy(path, array):
    """np.save, atomically: a temporary file beside path, renamed over it."""
    import numpy as np
    d = _os.path.dirname(path)
    fd, tmp = _tempfile.mkstemp(dir=d, prefix=_os.path.basename(path) + ".tmp-")
    try:
        with _os.fdopen(fd, "wb") as f:
            np.save(f, array)
        _os.replace(tmp, path)
    except BaseException:
        _os.unlink(tmp)
        raise


def _embed_task(shard, out_path, model, kw, batch_size, normalize, invalid):
    texts = _shard_lines(shard, invalid)
    m = _embedder(model, kw)
    if texts:
        vecs = m.encode(texts, batch_size=batch_size, normalize_embeddings=normalize)
    else:
        import numpy as np
        vecs = np.zeros((0, m.dim), dtype=np.float32)
    _save_npy(out_path, vecs)
    return len(texts)


def embed(paths, model, client=None, out_dir=".", dtype="f32", batch_size=32, *,
          partitions=None, shard_bytes=None, normalize=False, threads=1, invalid="error",
          progress=False, **model_options):
    """Embeds every line of the files on the cluster, as `lipi embed -m
    MODEL` does: one task per shard writes out_dir/embed-*.npy (float32,
    the shard's lines in order); each worker opens the model once.
    model: a model folder every worker can read (or a hub name in each
    worker's cache); model_options are lipi.Embedder's (max_length,
    prompt, prompt_name, dimensions, pooling, revision).
    Returns the shards in input order, as dicts {"npy", "pieces",
    "first", "rows"}: rows first .. first + rows - 1 (0-based lines of the
    files laid end to end); the same list goes to out_dir/embeddings.json."""
    client = _client(client)
    out_dir = _os.path.abspath(_os.fspath(out_dir))
    _os.makedirs(out_dir, exist_ok=True)
    model = _os.fspath(model)
    kw = dict(model_options, dtype=dtype, threads=threads)
    tag = _json.dumps([model, sorted(kw.items()), batch_size, normalize, invalid])
    run = _uuid.uuid4().hex[:8]
    cut = shards(paths, partitions, shard_bytes)
    if not cut:
        raise ValueError("no input files")
    futures, outs = [], []
    for s in cut:
        out = _os.path.join(out_dir, _shard_name("embed", s, tag) + ".npy")
        futures.append(client.submit(_embed_task, s, out, model, kw, batch_size, normalize,
                                     invalid, pure=False,
                                     key=f"lipi-{_os.path.basename(out)[:-4]}-{run}"))
        outs.append(out)
    rows = _wait(client, futures, progress)
    result, first = [], 0
    for s, out, n in zip(cut, outs, rows):
        result.append({"npy": out, "pieces": [list(p) for p in s], "first": first, "rows": n})
        first += n
    manifest = _os.path.join(out_dir, "embeddings.json")
    fd, tmp = _tempfile.mkstemp(dir=out_dir, prefix="embeddings.json.tmp-")
    with _os.fdopen(fd, "w") as f:
        _json.dump({"model": model, "options": kw, "shards": result}, f, indent=1)
    _os.replace(tmp, manifest)
    return result


def index(embedded, out_path, model=None, *, faiss=None, quantize=None, threads=None,
          invalid="error", **model_options):
    """Writes one lipi index (the folder `lipi index` writes) from embed()'s
    shards (its list, or the path of its embeddings.json), appending them
    in order, one shard in memory at a time: the documents are the lines
    of the files, numbered as `lipi index` numbers them, and search gives
    what `lipi search` gives on an index of the same lines. model (with
    lipi.Embedder's model_options) records the model, as `lipi index -m`:
    pass the one embed() used. faiss: an index_factory string (FAISS is
    built over all rows at the end, as `lipi index --faiss`); quantize:
    'int8' or 'binary'. Runs on this machine (the index is one folder);
    returns the loaded lipi.Index."""
    import numpy as np
    if isinstance(embedded, (str, bytes, _os.PathLike)):
        with open(embedded, encoding="utf-8") as f:
            embedded = _json.load(f)["shards"]
    if not embedded:
        raise ValueError("no shards to index")
    emb = None
    if model is not None:
        emb = _lipi_pkg.Embedder(_os.fspath(model), **model_options)._get(32, -1)
    first = np.load(embedded[0]["npy"], mmap_mode="r")
    dim = first.shape[1]

    def chunks():
        expect = 0
        for s in embedded:
            if s["first"] != expect:
                raise ValueError(f"shard {s['npy']} starts at line {s['first']}, not {expect}")
            vecs = np.load(s["npy"], mmap_mode="r")
            texts = _shard_lines([tuple(p) for p in s["pieces"]], invalid)
            if vecs.shape != (len(texts), dim):
                raise ValueError(f"{s['npy']}: {vecs.shape[0]} rows for {len(texts)} lines "
                                 "(the input changed since embed?)")
            expect += len(texts)
            yield np.ascontiguousarray(vecs, dtype=np.float32), texts

    _lipi._index_build_from(_os.fspath(out_path), dim, chunks(), emb, faiss, quantize, threads)
    return _lipi_pkg.Index(out_path)


# ---------------------------------------------------------------------------
# Inflation report
# ---------------------------------------------------------------------------

# The row fields of lipi.inflation, the counts first (in _inflation_counts'
# order), as the JSON report writes them.
_COUNTS = ("lines", "tokens", "words", "chars", "bytes", "continued_words", "unknown_tokens",
           "byte_fallback_tokens", "unknown_chars", "boundaries", "split_boundaries")


def _line_offsets(path, cuts):
    """Byte offsets of the starts of lines cuts[i] (0-based; the file's
    size for a line past the end)."""
    want, at, line, pos = set(cuts), {}, 0, 0
    with open(path, "rb") as f:
        for text in f:
            if line in want:
                at[line] = pos
            pos += len(text)
            line += 1
    return [at.get(c, pos) for c in cuts]


def _inflation_task(tokenizers, pieces, labels, reference, threads, invalid):
    with _tempfile.TemporaryDirectory(prefix="lipi-dask-") as tmp, _Pieces(pieces, tmp) as p:
        try:
            return _lipi._inflation_counts(tokenizers, p.files, reference, threads, invalid)
        except LipiError as e:
            raise _relocated(e, p) from None


def _ratio(a, b):
    return a / b if b else float("nan")


def _rows(counts):
    """lipi.inflation's rows from the summed counts: the figures of
    lipi_inflation_get_row, in the JSON report's order (by tokenizer, then
    languages by the first tokenizer's parity, lowest first)."""
    toks, langs, ref, cells = (counts["tokenizers"], counts["languages"], counts["reference"],
                               counts["cells"])

    def row(t, l):
        c = dict(zip(_COUNTS, cells[t][l]))
        r = cells[t][ref]
        parity = _ratio(c["tokens"], r[1]) if r[0] == c["lines"] else float("nan")
        return {
            "tokenizer": toks[t], "language": langs[l], "lines": c["lines"],
            "tokens": c["tokens"], "words": c["words"], "chars": c["chars"], "bytes": c["bytes"],
            "tokens_per_line": _ratio(c["tokens"], c["lines"]), "parity": parity,
            "fertility": _ratio(c["tokens"], c["words"]),
            "chars_per_token": _ratio(c["chars"], c["tokens"]),
            "bytes_per_token": _ratio(c["bytes"], c["tokens"]),
            "continued_words": _ratio(c["continued_words"], c["words"]),
            "unknown_share": _ratio(c["unknown_tokens"], c["tokens"]),
            "byte_fallback_share": _ratio(c["byte_fallback_tokens"], c["tokens"]),
            "unknown_char_share": _ratio(c["unknown_chars"], c["chars"]),
            "grapheme_split_share": _ratio(c["split_boundaries"], c["boundaries"]),
            "comparable": c["unknown_chars"] <= c["chars"] // 10,
        }

    def key(l):  # goes_before: rows with a parity first, by parity, then by name
        p = row(0, l)["parity"]
        return (p != p, 0.0 if p != p else p, langs[l].encode())

    order = sorted(range(len(langs)), key=key)
    out = []
    for t in range(len(toks)):
        for l in order:
            r = row(t, l)
            # as the JSON report prints them: six decimals, NaN as null
            out.append({k: (None if v != v else float(f"{v:.6f}")) if isinstance(v, float) else v
                        for k, v in r.items()})
    return out


def inflation(tokenizers, parallel, client=None, reference="eng_Latn", *, partitions=None,
              lines_per_shard=None, threads=1, invalid="error", progress=False):
    """lipi.inflation's rows for line-aligned parallel files (or their
    folder), measured on the cluster: the files are cut at the same line
    numbers (partitions shards, or lines_per_shard lines each; default
    one), each task measures its lines and returns the report's counts,
    and the counts are summed exactly here before the ratios are taken.
    Compressed files are measured as one shard. Returns the rows
    lipi.inflation returns for the same files. Each task opens the
    tokenizers (bundled names or paths every worker can read)."""
    client = _client(client)
    toks = [_os.fspath(t) for t in ([tokenizers] if isinstance(tokenizers, (str, _os.PathLike))
                                    else tokenizers)]
    par = [_os.fspath(p) for p in ([parallel] if isinstance(parallel, (str, _os.PathLike))
                                   else parallel)]
    files, _ref, lines = _lipi._parallel_files(par, reference, invalid)
    n = 1
    if partitions:
        n = max(1, min(partitions, lines))
    elif lines_per_shard:
        n = max(1, -(-lines // lines_per_shard))
    if any(p.endswith(_COMPRESSED) for _, p in files):
        n = 1
    cuts = [lines * k // n for k in range(n + 1)]
    offsets = {p: _line_offsets(p, cuts) for _, p in files}
    labels = [label for label, _ in files]
    run = _uuid.uuid4().hex[:8]
    futures = []
    for k in range(n):
        if cuts[k] == cuts[k + 1]:
            continue
        pieces = [(p, offsets[p][k], offsets[p][k + 1]) for _, p in files]
        futures.append(client.submit(_inflation_task, toks, pieces, labels, reference, threads,
                                     invalid, pure=False, key=f"lipi-inflation-{k}-{run}"))
    parts = _wait(client, futures, progress)
    total = parts[0]
    for part in parts[1:]:
        total["skipped"] += part["skipped"]
        for t, row in enumerate(part["cells"]):
            for l, c in enumerate(row):
                total["cells"][t][l] = tuple(a + b for a, b in zip(total["cells"][t][l], c))
    return _rows(total)
