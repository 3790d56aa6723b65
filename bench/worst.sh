#!/bin/sh
# Worst-case inputs (issue 20, item 5): one huge line per run, through
# `lipi encode` (ids to /dev/null) for every tokenizer type, and through
# `lipi count` / `lipi train --type bpe`. Goal: each row under 5 s and
# 500 MB peak RSS, linear in the input (part of `make bench`).
#
#   sh bench/worst.sh [BUILD]     WORST_MB=100 (size of each input, 10^6 bytes)
#                                 WORST_TIMEOUT=120 (seconds per run)
#                                 WORST_TOKS="cl100k o200k gpt2 mbert laser spmbpe"
#
# Inputs, made once in $BENCH_TMP/worst (one line each, no final newline):
#   word    the 20 MB encoding text (bench_encode_text) without spaces,
#           newlines or ASCII punctuation, repeated to WORST_MB
#   aaa     'a' repeated
#   deva    'क' (U+0915, 3 bytes) repeated
#   random  random bytes (/dev/urandom): lipi rejects invalid UTF-8 at a
#           byte offset, so this row times how fast the error comes (exit 1)
#   randcp  random valid UTF-8: code points uniform in U+0020..U+10FFFF
#           without surrogates
#   an      "an" repeated (not in the default WORST_INPUTS): SentencePiece
#           BPE's merges join a and n both ways, so BPE finds no cut in it
# Tokenizers: cl100k_base and o200k_base (tiktoken files), GPT-2
# tokenizer.json (byte-level BPE), mBERT vocab.txt (WordPiece), laser_100k.model
# (SentencePiece Unigram), a SentencePiece BPE .model (spm_train bpe 8000 on
# every 10th line of the encoding text, as bench/encode.sh).
# Each run: /usr/bin/time -f '%e %U %S %M' under `timeout $WORST_TIMEOUT`; a run
# killed by the timeout prints "over N s".
set -eu
BUILD=${1:-build}
. bench/common.sh
MB=${WORST_MB:-100}
TO=${WORST_TIMEOUT:-120}
TOKS=${WORST_TOKS:-cl100k o200k gpt2 mbert laser spmbpe}
INPUTS=${WORST_INPUTS:-word aaa deva random randcp}
LIPI=$BUILD/lipi
[ -x "$LIPI" ] || { echo "bench/worst.sh: build $LIPI first (make)" >&2; exit 1; }
if [ ! -d "$SHARED/parallel/flores200/devtest" ] || [ ! -d "$SHARED/vocab/tiktoken" ]; then
  echo "bench/worst.sh: $SHARED not found; skipped"
  exit 0
fi
[ -x /usr/bin/time ] || apt-get install -y -qq time >/dev/null
D=$BENCH_TMP/worst
mkdir -p "$D"
N=$((MB * 1000000))

# make_input NAME: writes $D/NAME.$MB once.
make_input() {
  f=$D/$1.$MB
  [ -s "$f" ] && return 0
  case $1 in
  word)
    LC_ALL=C tr -d ' \n\r\t[:punct:]' < "$(bench_encode_text)" > "$D/word.base"
    /usr/bin/python3 - "$D/word.base" "$N" "$f.$$" <<'PY'
import sys
b = open(sys.argv[1], 'rb').read(); n = int(sys.argv[2])
s = (b * (n // len(b) + 1))[:n]
while s and (s[-1] & 0xC0) == 0x80: s = s[:-1]   # cut at a character start
if s and s[-1] >= 0xC0: s = s[:-1]
open(sys.argv[3], 'wb').write(s)
PY
    rm -f "$D/word.base" ;;
  aaa)
    /usr/bin/python3 -c 'import sys; open(sys.argv[1], "wb").write(b"a" * int(sys.argv[2]))' "$f.$$" "$N" ;;
  an)
    /usr/bin/python3 -c 'import sys; open(sys.argv[1], "wb").write(b"an" * (int(sys.argv[2]) // 2))' "$f.$$" "$N" ;;
  deva)
    /usr/bin/python3 -c 'import sys; open(sys.argv[1], "wb").write("क".encode() * (int(sys.argv[2]) // 3))' "$f.$$" "$N" ;;
  random)
    head -c "$N" /dev/urandom > "$f.$$" ;;
  randcp)
    /usr/bin/python3 - "$N" "$f.$$" <<'PY'
