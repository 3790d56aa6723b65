"""lipi: subword tokenizers, trainers, token-inflation reports and sentence
embeddings, with Indic scripts first-class, over lipi's C library.

    >>> import lipi
    >>> tok = lipi.Tokenizer.from_file("cl100k_base")
    >>> enc = tok.encode("नमस्ते दुनिया")
    >>> enc.ids, enc.tokens, enc.offsets
    >>> ids, mask = tok.encode_batch_numpy(["one", "two texts"])   # NumPy, padded

    >>> new = lipi.train(["corpus.txt"], type="unigram", vocab_size=8000)
    >>> new.save("tokenizer.json")

    >>> rows = lipi.inflation(["cl100k_base", "tokenizer.json"], parallel="flores/")
    >>> pandas.DataFrame(rows)

    >>> model = lipi.Embedder("sentence-transformers/LaBSE")
    >>> vecs = model.encode(["a sentence", "एक वाक्य"])            # (2, 768) float32

The names follow Hugging Face tokenizers (Tokenizer, Encoding, encode,
encode_batch, decode, token_to_id, enable_truncation, enable_padding) and
sentence-transformers (Embedder.encode). Errors lipi reports raise
LipiError, whose message names the file, line and byte as the command line
does; bad arguments raise TypeError or ValueError.
"""
import json as _json
import os as _os
import sys as _sys
import tempfile as _tempfile

import numpy as _np

from . import _lipi
from ._lipi import Encoding, LipiError

__all__ = ["Tokenizer", "Encoding", "LipiError", "train", "inflation", "inflation_html",
           "Embedder", "Index", "__version__"]
__version__ = _lipi.version

# The bundled tokenizers (cl100k_base, ...): data/ inside the package (a
# copy made by `pip install`, a link made by `make python`), unless
# $LIPI_DATA names another folder. The library functions that open
# tokenizers by name without a data_dir argument (the inflation report's)
# look in $LIPI_DATA first, so it is set to the package's folder when unset.
_DATA = _os.path.join(_os.path.dirname(__file__), "data")
if _os.path.isdir(_DATA) and not _os.environ.get("LIPI_DATA"):
    _os.environ["LIPI_DATA"] = _DATA


def _flag(value, name):
    if value is None or isinstance(value, bool):
        return value
    raise TypeError(f"{name} must be True, False or None")


