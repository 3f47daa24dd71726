#!/usr/bin/env bash
# Install kvdsl (with its dev extra) into .venv, plus what a fresh Debian machine lacks:
# python3-venv; a C compiler and libc headers (gcc, libc6-dev), which build the Vulkan layer
# of benchmarks/vklayer that tests/benchmarks/test_shaderstats.py captures SPIR-V with; and a
# Vulkan driver for wgpu (Mesa's software adapter, llvmpipe) when kvdsl finds no adapter it runs
# on (none at all, or only OpenGL, where naga's GLSL breaks WGSL's integer division and
# conversion rules); Node.js and npm, which pack emitted/ as the npm package kvdsl and run it
# (tests/contract/test_module.py, test_package.py), with the tests' npm packages (TypeScript's tsc,
# ajv) installed into tests/node from its lockfile; and Debian's chromium, which the browser tests
# (tests/browser) drive through Playwright on its own SwiftShader WebGPU. Safe to run again: each
# step is skipped when already done.
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
# The layer includes only libc's headers (stdint, stdio, stdlib, string, pthread).
layer_headers='#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>'
if ! printf '%s\n' "$layer_headers" | gcc -x c -fsyntax-only - >/dev/null 2>&1; then
  echo "setup: no C compiler that builds the Vulkan layer: installing gcc and libc6-dev"
  apt_install gcc libc6-dev
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "setup: no Node.js and npm to test the npm package kvdsl with: installing nodejs and npm"
  apt_install nodejs npm
fi
# tsc and ajv at the versions tests/node/package-lock.json pins, from the npm registry.
if [ ! tests/node/node_modules/.package-lock.json -nt tests/node/package-lock.json ]; then
  echo "setup: installing the tests' npm packages into tests/node (npm ci)"
  (cd tests/node && npm ci --no-audit --no-fund --loglevel=error)
fi
# The browser tests run Debian's chromium (KVDSL_CHROMIUM names another); Playwright, from the dev
# extra, drives it: its own browser download is not used.
if [ ! -x "${KVDSL_CHROMIUM:-/usr/bin/chromium}" ]; then
  echo "setup: no Chromium for the browser tests: installing Debian's chromium"
  apt_install chromium
fi
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q -e '.[dev]'
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
# wgpu-native (the runtime's default, whatever KVDSL_WEBGPU says: only the kvdsl command reads it)
has_adapter='from kvdsl.runtime import adapter_info; adapter_info()'
if ! .venv/bin/python -c "$has_adapter" >/dev/null 2>&1; then
  echo "setup: no wgpu adapter kvdsl runs on: installing Mesa's Vulkan drivers (llvmpipe)"
  apt_install mesa-vulkan-drivers libvulkan1
  .venv/bin/python -c "$has_adapter" >/dev/null 2>&1 || {
    echo "setup: still no wgpu adapter kvdsl runs on:" >&2
    .venv/bin/python -c "$has_adapter" >&2 || true
    exit 1
  }
fi
