#!/usr/bin/env bash
# The fair-vocabulary frontier of docs/FAIRNESS.md ("Frontier"): vocabulary
# sizes x balance rules x BPE/Unigram, trained on the benchmark corpus minus
# FLORES-200 devtest lines + FLORES dev/NTREX of the other languages +
# ../shared/data/mono-indic, measured with 'lipi inflation' on devtest.
#
#   bench/fair_frontier.sh prep            # the training text (once)
#   bench/fair_frontier.sh train NAME...   # NAME = bpe-none-64k, uni-recipe-48k, ...
#   bench/fair_frontier.sh measure NAME... # inflation CSV + markdown table
#   bench/fair_frontier.sh all             # every point, BPE first (make bench)
#
# Outputs in $FAIR_TMP (default /tmp/lipi-fair): NAME.json, NAME.cmd,
# NAME.time, inflation.csv (the last measure), frontier.md (all). Nothing
# of mono-indic is written into the repository; only tokenizers trained on
# it are.
# `make bench` runs every bench/*.sh with sh and the build folder.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -euo pipefail -f  # -f: no globbing of "*=1.5"
cd "$(dirname "$0")/.."
if [ $# -ge 1 ] && [ -d "$1" ]; then LIPI=${LIPI:-$PWD/$1/lipi}; shift; fi
LIPI=${LIPI:-$PWD/build/lipi}
D=${SHARED:-$PWD/../shared/data}
[ -d "$D/mono-indic" ] || { echo "fair_frontier: skipped, $D/mono-indic is missing"; exit 0; }
W=${FAIR_TMP:-/tmp/lipi-fair}
THREADS=${THREADS:-2}
mkdir -p "$W"

# The three goal languages: their own lines of the mixed files (devtest lines
# removed) plus the mono-indic text. The Gita Press commentary
# (hi-gita-ramsukhdas, older spelling) is left out: see docs/FAIRNESS.md.
HI_MONO="hi-gita-commentary hi-commonvoice hi-ud-pud"
BN_MONO="bn-news-punct"
TA_MONO="ta-projectmadurai ta-news-headlines ta-commonvoice ta-ud-ttb"

prep() {
  [ -s "$W/rest.txt" ] && return 0
  local P=$D/parallel
  [ -d "$D/mono-indic" ] || { echo "fair_frontier: $D/mono-indic is missing" >&2; exit 1; }
  cat "$P"/flores200/devtest/*.txt | LC_ALL=C sort -u > "$W/devtest-lines.txt"
  for f in "$D"/mono/*.txt.xz; do xz -dc "$f"; done |
    grep -vxFf "$W/devtest-lines.txt" > "$W/bench-minus-devtest.txt"
  : > "$W/others.txt"
  for f in "$P"/flores200/dev/*.txt; do case $(basename "$f" .txt) in
    eng_Latn|hin_Deva|ben_Beng|tam_Taml) ;; *) cat "$f" >> "$W/others.txt";; esac; done
  for f in "$P"/ntrex128/*.txt; do case $(basename "$f" .txt) in
    eng|hin|ben|tam) ;; *) cat "$f" >> "$W/others.txt";; esac; done
  cat "$W/bench-minus-devtest.txt" "$W/others.txt" > "$W/train.txt"
  local x f s m
  for x in hi:Devanagari bn:Bengali ta:Tamil; do f=${x%%:*}; s=${x##*:}
    xz -dc "$D/mono/$f-mixed.txt.xz" | grep -vxFf "$W/devtest-lines.txt" |
      grep -P "\p{$s}" > "$W/$f-only.txt"; done
  cat "$W"/{hi,bn,ta}-only.txt > "$W/ind-only.txt"
  grep -vxFf "$W/ind-only.txt" "$W/train.txt" > "$W/rest.txt.tmp"
  for x in hi bn ta; do
    case $x in hi) m=$HI_MONO;; bn) m=$BN_MONO;; ta) m=$TA_MONO;; esac
    cp "$W/$x-only.txt" "$W/$x-all.txt"
    for f in $m; do xz -dc "$D/mono-indic/$f.txt.xz" | grep -vxFf "$W/devtest-lines.txt" \
      >> "$W/$x-all.txt" || true; done
  done
  # dev4: the goal languages; devI: English and every Indic FLORES dev file.
  rm -rf "$W/dev4" "$W/devI"; mkdir -p "$W/dev4" "$W/devI"
  ln -s "$P"/flores200/dev/{eng_Latn,hin_Deva,ben_Beng,tam_Taml}.txt "$W/dev4/"
  for f in "$P"/flores200/dev/*.txt; do case $(basename "$f" .txt) in
    deu_Latn|fra_Latn|rus_Cyrl|spa_Latn) ;; *) ln -s "$f" "$W/devI/";; esac; done
  mv "$W/rest.txt.tmp" "$W/rest.txt"
  sha256sum "$W"/{rest,hi-all,bn-all,ta-all}.txt "$W"/devI/*.txt > "$W/inputs.sha256"
}

LANGS="--lang-file hin_Deva=$W/hi-all.txt --lang-file ben_Beng=$W/bn-all.txt --lang-file tam_Taml=$W/ta-all.txt"
# Parity targets: English and the goal languages on par, the others at *=T.
GOALT="--parity-target Latn=1 --parity-target hin_Deva=1 --parity-target ben_Beng=1 --parity-target tam_Taml=1"
ALL="$W/rest.txt $W/hi-all.txt $W/bn-all.txt $W/ta-all.txt"

# The options of one frontier point, from its name TYPE-RULE-SIZEk.
args_of() {
  local name=$1 type rule size
  type=${name%%-*}; size=${name##*-}; rule=${name#*-}; rule=${rule%-*}
  printf -- '--type %s --vocab-size %s ' "$([ "$type" = uni ] && echo unigram || echo bpe)" "${size%k}000"
  case $rule in
    none)     echo "$ALL";;
    smoothed) echo "--balance smoothed $ALL";;
    rams)     echo "$ALL $W/hi-rams.txt";;
    dev4k8)   echo "--balance parity --dev $W/dev4 --parity-exponent 8 $ALL";;
    *) recipe_args "$type" "$rule";;
  esac
}

# The recipe (docs/FAIRNESS.md, "Frontier"): parity over English and every
# Indic FLORES dev file, the goal languages as language files, per-language
# targets (the goal languages on par with English, Hindi pushed a little
# harder; every other Indic script just under where plain BPE leaves it),
# and the languages without a dev file (Sinhala, CJK, ...) competing at
# plain counts instead of starving.
TARGETS="--parity-target Latn=1 --parity-target hin_Deva=0.9 --parity-target ben_Beng=1.02
 --parity-target tam_Taml=1.06 --parity-target Beng=1.6 --parity-target Gujr=1.6
 --parity-target Knda=1.65 --parity-target Arab=1.65 --parity-target Deva=1.45
 --parity-target Mlym=1.65 --parity-target Orya=1.75 --parity-target Guru=1.7
 --parity-target Olck=1.9 --parity-target Telu=1.6"
RECIPES=${RECIPES-recipe}

recipe_args() {
  local type=$1 rule=$2
  case $type-$rule in
    bpe-recipe) echo "--balance parity --dev $W/devI --parity-exponent 12 --parity-others 1 $TARGETS $LANGS $W/rest.txt";;
    # Unigram: the same targets with its own weights (not tuned).
    uni-recipe) echo "--balance parity --dev $W/devI --parity-exponent 4 --parity-mass 0.5 $TARGETS $LANGS $W/rest.txt";;
    *-x*) # exploration: X_ARGS from the environment, any name
      echo "--balance parity --dev $W/devI $X_ARGS $LANGS $W/rest.txt";;
    *-t*k*) local t=${rule#t}; t=${t%k*}
      echo "--balance parity --dev $W/devI --parity-exponent ${rule##*k} $GOALT --parity-target *=$t $LANGS $W/rest.txt";;
    *-devIk*) echo "--balance parity --dev $W/devI --parity-exponent ${rule#devIk} $LANGS $W/rest.txt";;
    *-dev4Lk*) echo "--balance parity --dev $W/dev4 --parity-exponent ${rule#dev4Lk} $LANGS $W/rest.txt";;
    *) echo "fair_frontier: unknown point $type-$rule" >&2; exit 1;;
  esac
}

train() {
  local name a
  for name in "$@"; do
    [ -s "$W/$name.json" ] && continue
    a=$(args_of "$name")
    echo "lipi train $a" > "$W/$name.cmd"
    /usr/bin/time -f "%e s wall, %U s user, %M kB" -o "$W/$name.time" \
      "$LIPI" train $a --threads "$THREADS" --quiet -o "$W/$name.json"
  done
}

measure() {
  local t=() n
  for n in "$@"; do t+=(-t "$W/$n.json"); done
  "$LIPI" inflation "${t[@]}" --parallel "$D/parallel/flores200/devtest" \
    --threads "$THREADS" --format csv -o "$W/inflation.csv"
  /usr/bin/python3 bench/fair_table.py "$W/inflation.csv" "$@"
}

cmd=${1:-all}; shift || true
prep
case $cmd in
  prep) ;;
  train) train "$@";;
  measure) measure "$@";;
  all)
    pts=()
    for ty in bpe uni; do for sz in 32k 48k 64k; do for r in none smoothed $RECIPES; do
      pts+=("$ty-$r-$sz"); done; done; done
    train "${pts[@]}"
    : > "$W/frontier.md"
    for ty in bpe uni; do
      measure $(printf '%s\n' "${pts[@]}" | grep "^$ty-") | tee -a "$W/frontier.md"; echo | tee -a "$W/frontier.md"
    done;;
  *) echo "usage: $0 prep|train NAME...|measure NAME...|all" >&2; exit 2;;
esac
