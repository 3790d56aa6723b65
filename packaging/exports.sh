#!/bin/sh
# Writes the linker version script of liblipi.so: the functions declared in
# the public headers (the preprocessed declarations `lipi_NAME (`, but not
# the return type of a function pointer type, `lipi_status (*`), and
# nothing else, so the shared library's ABI is exactly what the installed
# headers promise. With --names it prints only the names, one a line:
# tests/install.sh compares them with what the installed .so exports.
#
#   sh packaging/exports.sh CC HEADER... > lipi.map
#   CPPFLAGS=-Iinclude sh packaging/exports.sh --names CC HEADER...
set -eu
names_only=
if [ "$1" = --names ]; then
  names_only=1
  shift
fi
cc=$1
shift
names() {
  for h in "$@"; do
    $cc -E -P -I. ${CPPFLAGS:-} "$h"
  done | grep -o 'lipi_[a-z0-9_]*[[:space:]]*([*]\{0,1\}' | grep -v '[*]$' |
    sed 's/[[:space:]]*($//' | sort -u
}
if [ -n "$names_only" ]; then
  names "$@"
  exit
fi
echo "LIPI_0 {"
echo "  global:"
names "$@" | sed 's/.*/    &;/'
echo "  local: *;"
echo "};"