class Tokenizer(_lipi.Tokenizer):
    """A tokenizer of any format lipi reads, giving Hugging Face's ids.

    Immutable once loaded but for its truncation, padding and special-token
    settings; any number of Python threads may encode with it at once (each
    call takes its own C session). encode_batch runs on C threads with the
    GIL released.
    """

    @classmethod
    def from_file(cls, path, *, pattern=None, lowercase=None, strip_accents=None):
        """Opens a tokenizer: tokenizer.json, a SentencePiece .model, a BERT
        vocab.txt, GPT-2 vocab.json (+ merges.txt beside it), a .tiktoken
        rank file, a GGUF file, a folder holding one of these, or a bundled
        name ("cl100k_base", "o200k_base", "p50k_base", "r50k_base",
        "bert-base-multilingual-cased").

        pattern: the split regex for rank files lipi does not know.
        lowercase / strip_accents: vocab.txt settings (None: as the folder's
        tokenizer_config.json, or the name, says).
        Raises LipiError naming the file and byte of what is wrong."""
        return cls._open(path, None, pattern, _flag(lowercase, "lowercase"),
                         _flag(strip_accents, "strip_accents"))

    def __repr__(self):
        return f"<lipi.Tokenizer vocab_size={self.get_vocab_size()}>"

    # -- truncation and padding, as Hugging Face tokenizers ---------------

    def enable_truncation(self, max_length, stride=0, strategy="longest_first",
                          direction="right"):
        """Truncates every encoding to max_length tokens (special tokens
        included). strategy: longest_first, only_first or only_second (for
        pairs); direction: right (drop the end) or left."""
        if stride:
            raise ValueError("lipi does not keep overflowing tokens: stride must be 0")
        if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1:
            raise ValueError("max_length must be a positive int")
        self._set_truncation(max_length, direction, strategy)
        self._truncation = {"max_length": max_length, "stride": 0, "strategy": strategy,
                            "direction": direction}

    def no_truncation(self):
        self._set_truncation(0, "right", "longest_first")
        self._truncation = None

    @property
    def truncation(self):
        return getattr(self, "_truncation", None)

    def enable_padding(self, direction="right", pad_id=0, pad_type_id=0, pad_token="[PAD]",
                       length=None, pad_to_multiple_of=None):
        """Pads encodings to `length` tokens, or (length None) to the longest
        of each encode_batch, then up to a multiple of pad_to_multiple_of."""
        if length is not None and (not isinstance(length, int) or length < 1):
            raise ValueError("length must be a positive int or None")
        self._set_padding(True, length or 0, pad_to_multiple_of or 0, direction, pad_id,
                          pad_type_id, pad_token)
        self._padding = {"length": length, "pad_to_multiple_of": pad_to_multiple_of,
                         "pad_id": pad_id, "pad_token": pad_token, "pad_type_id": pad_type_id,
                         "direction": direction}

    def no_padding(self):
        self._set_padding(False, 0, 0, "right", 0, 0, "[PAD]")
        self._padding = None

    @property
    def padding(self):
        return getattr(self, "_padding", None)

    def set_special(self, policy):
        """What special tokens written in a text become, as `lipi encode
        --special`: 'allow' (their ids; the default), 'text' (ordinary text,
        as tiktoken's encode_ordinary) or 'error' (LipiError)."""
        self._set_special(policy)

    # -- the NumPy fast path ----------------------------------------------

    def encode_batch_numpy(self, input, add_special_tokens=False, threads=None, padded=True,
                           special=None):
        """Encodes a list of texts into NumPy arrays, without a Python object
        per token.

        padded=True: (ids, attention_mask), both int64 of shape (n, L), L
        the longest text (or the padding length set by enable_padding),
        ids padded with the pad id (0 without enable_padding).
        padded=False: (ids, row_starts): uint32 ids of all texts one after
        the other, and int64 row_starts (n + 1), text i being
        ids[row_starts[i]:row_starts[i + 1]]."""
        out = self._encode_arrays(input, add_special_tokens, threads, padded, special)
        if padded:
            ids, mask, rows, cols = out
            return (_np.frombuffer(ids, dtype=_np.int64).reshape(rows, cols),
                    _np.frombuffer(mask, dtype=_np.int64).reshape(rows, cols))
        ids, starts = out
        return _np.frombuffer(ids, dtype=_np.uint32), _np.frombuffer(starts, dtype=_np.int64)


# ---------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------

_TRAIN_OPTIONS = {
    "min_frequency", "special_tokens", "unk_token", "max_token_length", "character_coverage",
    "limit_alphabet", "grapheme_guard", "byte_fallback", "units", "normalizer", "pattern",
    "regex", "lowercase", "strip_accents", "fold_digits", "sample", "seed", "threads",
    "invalid", "balance", "lang_files", "alpha", "dev", "parity_threshold",
    "parity_exponent", "parity_mass", "parity_others",
}


