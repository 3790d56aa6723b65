. "$LIB"
{ printf '{"format":'; nested 100000 '[' ']'; printf '}\n'; } > "$INDEX/meta.json"
