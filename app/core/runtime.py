"""Process-wide set-up that must happen before heavy libraries import.

The hub is unreachable on many machines this tool runs on; every library that would otherwise try a download
(transformers, NLTK, TextAttack) is pointed at project-owned caches here, and hub reachability is decided once
with a short, bounded probe so that nothing ever hangs on a dead network.
"""
from __future__ import annotations

import os
import socket
import threading
from functools import lru_cache
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ASSETS_DIR = PROJECT_ROOT / "assets"
HUB_HOST = "huggingface.co"


def cache_dir() -> Path:
    """Where the project keeps its own caches (embeddings, NLTK data, TextAttack's cache)."""
    base = os.environ.get("ALBERT_LENS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "albert-lens"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


@lru_cache(maxsize=1)
def hub_reachable(timeout: float = 3.0) -> bool:
    """True when the Hugging Face hub answers a TCP connect within `timeout` seconds.

    DNS lookups ignore socket timeouts, so the probe runs in a daemon thread that we stop waiting for.
    HF_HUB_OFFLINE=1 short-circuits to False; ALBERT_LENS_ASSUME_ONLINE=1 skips the probe.
    """
    if _env_flag("HF_HUB_OFFLINE") or _env_flag("TRANSFORMERS_OFFLINE"):
        return False
    if _env_flag("ALBERT_LENS_ASSUME_ONLINE"):
        return True
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((HUB_HOST, 443), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    return bool(result and result[0])


ENGLISH_STOPWORDS_FALLBACK_NOTE = "materialised from scikit-learn's English stop-word list"


def _has_stopwords(root: Path) -> bool:
    return (root / "corpora" / "stopwords" / "english").is_file() or (
        root / "corpora" / "stopwords.zip"
    ).is_file()


def prepare_nltk() -> Path:
    """Make sure NLTK finds an English stop-word list without a download.

    Uses $NLTK_DATA when it already holds stopwords (tests point it at ../shared/data/nltk_data); otherwise a
    project-owned dir, filled from scikit-learn's stop-word list when empty. NLTK >= 3.10 refuses data dirs
    writable by others, so ours is created 0755.
    """
    for entry in filter(None, os.environ.get("NLTK_DATA", "").split(os.pathsep)):
        if _has_stopwords(Path(entry)):
            return Path(entry)
    own = cache_dir() / "nltk_data"
    stop_dir = own / "corpora" / "stopwords"
    if not _has_stopwords(own):
        stop_dir.mkdir(parents=True, exist_ok=True)
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        (stop_dir / "english").write_text("\n".join(sorted(ENGLISH_STOP_WORDS)) + "\n", encoding="utf-8")
        (stop_dir / "README").write_text(ENGLISH_STOPWORDS_FALLBACK_NOTE + "\n", encoding="utf-8")
    for p in (own, own / "corpora", stop_dir):
        os.chmod(p, 0o755)
    existing = os.environ.get("NLTK_DATA")
    os.environ["NLTK_DATA"] = os.pathsep.join(filter(None, [existing, str(own)]))
    return own


def prepare_textattack() -> Path:
    """Give TextAttack a cache whose post-install marker exists, so importing it downloads nothing."""
    ta_dir = Path(os.environ.get("TA_CACHE_DIR") or cache_dir() / "textattack")
    ta_dir.mkdir(parents=True, exist_ok=True)
    (ta_dir / "post_install_check_3").touch()
    os.environ["TA_CACHE_DIR"] = str(ta_dir)
    return ta_dir


_prepared = False


def prepare() -> None:
    """Idempotent: set offline switches and data dirs before transformers/NLTK/TextAttack import."""
    global _prepared
    if _prepared:
        return
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("DISABLE_TELEMETRY", "1")
    prepare_nltk()
    prepare_textattack()
    _prepared = True