def train(files_or_iterator=None, type="bpe", vocab_size=32000, *, from_counts=None,
          **options):
    """Trains a BPE or Unigram tokenizer as `lipi train` does and returns it
    (save it with .save("tokenizer.json") or .save_spm("x.model")).

    files_or_iterator: a list of text files (.gz/.xz/.zst read too), or an
    iterable of str (Hugging Face's train_from_iterator): the strings are
    written to a temporary file, one per line (a string holding newlines
    counts as several lines, exactly as that text in a file would).
    from_counts: a counts file of `lipi count` (or a list of them) instead.

    options are `lipi train`'s, with underscores: min_frequency,
    special_tokens (list), unk_token, max_token_length, character_coverage,
    limit_alphabet, grapheme_guard (default True), byte_fallback (default
    True), units ('char' or 'byte'), normalizer ('indic'), pattern ('indic';
    'unigram' for Unigram), regex, lowercase, strip_accents, fold_digits,
    sample, seed, threads, invalid ('error' or 'replace'), balance ('none',
    'smoothed', 'parity'), lang_files ({lang: path}), alpha, dev,
    parity_threshold, parity_exponent, parity_mass, parity_others.
    The same inputs and options give the bytes `lipi train` writes."""
    unknown = set(options) - _TRAIN_OPTIONS
    if unknown:
        raise TypeError(f"train() got unknown options: {', '.join(sorted(unknown))}")
    options["vocab_size"] = vocab_size
    if "special_tokens" in options and isinstance(options["special_tokens"], str):
        options["special_tokens"] = options["special_tokens"].split(",")
    counts = [] if from_counts is None else (
        [from_counts] if isinstance(from_counts, (str, bytes, _os.PathLike)) else list(from_counts))
    if files_or_iterator is None:
        return _lipi._train(Tokenizer, type, [], counts, options)
    if isinstance(files_or_iterator, (str, bytes, _os.PathLike)):
        return _lipi._train(Tokenizer, type, [files_or_iterator], counts, options)
    if isinstance(files_or_iterator, (list, tuple)) and all(
            isinstance(f, (str, bytes, _os.PathLike)) for f in files_or_iterator) and \
            all(_os.path.exists(f) or f == "-" for f in files_or_iterator):
        return _lipi._train(Tokenizer, type, list(files_or_iterator), counts, options)
    with _tempfile.TemporaryDirectory(prefix="lipi-train-") as tmp:
        path = _os.path.join(tmp, "corpus.txt")
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            for i, text in enumerate(files_or_iterator):
                if not isinstance(text, str):
                    raise TypeError(f"item {i} of the iterator is {text.__class__.__name__}, expected str")
                f.write(text)
                f.write("\n")
        return _lipi._train(Tokenizer, type, [path], counts, options)


# ---------------------------------------------------------------------------
# Inflation report
# ---------------------------------------------------------------------------

def _paths(x):
    if x is None:
        return []
    if isinstance(x, (str, bytes, _os.PathLike)):
        return [x]
    return list(x)


def _inflation(tokenizers, parallel, text, reference, fmt, threads, invalid):
    if (parallel is None) == (text is None):
        raise ValueError("give either parallel= (line-aligned files or their folder) or text=")
    return _lipi._inflation(_paths(tokenizers), _paths(parallel), reference, text, fmt, threads,
                            invalid)


def inflation(tokenizers, parallel=None, reference="eng_Latn", *, text=None, threads=None,
              invalid="error"):
    """Token inflation across languages, as `lipi inflation --format json`:
    one dict per (tokenizer, language) with the JSON report's row fields
    (parity, fertility, characters per token, continued words, ...).
    pandas.DataFrame(lipi.inflation(...)) gives the table.

    tokenizers: paths or bundled names; parallel: line-aligned files, one per
    language, or their folder (FLORES-200 style names such as hin_Deva.dev);
    reference: the language parity is relative to. text=FILE instead of
    parallel measures one mixed file per script."""
    report = _json.loads(_inflation(tokenizers, parallel, text, reference, "json", threads,
                                    invalid))
    return report["rows"]


def inflation_html(tokenizers, parallel=None, reference="eng_Latn", *, text=None, threads=None,
                   invalid="error", path=None):
    """The same report as a self-contained HTML page (table and parity
    chart), returned as str, and written atomically to `path` when given."""
    html = _inflation(tokenizers, parallel, text, reference, "html", threads, invalid)
    if path is not None:
        d = _os.path.dirname(_os.path.abspath(path))
        fd, tmp = _tempfile.mkstemp(dir=d, prefix=_os.path.basename(path) + ".tmp-")
        try:
            with _os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(html)
            _os.replace(tmp, path)
        except BaseException:
            _os.unlink(tmp)
            raise
    return html


