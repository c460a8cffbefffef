#!/usr/bin/env bash
# Install a pinned set into an existing venv: torch first (exactly: the lock's pin, or TORCH_SPEC; TORCH_INDEX_URL
# for a CUDA build), then LOCK with requirements-overrides.txt, then the project (editable, no deps), then a
# dependency check that allows exactly the bounds the overrides lift. Used by scripts/setup and
# scripts/space_build.sh, so the dev venv and the Space image are built the same way.
# Usage: scripts/install_pinned.sh VENV LOCK
#        scripts/install_pinned.sh --uv-options VENV   prints the options pip's settings give uv (tested)
#
# uv installs it (a fresh venv from uv's cache in ~10 s, from the registries in ~20 s, where pip took ~2.5 min:
# benchmarks/README.md). uv doesn't read pip's configuration, so the index settings pip would use here (find-links,
# index and extra-index URLs, constraint files: this machine's CPU torch wheel is found through them) are handed to
# it. Where uv can't be had or fails, pip does the same steps.
set -euo pipefail
UV_OPTIONS_ONLY=
if [ "$1" = --uv-options ]; then UV_OPTIONS_ONLY=1; shift; fi
VENV="$1"
LOCK="${2:-}"
UV_PIN="uv==0.13.9"
OVERRIDES=requirements-overrides.txt
TORCH="${TORCH_SPEC:-}"
if [ -z "$TORCH" ] && [ -n "$LOCK" ]; then TORCH="$(grep -E '^torch==' "$LOCK" | sed 's/+.*//')"; fi
TORCH="${TORCH:-torch}"
py="$VENV/bin/python"
pip=("$py" -m pip --disable-pip-version-check -q)

# A dependency check that passes where the only conflicts are the bounds requirements-overrides.txt lifts (lit-nlp's
# numpy and shap, flair's and its helper's transformers): any other is printed and fails the install.
checked() {
  local out
  out="$("$@" 2>&1)" && return 0
  local lifted
  lifted="$(grep -oE '^[A-Za-z0-9_.-]+' "$OVERRIDES" | paste -sd'|')"
  local rest
  rest="$(printf '%s\n' "$out" | grep -iE 'requires|has requirement' | grep -viE "(requires|has requirement) \`?($lifted)([^A-Za-z0-9_-]|$)" || true)"
  if [ -n "$rest" ]; then printf '%s\n' "$out" >&2; return 1; fi
  return 0
}

with_pip() {
  # pip has no overrides: the lock is complete, so it installs without resolving (pip compiles .pyc files itself)
  "${pip[@]}" install ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "$TORCH"
  "${pip[@]}" install --no-deps -r "$LOCK"
  "${pip[@]}" install --no-deps --no-build-isolation -e .
  checked "${pip[@]}" check
}

# pip's own settings (environment and config files), as uv options, one per line
uv_options() {
  "$py" - <<'PY'
import shlex, subprocess, sys

out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
seen = {}
for line in out.splitlines():  # e.g.  global.find-links='/opt/wheels'   :env:.extra-index-url='a b'
    key, _, value = line.partition("=")
    name = key.rsplit(".", 1)[-1]
    for v in " ".join(shlex.split(value)).split():
        seen.setdefault(name, [])
        if v not in seen[name]:
            seen[name].append(v)
for name in ("find-links", "extra-index-url", "constraint"):
    for v in seen.get(name, []):
        print(f"--{name}\n{v}")
if seen.get("index-url"):  # the environment's comes first in pip's list, and wins there too
    print(f"--index-url\n{seen['index-url'][0]}")
PY
}

if [ -n "$UV_OPTIONS_ONLY" ]; then uv_options; exit 0; fi

with_uv() {
  "${pip[@]}" install "$UV_PIN" || return 1
  local uv="$VENV/bin/uv"
  local opts=()
  mapfile -t opts < <(uv_options)
  # unsafe-best-match: like pip, take the pinned version from whichever index has it (uv's default stops at the
  # first index that knows the name)
  # --compile-bytecode: the .pyc files written now, once. Where PYTHONDONTWRITEBYTECODE is set (it is on this
  # project's machines and CI), Python never writes them at import, so every process compiled torch, transformers
  # and TextAttack from source again: `import textattack` 20 s instead of 8, ~6 min of a test run's CPU
  # (benchmarks/README.md). ALBERT_LENS_BYTECODE=0 skips it (~30 s of set-up on two cores).
  local compile=(--compile-bytecode)
  [ "${ALBERT_LENS_BYTECODE:-1}" = 0 ] && compile=()
  local install=("$uv" pip install -q --python "$py" --index-strategy unsafe-best-match "${compile[@]}" "${opts[@]}")
  if [ -n "${TORCH_INDEX_URL:-}" ]; then
    "${install[@]}" --index-url "$TORCH_INDEX_URL" "$TORCH" || return 1
  else
    "${install[@]}" "$TORCH" || return 1
  fi
  "${install[@]}" --override "$OVERRIDES" -r "$LOCK" || return 1
  "${install[@]}" --no-deps --no-build-isolation -e . || return 1
  checked "$uv" pip check --python "$py" || return 1
}

if [ "${ALBERT_LENS_INSTALLER:-uv}" = uv ] && with_uv; then
  exit 0
fi
[ "${ALBERT_LENS_INSTALLER:-uv}" = uv ] && echo "install: uv could not install $LOCK; pip does it instead" >&2
with_pip
