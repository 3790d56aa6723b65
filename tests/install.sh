#!/bin/sh
# `make install` as a user gets it: installs into a temporary DESTDIR with
# PREFIX=/usr, then from another folder
#   - runs the installed `lipi inflation -t cl100k_base` (with LIPI_DATA at the
#     installed share folder, and without it: the program finds its data);
#   - compiles a C program with `cc $(pkg-config --cflags --libs lipi)` that
#     includes <lipi/encoder.h>, links the installed liblipi.so and encodes a
#     FLORES line with o200k_base; its ids must be tiktoken's (the reference
#     fixture tests/fixtures/readers/tiktoken_o200k_base.tsv.xz);
#   - compiles every installed header on its own;
#   - checks the shared library's SONAME and that it exports exactly the
#     functions the headers declare, all lipi_*;
#   - renders every man page with `man -l`;
#   - `make uninstall` leaves no file behind.
#
#   LIPI_BIN=build/lipi sh tests/install.sh   (BUILD is LIPI_BIN's folder;
#   LIPI_SAN_FLAGS: the sanitizer flags of that build, for the C program)
set -u
ROOT=$(pwd)
LIPI=${LIPI_BIN:-build/lipi}
BUILD=$(dirname "$LIPI")
SAN=${LIPI_SAN_FLAGS:-}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lipi-install.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
D=$WORK/dest
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "install: ok: $1"; }
bad() { fail=$((fail + 1)); echo "install: FAILED: $1" >&2; }
finish() {
    echo "install: $pass passed, $fail failed"
    [ "$fail" = 0 ]
    exit
}

# The sub-make gets its own jobs: this script runs outside the caller's jobserver.
if env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory -j2 BUILD="$BUILD" \
       install DESTDIR="$D" PREFIX=/usr >"$WORK/make.log" 2>&1; then
    ok "make install DESTDIR=... PREFIX=/usr"
else
    bad "make install failed:"; cat "$WORK/make.log" >&2
    finish
fi
for f in bin/lipi lib/liblipi.a lib/liblipi.so lib/pkgconfig/lipi.pc include/lipi/encoder.h \
         share/man/man1/lipi.1 share/man/man1/lipi-train.1 share/lipi/vocab/tiktoken/cl100k_base.tiktoken \
         share/lipi/vocab/tiktoken/o200k_base.tiktoken \
         share/lipi/vocab/bert-base-multilingual-cased/vocab.txt share/lipi/flores200/hin_Deva.txt \
         share/lipi/vocab/lipi-indic-64k/tokenizer.json share/lipi/vocab/lipi-indic-64k/README.md; do
    [ -e "$D/usr/$f" ] || bad "not installed: /usr/$f"
done
if ls "$D/usr/include/lipi" | grep -q impl; then bad "an *_impl.h was installed"; fi

# --- The installed command, from another folder ----------------------------
mkdir -p "$WORK/elsewhere"
cd "$WORK/elsewhere" || exit 1
if LIPI_DATA="$D/usr/share/lipi" "$D/usr/bin/lipi" inflation -t cl100k_base -t bert-base-multilingual-cased \
       -t lipi-indic-64k --parallel "$D/usr/share/lipi/flores200" >"$WORK/inflation.txt" 2>"$WORK/err" &&
   grep -q "hin_Deva" "$WORK/inflation.txt" && grep -q "cl100k_base" "$WORK/inflation.txt" &&
   grep -q "lipi-indic-64k" "$WORK/inflation.txt"; then
    ok "installed lipi inflation -t cl100k_base -t lipi-indic-64k with LIPI_DATA, from another folder"
else
    bad "installed lipi inflation with LIPI_DATA:"; cat "$WORK/err" >&2
fi
# Without LIPI_DATA the program looks beside itself (PREFIX/share/lipi).
if env -u LIPI_DATA "$D/usr/bin/lipi" inflation -t cl100k_base -t bert-base-multilingual-cased \
       -t lipi-indic-64k --parallel "$D/usr/share/lipi/flores200" >"$WORK/inflation2.txt" 2>"$WORK/err" &&
   cmp -s "$WORK/inflation.txt" "$WORK/inflation2.txt"; then
    ok "installed lipi finds share/lipi beside itself"
