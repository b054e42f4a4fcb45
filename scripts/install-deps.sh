#!/usr/bin/env bash
# Installs the Debian 12 packages cplane builds and tests with
# (scripts/debian-packages.txt, the one list .ci/run uses too).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends $(cat "$(dirname "$0")/debian-packages.txt")
