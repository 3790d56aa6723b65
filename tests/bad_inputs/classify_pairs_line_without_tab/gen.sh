. "$LIB"
make_classifier "$T/cls" bert_cls
printf 'the cat\tsat on the mat\nthe dog ran\n' > "$T/pairs.tsv"
