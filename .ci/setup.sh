#!/bin/sh
# System packages the test suite needs beyond pip: Debian's chromium and chromium-driver
# (the HTML export and the served web page are checked in a headless browser, the page
# through selenium). Installed only when missing; CI runs as root.
set -e
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    # Another apt run on the machine holds the lock: wait for it rather than fail.
    $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        chromium chromium-driver >/dev/null
fi
