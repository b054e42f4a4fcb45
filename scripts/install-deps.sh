#!/usr/bin/env bash
# Installs the Debian 12 packages cplane builds and tests with.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends \
  build-essential cmake pkg-config \
  capnproto libcapnp-dev \
  libsqlite3-dev sqlite3 \
  libfmt-dev librange-v3-dev catch2 \
  gnuplot-nox
