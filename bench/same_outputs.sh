#!/bin/sh
# Runs two lipi binaries on the same work and says whether every output is
# byte-identical: the check behind "behaviour does not change" for a
# refactor (build the old commit elsewhere first, e.g.
#   git worktree add /tmp/old OLD && make -C /tmp/old
#   sh bench/same_outputs.sh /tmp/old/build/lipi build/lipi).
#
# The work, all on bundled data (data/ and tests/fixtures/): `make demo`'s
# training and inflation report; BPE and Unigram training on 1 and 2
# threads; counting; encoding with cl100k, o200k, multilingual BERT and the
# trained tokenizers as ids, tokens and JSONL with offsets, on 1 and 2
# threads; decoding; embedding (.npy and JSONL, 1 and 3 threads), an index
# and a search with a tiny sentence-transformers model made from a test
# fixture. Run from the repository root. Exit status 1 when anything differs.
set -u
OLD=$1
NEW=$2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lipi-same.XXXXXX") || exit 1
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
. tests/bad_inputs/lib.sh
make_model "$WORK/model" w || exit 1
DATA=data/flores200
export LIPI_DATA="$(pwd)/data"

# run NAME CMD...: runs CMD with @LIPI@ as each binary; NAME.out (stdout)
# and everything written under @OUT@ must match.
run() {
    name=$1
    shift
    for side in old new; do
        bin=$OLD
        [ $side = new ] && bin=$NEW
        out=$WORK/$side/$name
        mkdir -p "$out"
        args=
        for a in "$@"; do
            a=$(printf '%s' "$a" | sed -e "s|@LIPI@|$bin|g" -e "s|@OUT@|$out|g" -e "s|@SIDE@|$WORK/$side|g")
            args="$args '$a'"
        done
        eval "$args" >"$out/stdout" 2>"$out/stderr"
        echo "exit $?" >>"$out/stdout"
    done
}

for t in 1 2; do
    run train_bpe_$t @LIPI@ train --type bpe --vocab-size 8000 --threads $t -o @OUT@/tok.json $DATA/eng_Latn.txt $DATA/hin_Deva.txt $DATA/ben_Beng.txt $DATA/tam_Taml.txt
    run train_unigram_$t @LIPI@ train --type unigram --vocab-size 4000 --threads $t -o @OUT@/tok.json --export-spm @OUT@/tok.model $DATA/eng_Latn.txt $DATA/hin_Deva.txt $DATA/ben_Beng.txt $DATA/tam_Taml.txt
done
run count @LIPI@ count -o @OUT@/counts.tsv $DATA/hin_Deva.txt $DATA/tam_Taml.txt
run inflation @LIPI@ inflation -t @SIDE@/train_bpe_1/tok.json -t cl100k_base -t o200k_base -t data/vocab/bert-base-multilingual-cased/vocab.txt --parallel $DATA --format json
run inflation_html @LIPI@ inflation -t cl100k_base -t o200k_base --parallel $DATA -o @OUT@/report.html
for tok in cl100k_base o200k_base data/vocab/bert-base-multilingual-cased/vocab.txt @SIDE@/train_bpe_1/tok.json @SIDE@/train_unigram_1/tok.model; do
    n=$(basename "$tok" | tr . _)
    for t in 1 2; do
        run encode_${n}_$t @LIPI@ encode -t "$tok" --threads $t $DATA/hin_Deva.txt $DATA/eng_Latn.txt
    done
    run encode_${n}_tokens @LIPI@ encode -t "$tok" --format tokens $DATA/tam_Taml.txt
    run encode_${n}_jsonl @LIPI@ encode -t "$tok" --format jsonl --offsets --add-special-tokens $DATA/ben_Beng.txt
done
run decode sh -c "@LIPI@ encode -t o200k_base $DATA/hin_Deva.txt | @LIPI@ decode -t o200k_base"
printf 'the cat sat on the mat\nthe dog ran in the park\nred sun\nblue moon\nthe king reads a book\n' >"$WORK/docs.txt"
for t in 1 3; do
    run embed_$t @LIPI@ embed -m "$WORK/model" --threads $t -o @OUT@/e.npy "$WORK/docs.txt"
    run embed_jsonl_$t @LIPI@ embed -m "$WORK/model" --threads $t --format jsonl "$WORK/docs.txt"
done
run index sh -c "@LIPI@ index --quiet -m '$WORK/model' -o @OUT@/idx '$WORK/docs.txt' && printf 'the cat\nblue sun\n' > @OUT@/q.txt && @LIPI@ search --index @OUT@/idx --queries @OUT@/q.txt -k 3"

status=0
(cd "$WORK/old" && find . -type f | LC_ALL=C sort) >"$WORK/files"
n=0
while read -r f; do
    n=$((n + 1))
    case $f in
        */stderr) continue ;; # timings and progress
    esac
    same=
    case $f in
        */meta.json) # records the lipi version that wrote it
            grep -v '"lipi_version"' "$WORK/old/$f" >"$WORK/a" 2>/dev/null
            grep -v '"lipi_version"' "$WORK/new/$f" >"$WORK/b" 2>/dev/null
            cmp -s "$WORK/a" "$WORK/b" && same=1 ;;
        *) cmp -s "$WORK/old/$f" "$WORK/new/$f" && same=1 ;;
    esac
    if [ -z "$same" ]; then
        echo "differs: $f"
        status=1
    fi
done <"$WORK/files"
grep -l "^exit [^0]" "$WORK"/old/*/stdout "$WORK"/new/*/stdout 2>/dev/null | sed 's/^/failed: /'
echo "same outputs: $n files compared, $(if [ $status = 0 ]; then echo all identical; else echo some differ; fi)"
exit $status
