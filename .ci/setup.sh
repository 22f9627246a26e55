#!/usr/bin/env bash
# Debian packages the tests need and pip cannot install: headless Chromium and its driver
# (the web page's browser test). Installed only when missing; CI runs as root.
set -euo pipefail
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    # Another apt run on the machine holds the lock: wait for it rather than fail.
    $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq chromium chromium-driver >/dev/null
fi
