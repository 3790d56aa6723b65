#!/bin/sh
# Checks that every Debian package lipi builds with is installed; as root,
# installs the missing ones, otherwise prints the command and fails.
missing=""
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
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
