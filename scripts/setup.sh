#!/usr/bin/env bash
# Install kvdsl (with its dev extra) into .venv, plus what a fresh Debian machine lacks:
# python3-venv, and a Vulkan driver for wgpu (Mesa's software adapter, llvmpipe) when wgpu finds
# no adapter. Safe to run again: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
apt_install() {
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  apt_install python3 python3-venv python3-pip
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q -e '.[dev]'
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
has_adapter='import sys, wgpu; sys.exit(wgpu.gpu.request_adapter_sync() is None)'
if ! .venv/bin/python -c "$has_adapter" >/dev/null 2>&1; then
  echo "setup: no wgpu adapter found: installing Mesa's Vulkan drivers (llvmpipe)"
  apt_install mesa-vulkan-drivers libvulkan1
  .venv/bin/python -c "$has_adapter" >/dev/null 2>&1 || {
    echo "setup: wgpu still finds no adapter" >&2
    exit 1
  }
fi
