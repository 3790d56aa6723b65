# Helpers for the bad-input cases (their gen.sh scripts source "$LIB") and
# the crash-safety test.

# make_model DIR WORD: a model folder from the st_mean fixture (a tiny
# sentence-transformers BERT) with a WordPiece vocab.txt of its 100 ids;
# WORD names the filler tokens, so two WORDs give two different models.
# Run from the repository root.
make_model() {
    mkdir -p "$1/1_Pooling" || return 1
    for f in config.json model.safetensors modules.json sentence_bert_config.json \
             1_Pooling/config.json; do
        cp "tests/fixtures/models/st_mean/$f" "$1/$f" || return 1
    done
    {
        for w in '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]' the a cat dog sat on mat ran in \
                 park red blue sun moon king queen reads book; do
            echo "$w"
        done
        i=23
        while [ $i -lt 100 ]; do echo "$2$i"; i=$((i + 1)); done
    } > "$1/vocab.txt"
}

# make_classifier DIR FIXTURE: a model folder from a *ForSequenceClassification
# fixture of tests/fixtures/models (bert_cls, bert_rerank) with make_model's
# vocab.txt. Run from the repository root.
make_classifier() {
    mkdir -p "$1" || return 1
    cp "tests/fixtures/models/$2/config.json" "tests/fixtures/models/$2/model.safetensors" "$1/" ||
        return 1
    make_model "$1.vocab" w && mv "$1.vocab/vocab.txt" "$1/vocab.txt" && rm -rf "$1.vocab"
}

# devanagari_corpus LINES SEED: LINES lines of 12 random Devanagari
# syllable words, the same for the same SEED (a training corpus).
devanagari_corpus() {
    awk -v n="$1" -v seed="$2" 'BEGIN {
    srand(seed)
    split("क ख ग घ च ज ट ड त द न प ब म य र ल व स ह", c, " ")
    split("ा ि ी ु ू े ै ो ौ ं ्", v, " ")
    for (l = 0; l < n; l++) {
        line = ""
        for (w = 0; w < 12; w++) {
            word = ""
            for (s = 1 + int(rand() * 4); s > 0; s--) {
                word = word c[1 + int(rand() * 20)]
                if (rand() < 0.7) word = word v[1 + int(rand() * 11)]
            }
            line = line (w ? " " : "") word
        }
        print line
    }
}'
}

# Prints a checksum line per file under $1 (a file or a folder), so that two
# snapshots differ when any byte, name or entry changed.
snapshot() {
    if [ -d "$1" ]; then
        (cd "$1" && find . -print | LC_ALL=C sort && find . -type f -exec cksum {} + | LC_ALL=C sort)
    elif [ -e "$1" ]; then
        cksum < "$1"
    else
        echo absent
    fi
}

# Writes the 8 bytes of N (< 2^63) little-endian to standard output.
u64le() {
    n=$1 i=0
    while [ $i -lt 8 ]; do
        printf "\\$(printf %03o $((n & 255)))"
        n=$((n >> 8)) i=$((i + 1))
    done
}

# safetensors FILE HEADER DATA_BYTES: a safetensors file with that JSON
# header and DATA_BYTES zero bytes of tensor data.
safetensors() {
    { u64le ${#2}; printf '%s' "$2"; head -c "$3" /dev/zero; } > "$1"
}

# Copies the model folder $1 to $2 (a folder that must not exist yet).
copy_model() {
    cp -R "$1" "$2"
}

# nested N OPEN CLOSE: N copies of OPEN then N of CLOSE (deep JSON).
nested() {
    yes "$2" | head -n "$1" | tr -d '\n'
    yes "$3" | head -n "$1" | tr -d '\n'
}
