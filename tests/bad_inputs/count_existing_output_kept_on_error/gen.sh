printf 'old\t1\n' > "$T/c.tsv"
