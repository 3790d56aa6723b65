"""`pip install ./python --no-build-isolation` works offline from the
checkout, and the installed package finds its bundled tokenizers from any
folder without the checkout's help."""
import os
import subprocess
import sys

from conftest import LIPI_BIN, ROOT


def test_pip_installs_the_package_offline(tmp_path):
    target = tmp_path / "site"
    env = dict(os.environ, LIPI_BUILD=os.path.dirname(LIPI_BIN))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation",
                        "--no-index", "--no-deps", "--target", str(target), "./python"],
                       cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert r.returncode == 0, r.stdout.decode()
    assert (target / "lipi" / "data" / "vocab" / "tiktoken" / "cl100k_base.tiktoken").exists()
    env = {k: v for k, v in os.environ.items() if k not in ("LIPI_DATA", "PYTHONPATH")}
    env["PYTHONPATH"] = str(target)
    r = subprocess.run([sys.executable, "-c",
                        "import lipi; print(lipi.__file__); "
                        "print(lipi.Tokenizer.from_file('cl100k_base').encode('hello world').ids)"],
                       cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = r.stdout.decode()
    assert r.returncode == 0, out
    assert out.splitlines() == [str(target / "lipi" / "__init__.py"), "[15339, 1917]"]
