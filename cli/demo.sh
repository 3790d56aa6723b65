#!/bin/sh
# `make demo`: how lipi's Indic-aware pre-tokenizer and GPT-4's cl100k pattern
# split the same sentences, on the bundled FLORES-200 sample.
set -eu
LIPI=${1:-build/lipi}
DATA=data/flores200

echo "== The same sentence, split by cl100k (GPT-4) and by lipi's indic pattern =="
for lang in hin_Deva tam_Taml; do
  line=$(sed -n 3p "$DATA/$lang.txt" | cut -d" " -f1-6)
  echo
  echo "$lang: $line"
  for pat in cl100k indic; do
    printf '  %-7s ' "$pat"
    printf "%s\n" "$line" | "$LIPI" pretokenize --pattern "$pat"
  done
done

echo
echo "== Pre-tokens per sentence (first 200 lines of FLORES-200 devtest) =="
printf '%-10s %10s %10s %10s\n' language cl100k indic 'cl100k/indic'
for lang in eng_Latn hin_Deva ben_Beng tam_Taml; do
  c=$("$LIPI" pretokenize --pattern cl100k --count "$DATA/$lang.txt" | awk '{s+=$1} END {print s}')
  i=$("$LIPI" pretokenize --pattern indic --count "$DATA/$lang.txt" | awk '{s+=$1} END {print s}')
  n=$(wc -l < "$DATA/$lang.txt")
  awk -v l="$lang" -v c="$c" -v i="$i" -v n="$n" \
    'BEGIN { printf "%-10s %10.1f %10.1f %10.2f\n", l, c / n, i / n, c / i }'
done
echo
echo "cl100k's letter class \\p{L} leaves out combining marks (\\p{M}), so every"
echo "Indic vowel sign and virama starts a new piece before BPE even begins."
