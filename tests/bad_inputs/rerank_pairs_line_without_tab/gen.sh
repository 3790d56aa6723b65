. "$LIB"
make_classifier "$T/rk" bert_rerank
printf 'cat\tthe cat sat\ncat the dog ran\n' > "$T/pairs.tsv"
