# Shared pieces of the benchmark scripts (sourced, not run).
#   bench_corpus        -> path of the ~30 MB mixed corpus (decompressed once)
#   bench_encode_text   -> path of the 20 MB text of the encoding benchmarks
#   bench_anchors       -> installs the anchor tools if missing (npm into $ANCHORS)
#   bench_time NAME CMD -> runs CMD once, appends "NAME wall user sys rss_kb" to $TIMES
#   bench_libs          -> the libraries to link after liblipi.a (the Makefile's own list)
#   bench_encode_bin B  -> compiles bench/encode.c into B/bench_encode
#   bench_steal         -> share of the machine's CPU time its host took
#                          (steal) since the script began, e.g. "3.1%"
set -eu
BENCH_TMP=${BENCH_TMP:-/tmp/lipi-bench}
ANCHORS=${ANCHORS:-$BENCH_TMP/anchors}
SHARED=${SHARED:-../shared/data}
RUNS=${RUNS:-3}
mkdir -p "$BENCH_TMP"
TIMES=$BENCH_TMP/times.$$
: > "$TIMES"
# On a virtual machine the host can take CPU time from it ("steal" in
# /proc/stat); wall-clock ratios taken while it does say little about lipi.
BENCH_STEAL0=$(head -1 /proc/stat 2>/dev/null || true)
bench_steal() {
  printf '%s\n%s\n' "$BENCH_STEAL0" "$(head -1 /proc/stat 2>/dev/null || true)" | awk '
    NR == 1 { for (i = 2; i <= NF; i++) a[i] = $i }
    NR == 2 { for (i = 2; i <= NF; i++) { d = $i - a[i]; t += d; if (i == 9) s = d } }
    END { if (t > 0) printf "%.1f%%", 100 * s / t; else printf "unknown" }'
}

bench_corpus() {
  c=$BENCH_TMP/corpus.txt
  if [ ! -s "$c" ]; then
    [ -d "$SHARED/mono" ] || { echo "bench: $SHARED/mono is missing" >&2; exit 1; }
    xz -dc "$SHARED"/mono/*.txt.xz > "$c.tmp" && mv "$c.tmp" "$c"
  fi
  echo "$c"
}

# The 20 MB mixed-script text of the encoding benchmarks (see encode.sh):
# made once, its path printed.
bench_encode_text() {
  t=$BENCH_TMP/encode20.txt
  if [ ! -s "$t" ]; then
    cat $(ls "$SHARED"/parallel/flores200/devtest/*.txt | LC_ALL=C sort) \
        $(ls "$SHARED"/parallel/ntrex128/*.txt | LC_ALL=C sort) |
      head -c 20000000 | sed '$d' > "$t.$$" && mv "$t.$$" "$t"
  fi
  echo "$t"
}

bench_anchors() {
  [ -x /usr/bin/time ] || apt-get install -y -qq time >/dev/null
  command -v spm_train >/dev/null || apt-get install -y -qq sentencepiece >/dev/null
  if [ ! -d "$ANCHORS/node_modules/tokenizers" ] || [ ! -d "$ANCHORS/node_modules/tiktoken" ]; then
    mkdir -p "$ANCHORS"
    (cd "$ANCHORS" && npm install --silent --no-audit --no-fund tokenizers@0.23.2 tiktoken@1.0.22 >/dev/null)
  fi
}

bench_time() {
  name=$1; shift
  /usr/bin/time -f "$name %e %U %S %M" -a -o "$TIMES" "$@" >/dev/null 2>"$BENCH_TMP/last.err" || {
    echo "bench: '$name' failed:" >&2; tail -5 "$BENCH_TMP/last.err" >&2; exit 1; }
}

# Prints a markdown table: name, median wall, CPU (user+sys), peak RSS, and
# the ratio of each row's wall time to $1's (the lipi row to compare with).
bench_table() {
  base=$1
  awk -v base="$base" '
    { wall[$1] = wall[$1] " " $2; cpu[$1] = cpu[$1] " " ($3 + $4); rss[$1] = rss[$1] " " $5
      if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
    function median(s,   a, k, i, j, t) {
      k = split(s, a, " ")
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
      return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }
    function range(s,   a, k, i, lo, hi) {
      k = split(s, a, " "); lo = hi = a[1]
      for (i = 2; i <= k; i++) { if (a[i] + 0 < lo + 0) lo = a[i]; if (a[i] + 0 > hi + 0) hi = a[i] }
      return sprintf("%.2f-%.2f", lo, hi)
    }
    END {
      bw = median(wall[base])
      printf "| tool | wall s (median) | wall range | CPU s | peak RSS MB | wall ÷ %s |\n", base
      printf "|---|---|---|---|---|---|\n"
      for (i = 1; i <= n; i++) {
        r = order[i]; w = median(wall[r])
        printf "| %s | %.2f | %s | %.2f | %.0f | %.2f |\n", r, w, range(wall[r]), median(cpu[r]), median(rss[r]) / 1024, w / bw
      }
    }' "$TIMES"
}

# bench_ratios BASE OTHER: OTHER's wall time over BASE's, run by run (runs are
# interleaved, so each pair saw the same machine load).
bench_ratios() {
  awk -v base="$1" -v other="$2" '
    $1 == base { b[++nb] = $2 } $1 == other { o[++no] = $2 }
    END { s = ""; for (i = 1; i <= nb && i <= no; i++) s = s sprintf(" %.2f", o[i] / b[i])
          printf "%s wall / %s wall, run by run:%s\n", other, base, s }' "$TIMES"
}

bench_libs() {
  make -s --no-print-directory print-libs
}

# bench_encode_bin BUILD: compiles bench/encode.c into BUILD/bench_encode.
bench_encode_bin() {
  ${CC:-cc} -O2 -g -std=c11 -D_GNU_SOURCE -I. -o "$1/bench_encode" bench/encode.c "$1/liblipi.a" $(bench_libs)
}