import sys, random
random.seed(20); n = int(sys.argv[1]); out = open(sys.argv[2], 'wb'); done = 0
span = 0x110000 - 0x20 - 0x800
while done < n:
    cps = [random.randrange(span) + 0x20 for _ in range(1 << 18)]
    b = ''.join(map(chr, [c + 0x800 if c >= 0xD800 else c for c in cps])).encode()
    b = b[:n - done]
    while b and (b[-1] & 0xC0) == 0x80: b = b[:-1]
    if b and b[-1] >= 0xC0: b = b[:-1]
    out.write(b); done += len(b)
    if len(b) < 4: break
PY
    ;;
  esac
  mv "$f.$$" "$f"
}

tok_path() {
  case $1 in
  cl100k) echo "$SHARED/vocab/tiktoken/cl100k_base.tiktoken" ;;
  o200k)  echo "$SHARED/vocab/tiktoken/o200k_base.tiktoken" ;;
  gpt2)   echo "$SHARED/vocab/gpt2/tokenizer.json" ;;
  mbert)  echo "$SHARED/vocab/bert-base-multilingual-cased/vocab.txt" ;;
  laser)  echo "$SHARED/vocab/laser100k-spm/laser_100k.model" ;;
  spmbpe)
    m=$BENCH_TMP/spm_bpe8k
    if [ ! -s "$m.model" ]; then
      command -v spm_train >/dev/null || apt-get install -y -qq sentencepiece >/dev/null
      awk 'NR % 10 == 0' "$(bench_encode_text)" > "$BENCH_TMP/spm_bpe_sample.txt"
      spm_train --input="$BENCH_TMP/spm_bpe_sample.txt" --model_prefix="$m" --model_type=bpe \
        --vocab_size=8000 --character_coverage=0.9995 --num_threads=2 >/dev/null 2>&1
    fi
    echo "$m.model" ;;
  esac
}

# row NAME CMD...: one timed run; prints "| NAME | wall s | CPU s | peak RSS MB | exit |"
# (CPU: user + sys, steadier than wall on a shared machine).
row() {
  name=$1; shift
  rc=0
  /usr/bin/time -f '%e %U %S %M' -o "$D/time" timeout "$TO" "$@" >/dev/null 2>"$D/err" || rc=$?
  if [ "$rc" = 124 ]; then
    echo "| $name | over $TO s | | | killed |"
  else
    awk -v n="$name" -v rc="$rc" 'END { printf "| %s | %.2f | %.2f | %.0f | %s |\n", n, $1, $2 + $3, $4 / 1024, rc }' "$D/time"
  fi
}

echo "worst-case inputs: $MB MB each, one line, timeout $TO s per run ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), host steal during the runs $(bench_steal))"
echo
echo "| run | wall s | CPU s | peak RSS MB | exit |"
echo "|---|---|---|---|---|"
for i in $INPUTS; do make_input "$i"; done
for t in $TOKS; do
  p=$(tok_path "$t")
  for i in $INPUTS; do
    row "encode $t $i" "$LIPI" encode -t "$p" "$D/$i.$MB"
  done
done
for i in word aaa deva; do
  case " $INPUTS " in *" $i "*) ;; *) continue ;; esac
  row "count $i" "$LIPI" count --quiet -o "$D/counts.tsv" "$D/$i.$MB"
  row "train bpe $i" "$LIPI" train --type bpe --vocab-size 8000 --quiet -o "$D/tok.json" "$D/$i.$MB"
done
rm -f "$D/counts.tsv" "$D/tok.json"
