# The first 1000 of the 15512 bytes of a real SentencePiece model.
head -c 1000 "$CASE/../../fixtures/readers/unigram_user.model" > "$T/unigram_user.model"