else
    bad "installed lipi without LIPI_DATA:"; cat "$WORK/err" >&2
fi
# A name found nowhere: the message names every folder looked in.
if LIPI_DATA=/nonexistent "$D/usr/bin/lipi" encode -t r50k_xx </dev/null 2>"$WORK/err"; then
    bad "an unknown name was accepted"
elif grep -q "/nonexistent" "$WORK/err" && grep -q "$D/usr/share/lipi" "$WORK/err"; then
    ok "a missing name lists the folders searched"
else
    bad "missing-name message:"; cat "$WORK/err" >&2
fi

# --- A C program against the installed library ----------------------------
cat >"$WORK/elsewhere/prog.c" <<'EOF'
#include <lipi/encoder.h>
#include <stdio.h>
#include <string.h>

/* argv[1]: a line of text; prints its o200k_base ids, space-separated. */
int main(int argc, char **argv)
{
    lipi_tokenizer *tok = NULL;
    lipi_encoder *enc = NULL;
    lipi_session *s = NULL;
    lipi_error err = {0};
    uint32_t ids[4096];
    lipi_encoding out = {.ids = ids, .cap = 4096};
    int rc = 1;
    if (argc != 2)
        return 2;
    if (lipi_tokenizer_open("o200k_base", NULL, &tok, &err) != LIPI_OK ||
        lipi_encoder_new(tok, &enc, &err) != LIPI_OK || lipi_session_new(enc, &s) != LIPI_OK ||
        lipi_encode(s, argv[1], strlen(argv[1]), NULL, &out, &err) != LIPI_OK) {
        fprintf(stderr, "prog: %s: %s\n", err.path, err.msg);
        goto done;
    }
    for (size_t i = 0; i < out.len; i++)
        printf(i ? " %u" : "%u", (unsigned)ids[i]);
    printf("\n");
    rc = 0;
done:
    lipi_session_free(s);
    lipi_encoder_free(enc);
    lipi_tokenizer_free(tok);
    return rc;
}
EOF
export PKG_CONFIG_PATH="$D/usr/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$D"
flags=$(pkg-config --cflags --libs lipi 2>"$WORK/err")
if [ -z "$flags" ]; then
    bad "pkg-config --cflags --libs lipi:"; cat "$WORK/err" >&2
elif ! cc $SAN -o prog prog.c $flags 2>"$WORK/err"; then
    bad "cc \$(pkg-config --cflags --libs lipi) prog.c:"; cat "$WORK/err" >&2
else
    line=$(sed -n 1p "$ROOT/data/flores200/hin_Deva.txt")
    want=$(xz -dc "$ROOT/tests/fixtures/readers/tiktoken_o200k_base.tsv.xz" |
           awk -F'\t' '$1 ~ /hin_Deva.txt$/ && $2 == 1 { print $3; exit }')
    got=$(LD_LIBRARY_PATH="$D/usr/lib" LIPI_DATA="$D/usr/share/lipi" ./prog "$line" 2>"$WORK/err")
    if [ -n "$want" ] && [ "$got" = "$want" ]; then
        ok "a C program built with pkg-config encodes with o200k_base to tiktoken's ids"
    else
        bad "C program ids differ from tiktoken's: got '$got', want '$want'"; cat "$WORK/err" >&2
    fi
    if LD_LIBRARY_PATH="$D/usr/lib" ldd ./prog | grep -q "liblipi.so.0 => $D/usr/lib/liblipi.so.0"; then
        ok "the program links the installed liblipi.so.0"
    else
        bad "the program does not link the installed liblipi.so.0:"; LD_LIBRARY_PATH="$D/usr/lib" ldd ./prog >&2
    fi
    # liblipi.a with the libraries the .pc file names for it (Requires.private,
    # Libs.private; linked dynamically, as Debian ships them).
    private=$(sed -n 's/^Libs.private: //p' "$D/usr/lib/pkgconfig/lipi.pc")
    if cc $SAN -o prog_static prog.c $(pkg-config --cflags lipi) "$D/usr/lib/liblipi.a" \
          $(pkg-config --libs $(pkg-config --print-requires-private lipi)) $private 2>"$WORK/err" &&
       [ "$(LIPI_DATA="$D/usr/share/lipi" ./prog_static "$line")" = "$want" ]; then
        ok "linking liblipi.a with the .pc file's private libraries gives the same ids"
    else
        bad "linking liblipi.a with the .pc file's private libraries:"; cat "$WORK/err" >&2
    fi
