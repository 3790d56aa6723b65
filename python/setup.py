"""Builds the lipi Python package from the checkout, offline:

    pip install ./python --no-build-isolation     (Debian: python3-setuptools)

The C library is built by the project's Makefile (`make all` in the
folder above, or in $LIPI_BUILD: build/liblipi.a, position-independent) and linked into the
extension statically, so the installed package needs no liblipi.so; the
bundled tokenizers (data/vocab) are copied into the package's data/."""
import os
import shlex
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("LIPI_BUILD", os.path.join(ROOT, "build"))
os.makedirs(os.path.join(BUILD, "python-setuptools"), exist_ok=True)


def make(*args):
    out = subprocess.run(["make", "--no-print-directory", "-C", ROOT, "BUILD=" + BUILD, *args],
                         check=True, stdout=subprocess.PIPE, text=True)
    return out.stdout


class BuildExt(build_ext):
    def run(self):
        make("all")
        libs = shlex.split(make("print-libs").strip().splitlines()[-1])
        for ext in self.extensions:
            ext.extra_objects = [os.path.join(BUILD, "liblipi.a")]
            ext.extra_link_args = libs
        super().run()


class BuildPy(build_py):
    def run(self):
        super().run()
        src = os.path.join(ROOT, "data")
        dst = os.path.join(self.build_lib, "lipi", "data")
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.js", "*.py", "flores200"))


setup(
    name="lipi",
    version=open(os.path.join(ROOT, "Makefile")).read().split("VERSION  := ")[1].split()[0],
    description="Subword tokenizers, trainers, token-inflation reports and sentence "
                "embeddings, Indic scripts first (Python binding of lipi's C library)",
    packages=["lipi"],
    package_data={"lipi": ["*.pyi", "py.typed"]},
    ext_modules=[Extension("lipi._lipi", ["lipi/_lipi.c"], include_dirs=[ROOT],
                           define_macros=[("_GNU_SOURCE", None)] + (
                               [("LIPI_HAVE_FAISS", None)] if os.path.exists("/usr/include/faiss/Index.h") else []),
                           extra_compile_args=["-std=c11", "-fvisibility=hidden"])],
    cmdclass={"build_ext": BuildExt, "build_py": BuildPy},
    # setuptools' scratch goes beside the C build, not into the checkout
    options={"build": {"build_base": os.path.join(BUILD, "python-setuptools")},
             "egg_info": {"egg_base": os.path.join(BUILD, "python-setuptools")}},
    install_requires=["numpy"],
    python_requires=">=3.9",
)
