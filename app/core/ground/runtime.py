"""Process-wide set-up that must happen before heavy libraries import.

The hub is unreachable on many machines this tool runs on; every library that would otherwise try a download
(transformers, NLTK, TextAttack) is pointed at project-owned caches here, and hub reachability is decided once
with a short, bounded probe so that nothing ever hangs on a dead network.
"""
from __future__ import annotations

import os
import shutil
import socket
import threading
from functools import lru_cache
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[3]
ASSETS_DIR = PROJECT_ROOT / "assets"
# released corpora, CheckList suites and NLTK data, beside a checkout (or where ALBERT_LENS_SHARED_DATA says)
SHARED_DATA = Path(os.environ.get("ALBERT_LENS_SHARED_DATA") or PROJECT_ROOT.parent / "shared" / "data")
HUB_HOST = "huggingface.co"
HUB_PORT = 443


def cache_dir() -> Path:
    """Where the project keeps its own caches (embeddings, NLTK data, TextAttack's cache)."""
    base = os.environ.get("ALBERT_LENS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "albert-lens"
    )
    path = Path(base)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file there, a file on the way, no permission
        from .errors import InputError

        what = ("names a file, not a folder" if isinstance(exc, (FileExistsError, NotADirectoryError))
                else f"cannot be made ({type(exc).__name__})")
        where = ("ALBERT_LENS_CACHE" if os.environ.get("ALBERT_LENS_CACHE")
                 else "the cache folder (~/.cache/albert-lens)")
        raise InputError(f"{where} {what}: name a folder this user can write (ALBERT_LENS_CACHE=...)") from None
    return path


def restore_environment(saved: dict[str, str | None]) -> None:
    """Puts back settings as `saved` ({name: value, None where unset}) recorded them."""
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def env_flag(name: str) -> bool:
    """An on/off setting: on for 1, true, yes or on (any case); off for anything else, or unset."""
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


@lru_cache(maxsize=1)
def hub_reachable(timeout: float = 3.0) -> bool:
    """True when the Hugging Face hub answers a TCP connect within `timeout` seconds.

    DNS lookups ignore socket timeouts, so the probe runs in a daemon thread that we stop waiting for.
    HF_HUB_OFFLINE=1 short-circuits to False; ALBERT_LENS_ASSUME_ONLINE=1 skips the probe.
    """
    if env_flag("HF_HUB_OFFLINE") or env_flag("TRANSFORMERS_OFFLINE"):
        return False
    if env_flag("ALBERT_LENS_ASSUME_ONLINE"):
        return True
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((HUB_HOST, HUB_PORT), timeout=timeout):
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


LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body noun.cognition "
    "noun.communication noun.event noun.feeling noun.food noun.group noun.location noun.motive noun.object "
    "noun.person noun.phenomenon noun.plant noun.possession noun.process noun.quantity noun.relation noun.shape "
    "noun.state noun.substance noun.time verb.body verb.change verb.cognition verb.communication verb.competition "
    "verb.consumption verb.contact verb.creation verb.emotion verb.motion verb.perception verb.possession "
    "verb.social verb.stative verb.weather adj.ppl"
).split()
LEX_POS = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
DEBIAN_WORDNET = Path("/usr/share/wordnet")


