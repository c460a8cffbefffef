#!/usr/bin/env bash
# Everything the Hugging Face Space image needs, as a script (no Docker engine runs on our machines, so this is
# what we test). Usage: scripts/space_build.sh [VENV_DIR]   (default: .venv in the repo)
#   - Debian WordNet when root (WordNet swaps and attack recipes)
#   - a venv with the pinned stack of its Python (locks/pyX.Y.txt: torch first, exactly the lock's), then the
#     project, then the dependency check
#   - NLTK data and TextAttack's cache materialised in $ALBERT_LENS_CACHE (writable by uid 1000 at run time)
#   - the chosen TextAttack pair ($ALBERT_LENS_PAIR, default sst2) fetched into $HF_HOME when the hub answers
#   - a smoke prediction on the offline pair, so a broken image fails at build time
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV="${1:-.venv}"
PY="${PYTHON:-python3}"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && [ ! -f /usr/share/wordnet/index.sense ]; then
  { apt-get install -y -q wordnet-base wordnet-sense-index >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q wordnet-base wordnet-sense-index >/dev/null 2>&1; }; } \
    || echo "space_build: WordNet not installed; WordNet features will say so" >&2
fi
"$PY" -m venv "$VENV"
# torch (TORCH_SPEC; TORCH_INDEX_URL: PyTorch's own index for a CUDA build on a Space with GPU hardware), the lock,
# the project, a dependency check: the same script as the dev venv's (scripts/setup)
VER="$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
bash scripts/install_pinned.sh "$VENV" "locks/py$VER.txt"
# caches: NLTK stop words + WordNet, TextAttack's post-install marker
"$VENV/bin/python" -c "import app.core, os; print('space_build: caches in', os.environ['NLTK_DATA'])"
PAIR="${ALBERT_LENS_PAIR:-sst2}"
"$VENV/bin/python" - "$PAIR" <<'PY'
import sys
from app.core.models.registry import get_pair
from app.core.ground.runtime import hub_reachable
pair = get_pair(sys.argv[1])
if pair.name != "offline" and hub_reachable(3.0):
    from huggingface_hub import snapshot_download
    for m in pair.models:
        snapshot_download(m.source, allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model", "pytorch_model.bin"])
        print("space_build: fetched", m.source)
else:
    print("space_build: hub not reachable or offline pair chosen; the app will use the offline pair")
PY
"$VENV/bin/albert-lens" predict --pair offline --json "A gorgeous, witty, seductive movie." > /dev/null
echo "space_build: ok"
