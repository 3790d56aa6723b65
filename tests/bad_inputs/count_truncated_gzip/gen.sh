# A gzip corpus cut after 60 of its bytes.
i=0
while [ $i -lt 300 ]; do echo "line $i of the corpus, नमस्ते $i"; i=$((i + 1)); done | gzip -c > "$T/full.gz"
head -c 60 "$T/full.gz" > "$T/corpus.gz"
rm "$T/full.gz"
