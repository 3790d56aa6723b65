. "$LIB"
make_classifier "$T/rk" bert_rerank
printf 'cat\nsun\n' > "$T/q.txt"
printf '3\t1\t1\t0.9\tred sun\n' > "$T/rows.tsv"
