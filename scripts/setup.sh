#!/bin/sh
# Called by `make setup`: a .venv on Python 3.11+, requirements.txt installed into it, and
# Graphviz's `dot` installed when this machine lets us (the kit works without it).
# POSIX sh on purpose: it must run on a fresh Debian/Ubuntu (dash) and on macOS.
set -eu
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-}

say() { printf 'setup: %s\n' "$*"; }

# True if "$1" runs and is Python 3.11+; pyenv shims for absent versions fail here, as they should.
py_ok() {
  "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' >/dev/null 2>&1
}

pick_python() {
  if [ -n "$PYTHON" ]; then
    if py_ok "$PYTHON"; then echo "$PYTHON"; return 0; fi
    say "PYTHON=$PYTHON is not a working Python 3.11+." >&2
    return 1
  fi
  for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && py_ok "$candidate"; then
      echo "$candidate"
      return 0
    fi
  done
  cat >&2 <<'MSG'
setup: no Python 3.11 or newer found (tried python3.13, python3.12, python3.11, python3).
  Debian/Ubuntu:  sudo apt-get install python3 python3-venv   (Debian 12 / Ubuntu 24.04 ship 3.11+)
  macOS:          brew install python@3.12
  Anywhere:       https://www.python.org/downloads/
Then run `make setup` again, or point at one: make setup PYTHON=/path/to/python3.12
MSG
  return 1
}

make_venv() {
  # Reuse a venv that works (Python 3.11+ with pip); rebuild one that does not.
  if [ -x "$VENV/bin/python" ] && py_ok "$VENV/bin/python" \
     && "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    say "using $VENV ($("$VENV/bin/python" -V 2>&1))"
    return 0
  fi
  py=$(pick_python)
  say "creating $VENV with $py ($("$py" -V 2>&1))"
  if ! "$py" -m venv --clear "$VENV"; then
    say "could not create $VENV. On Debian/Ubuntu: sudo apt-get install python3-venv" >&2
    return 1
  fi
}

install_requirements() {
  quiet=""
  if [ -n "${CI:-}" ]; then quiet="-q"; fi
  say "installing requirements.txt into $VENV"
  "$VENV/bin/python" -m pip install $quiet --disable-pip-version-check -r requirements.txt
  # Older setups installed the Lite kernel here; its extension breaks JupyterLab (the Lite build
  # now fetches it into its own cache), so a venv from then is cleaned of it.
  if "$VENV/bin/python" -m pip show -q jupyterlite-pyodide-kernel >/dev/null 2>&1; then
    "$VENV/bin/python" -m pip uninstall -y -q jupyterlite-pyodide-kernel
    rmdir "$VENV/share/jupyter/labextensions/@jupyterlite" 2>/dev/null || true
  fi
}

# What to tell a learner when we cannot install dot ourselves: the doctor knows each OS.
dot_hint() {
  cmd=$("$VENV/bin/python" -c 'import platform
from shopops_lab import doctor
print(doctor.graphviz_install_command(platform.system(), doctor.read_os_release()))' 2>/dev/null || true)
  if [ -n "$cmd" ]; then
    say "Graphviz 'dot' is not installed. To get live diagrams, run: $cmd"
  else
    say "Graphviz 'dot' is not installed. To get live diagrams, install it: https://graphviz.org/download/"
  fi
  say "(optional: the notebooks still work without it, showing DOT source and pre-rendered layouts)"
}

install_dot() {
  if command -v dot >/dev/null 2>&1; then
    say "found $(dot -V 2>&1 | head -n 1)"
    return 0
  fi
  if [ "${SHOPOPS_SKIP_GRAPHVIZ:-}" = 1 ]; then
    dot_hint
    return 0
  fi
  case "$(uname -s)" in
    Darwin)
      if command -v brew >/dev/null 2>&1; then
        say "installing Graphviz: brew install graphviz"
        brew install graphviz || dot_hint
      else
        say "Homebrew not found (https://brew.sh); then run: brew install graphviz"
        dot_hint
      fi
      ;;
    Linux)
      if ! command -v apt-get >/dev/null 2>&1; then
        dot_hint
        return 0
      fi
      if [ "$(id -u)" = 0 ]; then
        sudo=""
      elif command -v sudo >/dev/null 2>&1; then
        sudo="sudo"
      else
        say "not root and no sudo: ask an admin to run: apt-get install graphviz"
        dot_hint
        return 0
      fi
      say "installing Graphviz: ${sudo:+$sudo }apt-get update && ${sudo:+$sudo }apt-get install -y graphviz"
      if $sudo apt-get update -q && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q graphviz; then
        :
      else
        dot_hint
      fi
      ;;
    *)
      dot_hint
      ;;
  esac
}

make_venv
install_requirements
install_dot
say "done. Check this machine with: make doctor"