fi

# --- Every installed header compiles on its own -----------------------------
for h in "$D"/usr/include/lipi/*.h; do
    printf '#include <lipi/%s>\n' "$(basename "$h")" >"$WORK/h.c"
    if cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$D/usr/include" "$WORK/h.c" 2>"$WORK/err"; then
        ok "<lipi/$(basename "$h")> compiles on its own"
    else
        bad "<lipi/$(basename "$h")> does not compile on its own:"; cat "$WORK/err" >&2
    fi
done

# --- The shared library: SONAME and exported symbols ------------------------
so=$(readlink -f "$D/usr/lib/liblipi.so")
if readelf -d "$so" | grep -q 'SONAME.*\[liblipi\.so\.0\]'; then ok "SONAME liblipi.so.0"; else bad "no SONAME liblipi.so.0"; fi
nm -D --defined-only "$so" | awk '$2 ~ /^[A-Za-z]$/ && $3 !~ /^LIPI_/ { print $3 }' | sed 's/@.*//' | sort -u >"$WORK/exported"
CPPFLAGS="-I$D/usr/include" sh "$ROOT/packaging/exports.sh" --names cc "$D"/usr/include/lipi/*.h \
    >"$WORK/declared"
if grep -v '^lipi_' "$WORK/exported" >"$WORK/foreign"; then
    bad "liblipi.so exports symbols without the lipi_ prefix: $(head -5 "$WORK/foreign" | tr '\n' ' ')"
else
    ok "liblipi.so exports only lipi_* symbols ($(wc -l <"$WORK/exported") of them)"
fi
if cmp -s "$WORK/exported" "$WORK/declared"; then
    ok "liblipi.so exports exactly the functions the installed headers declare"
else
    bad "exports and headers differ: $(diff "$WORK/declared" "$WORK/exported" | grep '^[<>]' | head -5 | tr '\n' ' ')"
fi

# --- Man pages -------------------------------------------------------------
n=0
for page in "$D"/usr/share/man/man1/*.1; do
    name=$(basename "$page" .1)
    if LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$page" >"$WORK/page" 2>"$WORK/err" && [ ! -s "$WORK/err" ] &&
       grep -q "^NAME" "$WORK/page" && grep -q "$name" "$WORK/page" && grep -q "OPTIONS\|Commands" "$WORK/page"; then
        n=$((n + 1))
    else
        bad "man -l $name.1 does not render:"; cat "$WORK/err" >&2
    fi
done
commands=$("$ROOT/$LIPI" --help | sed -n '/^Commands:/,/^$/p' | grep -c '^  [a-z]')
if [ "$n" -gt 0 ] && [ "$n" = $((commands + 1)) ]; then
    ok "man -l renders all $n pages (lipi.1 and one per command)"
else
    bad "$n man pages rendered, expected $((commands + 1))"
fi

# --- Uninstall --------------------------------------------------------------
cd "$ROOT" || exit 1
if env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory BUILD="$BUILD" \
       uninstall DESTDIR="$D" PREFIX=/usr >"$WORK/make.log" 2>&1 &&
   [ -z "$(find "$D" -type f -o -type l)" ]; then
    ok "make uninstall removes every installed file"
else
    bad "make uninstall left: $(find "$D" -type f -o -type l | head -5 | tr '\n' ' ')"; cat "$WORK/make.log" >&2
fi
finish
