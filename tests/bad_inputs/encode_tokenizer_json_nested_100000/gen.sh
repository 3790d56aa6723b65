. "$LIB"
# {"model": [[[[ ... ]]]]} nested 100,000 deep.
{ printf '{"model":'; nested 100000 '[' ']'; printf '}\n'; } > "$T/tokenizer.json"
