#!/bin/sh
# lipi serve under load: wrk (Debian's) posting single-sentence requests to
# /v1/embeddings on loopback, against `lipi embed`'s offline throughput on
# the same sentences, both with 2 model threads.
#
#   sh bench/serve.sh [BUILD]
#
# Model: MiniLM-L6-H384 shape with random weights and multilingual BERT's
# vocabulary (bench/embed_anchor.py, cached in $BENCH_TMP/embed/minilm, as
# bench/embed.sh makes it) and mBERT's vocab.txt as its tokenizer.
# Sentences: $SERVE_LINES lines of each of $LANGS from FLORES-200 devtest
# ($SHARED/parallel/flores200/devtest). Offline: `lipi embed --threads 2`
# on all of them, median of $RUNS. Server: `lipi serve --threads 2`, then
# wrk -t2 for $SERVE_SECONDS s at each of $CONNS connections (after a warm
# up): requests/s, p50 and p99 latency, non-2xx responses, and the ratio of
# requests/s (= sentences/s) to offline sentences/s. Then $SERVE_RSS_REQUESTS
# requests at 32 connections with the server's RSS before and after.
#
# The machine has 2 cores: wrk's two threads and the server's HTTP threads
# compete with the model's 2 threads, and other jobs may run too, so the
# figures are noisy and lower than on a machine with spare cores.
set -eu
BUILD=${1:-build}
. bench/common.sh
SERVE_LINES=${SERVE_LINES:-64}
SERVE_SECONDS=${SERVE_SECONDS:-10}
CONNS=${CONNS:-1 8 32 128}
SERVE_RSS_REQUESTS=${SERVE_RSS_REQUESTS:-200000}
LANGS=${LANGS:-eng_Latn hin_Deva ben_Beng tam_Taml tel_Telu arb_Arab rus_Cyrl zho_Hans}
PY=/usr/bin/python3
D=$BENCH_TMP/serve
M=$BENCH_TMP/embed/minilm
mkdir -p "$D"

FLORES=$SHARED/parallel/flores200/devtest
[ -d "$FLORES" ] || { echo "bench/serve.sh: $FLORES is missing; skipped"; exit 0; }
command -v wrk >/dev/null || apt-get install -y -qq wrk >/dev/null
"$PY" -c 'import torch' 2>/dev/null || apt-get install -y -qq python3-torch >/dev/null
make --no-print-directory BUILD="$BUILD" "$BUILD/lipi" >/dev/null
"$PY" bench/embed_anchor.py make "$M" minilm
[ -f "$M/vocab.txt" ] || cp data/vocab/bert-base-multilingual-cased/vocab.txt "$M/vocab.txt"

S=$D/sentences.txt
: > "$S"
for l in $LANGS; do head -n "$SERVE_LINES" "$FLORES/$l.txt" >> "$S"; done
N=$(wc -l < "$S")

# Offline: sentences per second of `lipi embed`, median of RUNS. Loading
# the model (its 119,547 x 384 embedding table) is not embedding: each run
# is timed on all sentences and on the first one alone, and the rate is
# (N - 1) / (difference).
head -n 1 "$S" > "$D/one.txt"
"$BUILD/lipi" embed -m "$M" --threads 2 -o "$D/warm.npy" "$S" 2>/dev/null
now() { date +%s.%N; }
rates=""
i=0
while [ $i -lt "$RUNS" ]; do
  t0=$(now); "$BUILD/lipi" embed -m "$M" --threads 2 -o "$D/one.npy" "$D/one.txt" 2>/dev/null
  t1=$(now); "$BUILD/lipi" embed -m "$M" --threads 2 -o "$D/offline.npy" "$S" 2>/dev/null
  t2=$(now)
  rates="$rates $(echo "$N $t0 $t1 $t2" | awk '{ printf "%.1f", ($1 - 1) / (($4 - $3) - ($3 - $2)) }')"
  i=$((i + 1))
done
OFFLINE=$(echo $rates | tr ' ' '\n' | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')

"$BUILD/lipi" serve -m "$M" --threads 2 --port 0 --max-concurrent 4096 --quiet 2>"$D/serve.log" &
SPID=$!
trap 'kill $SPID 2>/dev/null || true' EXIT
i=0
until grep -q listening "$D/serve.log" 2>/dev/null; do
  i=$((i + 1)); [ $i -lt 300 ] || { echo "lipi serve did not start" >&2; exit 1; }
  sleep 0.1
done
PORT=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\)\/.*/\1/p' "$D/serve.log")
URL=http://127.0.0.1:$PORT/v1/embeddings
export SERVE_SENTENCES=$S
rss() { awk '/^VmRSS/ { print $2 }' /proc/$SPID/status; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "lipi serve: $N FLORES-200 devtest sentences ($SERVE_LINES each of $LANGS), MiniLM-L6 shape f32, 2 model threads, $(nproc) cores, $(cc --version | head -1)"
echo "offline lipi embed --threads 2: $OFFLINE sentences/s (model load subtracted; median of $RUNS:$rates)"
wrk -t2 -c8 -d3s -s bench/serve.lua "$URL" >/dev/null # warm up
echo
echo "| connections | requests/s | p50 ms | p99 ms | non-2xx | × offline |"
echo "|---|---|---|---|---|---|"
for c in $CONNS; do
  t=2; [ "$c" -lt 2 ] && t=1
  wrk -t$t -c"$c" -d"${SERVE_SECONDS}s" --latency --timeout 10s -s bench/serve.lua "$URL" > "$D/wrk_$c.txt"
  awk -v c="$c" -v off="$OFFLINE" '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    $1 == "50%" { p50 = ms($2) } $1 == "99%" { p99 = ms($2) }
    /^Requests\/sec/ { rps = $2 } /Non-2xx/ { bad = $NF } /Socket errors/ { bad = bad " (" $0 ")" }
    END { printf "| %d | %.1f | %.2f | %.2f | %s | %.2f |\n", c, rps, p50, p99, bad ? bad : 0, rps / off }' "$D/wrk_$c.txt"
done

# RSS over many requests: wrk stops after about SERVE_RSS_REQUESTS at the
# rate just measured at 32 connections.
rate=$(awk '/^Requests\/sec/ { print $2 }' "$D/wrk_32.txt")
secs=$(echo "$SERVE_RSS_REQUESTS $rate" | awk '{ s = int($1 / $2) + 1; print s < 5 ? 5 : s }')
r0=$(rss)
wrk -t2 -c32 -d"${secs}s" --timeout 10s -s bench/serve.lua "$URL" > "$D/wrk_rss.txt"
r1=$(rss)
n=$(awk '/requests in/ { print $1 }' "$D/wrk_rss.txt")
bad=$(awk '/Non-2xx/ { print $NF }' "$D/wrk_rss.txt")
echo
echo "RSS over $n requests at 32 connections: $((r0 / 1024)) MB -> $((r1 / 1024)) MB ($(echo "$r0 $r1" | awk '{ printf "%+.1f%%", 100 * ($2 - $1) / $1 }')), non-2xx: ${bad:-0}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
kill -TERM $SPID
wait $SPID && echo "SIGTERM: exit 0" || echo "SIGTERM: exit $?"
trap - EXIT
