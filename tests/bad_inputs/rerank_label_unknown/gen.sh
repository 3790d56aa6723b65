. "$LIB"
make_classifier "$T/cls" bert_cls
