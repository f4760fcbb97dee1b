#!/usr/bin/env bash
# Prints the Python interpreter that builds and tests the Python package (python/), first making
# sure it has what that needs: Python's headers (python3-dev), nanobind, numpy and pytest.
#   scripts/python-env.sh BUILD_DIR
# python3 is used as it is when it has them all (a machine without PyPI, such as the GPU
# machine's image, must have them preinstalled); otherwise a virtual environment in
# BUILD_DIR/python-venv, filled from PyPI with pip.  python3, python3-venv and python3-dev are
# installed with apt-get when missing (through sudo when not root), as setup.sh does for the
# C++ build.  Everything but the interpreter's path goes to stderr.
set -euo pipefail
build_dir=${1:?usage: scripts/python-env.sh BUILD_DIR}

apt_install() {
  echo "python-env: installing $*" >&2
  local sudo_cmd=""
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq >&2
  $sudo_cmd apt-get install -y -qq "$@" >/dev/null
}

if ! command -v python3 >/dev/null 2>&1; then
  apt_install python3 python3-venv python3-dev
fi
has_headers() {
  python3 -c 'import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)'
}
has_headers || apt_install python3-dev

if python3 -c 'import nanobind, numpy, pytest' >/dev/null 2>&1; then
  # The interpreter itself, not a launcher in front of it (pyenv's shims).
  python3 -c 'import sys; print(sys.executable)'
  exit 0
fi

venv="$build_dir/python-venv"
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p "$build_dir"
  if ! python3 -m venv "$venv" >&2 2>/dev/null; then
    rm -rf "$venv"
    apt_install python3-venv
    python3 -m venv "$venv" >&2
  fi
fi
if ! "$venv/bin/python" -c 'import nanobind, numpy, pytest' >/dev/null 2>&1; then
  echo "python-env: installing nanobind, numpy, pytest into $venv" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check nanobind numpy pytest >&2
fi
# An absolute path: CMake reads a relative Python_EXECUTABLE from its build directory.
echo "$(cd "$venv/bin" && pwd)/python"
