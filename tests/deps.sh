#!/bin/sh
# `make deps`: checks with pkg-config (and for uthash, its header) that every
# library lipi builds with is present. As root, installs the missing Debian
# packages with apt-get; otherwise prints the exact command and fails.
# Each argument is PKGCONFIG_NAME:DEBIAN_PACKAGE, or header/FILE:DEBIAN_PACKAGE,
# or bin/COMMAND:DEBIAN_PACKAGE, or file/PATH:DEBIAN_PACKAGE (PATH may hold
# a glob, for files under a versioned folder).
missing=""
have() {
  case "$1" in
    header/*) [ -f "/usr/include/${1#header/}" ] ;;
    bin/*) command -v "${1#bin/}" >/dev/null 2>&1 ;;
    file/*) ls ${1#file} >/dev/null 2>&1 ;;
    *) command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "$1" ;;
  esac
}
for spec in "$@"; do
  what=${spec%%:*}
  pkg=${spec#*:}
  have "$what" || missing="$missing $pkg"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
  echo "make deps: installing$missing" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null; } || {
    echo "make deps: apt-get install failed for:$missing" >&2; exit 1; }
else
  echo "make deps: missing Debian packages. Run:" >&2
  echo "  sudo apt-get install -y$missing" >&2
  exit 1
fi
