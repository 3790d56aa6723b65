#!/bin/sh
# Writes the linker version script of liblipi.so: the functions declared in
# the public headers (the preprocessed declarations `lipi_NAME (`, but not
# the return type of a function pointer type, `lipi_status (*`), and
# nothing else, so the shared library's ABI is exactly what the installed
# headers promise. tests/install.sh checks that both lists agree.
#
#   sh packaging/exports.sh CC HEADER... > lipi.map
set -eu
cc=$1
shift
echo "LIPI_0 {"
echo "  global:"
for h in "$@"; do
  $cc -E -P -I. "$h"
done | grep -o 'lipi_[a-z0-9_]*[[:space:]]*([*]\{0,1\}' | grep -v '[*]$' |
  sed 's/[[:space:]]*($//' | sort -u |
  sed 's/.*/    &;/'
echo "  local: *;"
echo "};"
