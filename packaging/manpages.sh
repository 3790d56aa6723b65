#!/bin/sh
# Writes lipi.1 and one lipi-COMMAND.1 per command into OUTDIR, made by
# help2man from the commands' own --help, so the pages never drift from the
# program. The list of commands is read from `lipi --help`.
#
#   sh packaging/manpages.sh path/to/lipi OUTDIR VERSION
set -eu
lipi=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
out=$2
version=$3
mkdir -p "$out/bin"
h2m() {
  help2man --no-info --version-string="$version" --section=1 \
    --source="lipi $version" --manual="lipi manual" "$@"
}
h2m --name="subword tokenization, token inflation and embeddings for multilingual text" \
  -o "$out/lipi.1.tmp" "$lipi"
mv "$out/lipi.1.tmp" "$out/lipi.1"
# help2man names a page after the program it runs, so each command gets a
# two-line wrapper called lipi-COMMAND (as git-commit(1) documents `git commit`).
"$lipi" --help | sed -n '/^Commands:/,/^$/p' | sed -n 's/^  \([a-z-]*\)  *\(.*\)$/\1\t\2/p' |
while IFS="$(printf '\t')" read -r cmd summary; do
  w="$out/bin/lipi-$cmd"
  printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$lipi" "$cmd" > "$w"
  chmod +x "$w"
  h2m --name="$summary" -o "$out/lipi-$cmd.1.tmp" "$w"
  mv "$out/lipi-$cmd.1.tmp" "$out/lipi-$cmd.1"
done
rm -rf "$out/bin"
