echo '{"an": "earlier tokenizer"}' > "$T/t.json"
