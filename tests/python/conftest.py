"""Shared helpers of the Python package's tests (tests/python.sh runs them
from the repository root with PYTHONPATH=$BUILD/python and LIPI_BIN set)."""
import json
import os
import shutil
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LIPI_BIN = os.path.abspath(os.environ.get("LIPI_BIN", os.path.join(ROOT, "build", "lipi")))
SHARED = os.path.join(ROOT, "..", "shared", "data")


def ref_path(rel):
    """tests/fixtures/shared/REL or data/REL if committed, else
    ../shared/data/REL if there, else None (tests/refdata.h's ref_path)."""
    for base in (os.path.join(ROOT, "tests", "fixtures", "shared"), os.path.join(ROOT, "data"),
                 SHARED):
        p = os.path.join(base, rel)
        if os.path.exists(p):
            return p
    return None


def lipi(*args, input=None):
    """Runs the lipi command built with the package; its stdout (bytes)."""
    r = subprocess.run([LIPI_BIN, *args], input=input, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, cwd=ROOT)
    assert r.returncode == 0, f"lipi {' '.join(args)}: {r.stderr.decode()}"
    return r.stdout


# The word-level tokenizer tests/model_dir.c gives every fixture model:
# token "tN" is id N, so "t4 t17" is [4, 17].
WORD_TOKENIZER = {
    "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
    "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None,
    "decoder": None,
    "model": {"type": "WordLevel", "unk_token": "t1", "vocab": {f"t{i}": i for i in range(100)}},
}


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    """model_dir(fixture) -> a folder made from tests/fixtures/models/FIXTURE
    plus the word-level tokenizer, as tests/model_dir.c makes it."""
    root = tmp_path_factory.mktemp("models")

    def make(fixture):
        dst = root / fixture
        if not dst.exists():
            shutil.copytree(os.path.join(ROOT, "tests", "fixtures", "models", fixture), dst)
            with open(dst / "tokenizer.json", "w") as f:
                json.dump(WORD_TOKENIZER, f)
        return str(dst)

    return make