def lexnames_text() -> str:
    """WordNet 3.0's `lexnames` (lexicographer file numbers, from wndb(5)); Debian's wordnet-base leaves it out."""
    return "".join(f"{i:02d}\t{name}\t{LEX_POS[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES))


def _nltk_dirs() -> list[Path]:
    return [Path(p) for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]


def _has_wordnet(root: Path) -> bool:
    return (root / "corpora" / "wordnet" / "data.noun").is_file() or (root / "corpora" / "wordnet.zip").is_file()


@lru_cache(maxsize=1)
def pos_tagger_available() -> bool:
    """Whether NLTK's perceptron tagger and its universal tagset load (they are beside the checkout, not in
    the venv): TextFooler's part-of-speech constraint and POS-matched WordNet swaps need them."""
    prepare_nltk()
    try:
        import nltk  # deferred: NLTK and its data: only WordNet and tagging paths

        nltk.pos_tag(["a", "test"], tagset="universal")
        return True
    except LookupError:
        return False


def wordnet_available() -> bool:
    return any(_has_wordnet(d) for d in _nltk_dirs())


def prepare_nltk() -> Path:
    """Make NLTK find an English stop-word list, and WordNet when Debian's wordnet-base is installed, offline.

    Keeps any $NLTK_DATA, then ../shared/data/nltk_data when it is beside the checkout (`./run test` set it for the
    tests only, so the app had no tagger), and appends a project-owned dir, filled
    when nothing else provides: stop words from scikit-learn's list; WordNet from /usr/share/wordnet plus a
    generated `lexnames`. NLTK >= 3.10 refuses data dirs writable by others, so ours are 0755.
    """
    own = cache_dir() / "nltk_data"
    existing = [d for d in _nltk_dirs() if d != own]
    beside = SHARED_DATA / "nltk_data"  # its tagger gives WordNet swaps their part of speech, in every command
    if beside.is_dir() and beside.resolve() not in {d.resolve() for d in existing}:
        existing.append(beside)
    corpora = own / "corpora"
    corpora.mkdir(parents=True, exist_ok=True)
    if not any(_has_stopwords(d) for d in existing + [own]):
        stop_dir = corpora / "stopwords"
        stop_dir.mkdir(exist_ok=True)
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS  # deferred: scikit-learn: loaded on first use

        (stop_dir / "english").write_text("\n".join(sorted(ENGLISH_STOP_WORDS)) + "\n", encoding="utf-8")
        (stop_dir / "README").write_text(ENGLISH_STOPWORDS_FALLBACK_NOTE + "\n", encoding="utf-8")
    own_wn = corpora / "wordnet" / "data.noun"
    if (own_wn.is_symlink() or not any(_has_wordnet(d) for d in existing + [own])) \
            and (DEBIAN_WORDNET / "data.noun").is_file():
        wn = corpora / "wordnet"
        wn.mkdir(exist_ok=True)
        for f in DEBIAN_WORDNET.iterdir():  # copies: NLTK refuses symlinks that leave its data root
            dest = wn / f.name
            if f.is_file() and (dest.is_symlink() or not dest.exists()):
                dest.unlink(missing_ok=True)
                shutil.copyfile(f, dest)
        (wn / "lexnames").write_text(lexnames_text(), encoding="utf-8")
    for p in [own, *own.rglob("*")]:
        if p.is_dir():
            os.chmod(p, 0o755)
    os.environ["NLTK_DATA"] = os.pathsep.join(str(d) for d in existing + [own])
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
    from .errors import InputError

    try:
        prepare_nltk()
        prepare_textattack()
    except InputError:
        return  # an unusable cache folder: said by the first command that needs it (the CLI's `main` asks first)
    _prepared = True


LOG_LINE_CHARS = 2000
_BOUNDED = False


def bounded_log_lines(limit: int = LOG_LINE_CHARS) -> None:
    """Every log record of this process cut to `limit` characters when it is made, whichever library logs it and
    whichever handler writes it: LIT logged each rejected input whole (one 10 MB request, 10 MB of log), and a
    server's log is a visitor's to fill otherwise. Idempotent."""
    import logging

    global _BOUNDED
    if _BOUNDED:
        return
    _BOUNDED = True
    make = logging.getLogRecordFactory()

    def bounded(*args, **kwargs):
        record = make(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logging's to report, as before
            return record
        if len(message) > limit:
            record.msg = f"{message[:limit]}… ({len(message):,} characters, cut)"
            record.args = None
        return record

    logging.setLogRecordFactory(bounded)