# ---------------------------------------------------------------------------
# Embeddings
# ---------------------------------------------------------------------------

class Embedder:
    """An encoder checkpoint (a model folder or a hub name in the Hugging
    Face cache) turning sentences into vectors, as sentence-transformers'
    SentenceTransformer does.

        model = lipi.Embedder("path/to/model", dtype="f32", threads=2)
        vecs = model.encode(["a", "b"], batch_size=32)     # (2, dim) float32

    The vectors of `encode` with the defaults are those `lipi embed` writes,
    bit for bit. Shareable across Python threads."""

    def __init__(self, model, dtype="f32", threads=None, *, max_length=None, prompt=None,
                 prompt_name=None, dimensions=None, pooling=None, revision=None):
        self.model = model
        self._kw = dict(dtype=dtype, threads=threads, max_length=max_length or 0,
                        prompt=prompt, prompt_name=prompt_name, dimensions=dimensions or 0,
                        pooling=pooling, revision=revision)
        # lipi fixes the batch size and normalization when it opens a model
        # (the packed GEMM's shapes follow the batch), so each combination
        # asked for is opened once and kept.
        self._open = {}
        c = self._get(32, -1)
        info = c.info()
        self.dim = info["dim"]
        self.max_seq_length = info["max_length"]
        self.labels = info["labels"]

    def _get(self, batch, normalize):
        key = (batch, normalize)
        c = self._open.get(key)
        if c is None:
            c = _lipi.Embedder(self.model, batch=batch, normalize=normalize, **self._kw)
            c = self._open.setdefault(key, c)
        return c

    def get_sentence_embedding_dimension(self):
        return self.dim

    def encode(self, sentences, batch_size=32, normalize_embeddings=False,
               show_progress_bar=False, convert_to_numpy=True):
        """Embeds sentences (a str or a list of str): a float32 ndarray (n,
        dim), or (dim,) for one str. normalize_embeddings=True L2-normalizes;
        False keeps what the model's own modules do (a Normalize module
        included), as sentence-transformers. Texts longer than the model's
        max length are truncated (the end goes). show_progress_bar prints
        the sentences done on stderr."""
        if not convert_to_numpy:
            raise ValueError("lipi returns NumPy arrays (convert_to_numpy=True)")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError("batch_size must be a positive int")
        one = isinstance(sentences, str)
        texts = [sentences] if one else list(sentences)
        c = self._get(batch_size, 1 if normalize_embeddings else -1)
        if not show_progress_bar:
            buf, dim = c.embed(texts)
            out = _np.frombuffer(buf, dtype=_np.float32).reshape(-1, dim)
            return out[0] if one else out
        # Whole batches per call, so the vectors are those of one call.
        step = batch_size * 8
        parts = []
        for i in range(0, len(texts), step):
            buf, dim = c.embed(texts[i:i + step])
            parts.append(_np.frombuffer(buf, dtype=_np.float32).reshape(-1, dim))
            _sys.stderr.write(f"\rlipi: {min(i + step, len(texts))}/{len(texts)} sentences")
            _sys.stderr.flush()
        _sys.stderr.write("\n")
        out = _np.concatenate(parts) if parts else _np.zeros((0, self.dim), dtype=_np.float32)
        return out[0] if one else out

    def classify(self, texts, batch_size=32):
        """The classifier head's probabilities (n, labels) as float32; the
        label names are self.labels. ValueError for a model without a head."""
        one = isinstance(texts, str)
        buf, k = self._get(batch_size, -1).classify([texts] if one else texts)
        out = _np.frombuffer(buf, dtype=_np.float32).reshape(-1, k)
        return out[0] if one else out

    def similarity(self, a, b):
        """Cosine similarity of every row of a with every row of b (texts
        or vectors): float32 (len(a), len(b)), as sentence-transformers'
        similarity."""
        va = self._vectors(a)
        vb = self._vectors(b)
        na = va / _np.maximum(_np.linalg.norm(va, axis=1, keepdims=True), 1e-12)
        nb = vb / _np.maximum(_np.linalg.norm(vb, axis=1, keepdims=True), 1e-12)
        return (na @ nb.T).astype(_np.float32)

    def _vectors(self, x):
        if isinstance(x, str):
            x = [x]
        if isinstance(x, _np.ndarray):
            return _np.atleast_2d(x.astype(_np.float32, copy=False))
        return self.encode(list(x))


