. "$LIB"
make_classifier "$T/rk" bert_rerank
printf '1\t1\t3\t0.9\tred sun\n1\t2\tthe cat sat\n' > "$T/rows.tsv"
