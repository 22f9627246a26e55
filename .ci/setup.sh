#!/bin/sh
# System packages the test suite needs beyond pip: Debian's chromium (the HTML export is
# checked in a headless browser). Installed only when missing; CI runs as root.
set -e
if [ ! -x /usr/bin/chromium ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