class Index:
    """A lipi vector index (the folder `lipi index` writes): exact search
    over memory-mapped float32 vectors, or FAISS when it was built with
    faiss=SPEC.

        lipi.Index.build("idx/", vecs, texts=docs, embedder=model)
        idx = lipi.Index.load("idx/")
        ids, scores = idx.search(model.encode(["query"]), k=5)
    """

    def __init__(self, path, faiss_params=None, skip_faiss=False):
        self._c = _lipi.Index(path, faiss_params, skip_faiss)
        info = self._c.info()
        self.path = path
        self.dim = info["dim"]
        self.count = info["count"]
        self.has_faiss = info["has_faiss"]
        self.quantization = info["quantization"]
        self.binary_threshold = info["binary_threshold"]

    @classmethod
    def load(cls, path, faiss_params=None, skip_faiss=False):
        return cls(path, faiss_params, skip_faiss)

    @staticmethod
    def build(path, vectors, texts=None, embedder=None, faiss=None, quantize=None,
              threads=None, binary_threshold=None):
        """Writes the index folder `path` atomically (a new folder swapped in
        by one rename): vectors (n, dim) (L2-normalized on the way in), the
        documents' texts when given, and the model's identity when embedder
        is given (searching with another model is then an error). faiss: an
        index_factory string; quantize: 'int8' or 'binary'; binary_threshold
        (binary only): 'mean' (default; bit = value > the mean of its
        dimension over the rows) or 'zero' (sentence-transformers' ubinary
        codes), as `lipi index --binary-threshold`. Returns the loaded
        Index."""
        v = _np.ascontiguousarray(vectors, dtype=_np.float32)
        if v.ndim != 2:
            raise ValueError("vectors must be a 2-D array (n, dim)")
        emb = None
        if embedder is not None:
            emb = embedder._get(32, -1) if isinstance(embedder, Embedder) else embedder
        _lipi._index_build(_os.fspath(path), v, v.shape[1], None if texts is None else list(texts),
                           emb, faiss, quantize, threads, binary_threshold)
        return Index(path)

    def __len__(self):
        return self.count

    def search(self, queries, k=10, exact=False, threads=None, normalize=True,
               rescore_multiplier=None, no_rescore=False, int8_query=None, binary_query=None):
        """The k best documents for each query vector: (ids int64 (nq, k),
        scores float32 (nq, k)), best first, ties by lower id; -1 and -inf
        past the last document. Queries are L2-normalized first (as `lipi
        search` does) unless normalize=False. Quantized indexes, as `lipi
        search`: rescore_multiplier M rescores the best M * k by their
        float32 vectors (default 4); no_rescore=True returns the quantized
        ranking and scores; int8_query 'weights' (default) or 'codes' and
        binary_query 'weights' (default) or 'bits' choose how the query is
        scored against the codes."""
        q = _np.array(_np.atleast_2d(queries), dtype=_np.float32, order="C")  # a copy
        if q.ndim != 2 or q.shape[1] != self.dim:
            raise ValueError(f"queries must be (n, {self.dim}) vectors, not {q.shape}")
        docs, scores = self._c.search(q, k, exact, threads, normalize, rescore_multiplier or 0,
                                      no_rescore, int8_query, binary_query)
        nq = q.shape[0]
        return (_np.frombuffer(docs, dtype=_np.int64).reshape(nq, k),
                _np.frombuffer(scores, dtype=_np.float32).reshape(nq, k))

    def text(self, doc):
        """Document doc's text (0-based)."""
        return self._c.text(doc)
