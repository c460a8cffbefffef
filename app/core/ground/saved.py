"""Saved sets: examples a researcher made (edits pinned beside their originals, a generator's edits) kept as a
named dataset that every dataset field and the command line's --dataset read as `saved:<name>`.

A set is one JSONL file in the cache folder, in the format any dataset file has (`text`, or `text_a` and `text_b`;
`label` where one was given), plus where each example came from (`origin`, `original`, `edits`), so it can also be
opened, shared or edited as a file. Locally the app and the command line share one folder. Hosted, each visitor's
sets live under their own unguessable key, which the set's name carries (`saved:<key>/<name>`): no visitor lists,
reads, overwrites or evicts another's, and the server keeps a bounded number of them for a bounded time.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError
from .policy import hosted
from .runtime import cache_dir

PREFIX = "saved:"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _-]{0,47}$")
KEY = re.compile(r"^[0-9a-f]{32}$")
# how many sets one owner keeps: locally a folder's worth; hosted, a visitor's few, and the server's total
MAX_SETS = {"local": 200, "visitor": 20, "server": 2000}
HOSTED_TTL_S = 24 * 3600  # hosted, a set older than a day is dropped when the next one is saved
_SECRET = secrets.token_bytes(32)  # per process: a visitor's key is not derivable from their session id alone


@dataclass(frozen=True)
class SavedSet:
    """One saved set as a front end lists it."""
    name: str
    spec: str  # what a dataset field and --dataset take
    n: int  # examples in it
    modified: float

    @property
    def label(self) -> str:
        """A dropdown's label: the name and size, never the key."""
        return f"saved «{self.name}» ({self.n:,} examples)"


def visitor_key(session: str) -> str:
    """A hosted visitor's key: derived from their session, so one session always finds its own sets, and from this
    process's secret, so nobody else can compute it."""
    return hmac.new(_SECRET, session.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:32]


def root() -> Path:
    return cache_dir() / "saved"


def _folder(key: str | None) -> Path:
    return root() / "hosted" / key if key else root()


def check_name(name, field: str = "name") -> str:
    if not isinstance(name, str):
        raise InputError(f"{field}: expected text, got {type(name).__name__}")
    name = name.strip()
    if not NAME.match(name):
        raise InputError(f"{field}: {name[:60]!r} can't name a saved set; use 1-48 letters, digits, spaces, - or _, "
                         "starting with a letter or digit")
    return name


def spec_of(name: str, key: str | None = None) -> str:
    return f"{PREFIX}{key}/{name}" if key else f"{PREFIX}{name}"


def is_saved(spec) -> bool:
    return isinstance(spec, str) and spec.startswith(PREFIX)


def parse(spec: str, *, visitor: bool = True) -> tuple[str | None, str]:
    """`saved:<name>` or `saved:<key>/<name>` -> (key, name), checked. Hosted, a visitor names their own key (their
    sets are listed with it); the server's own folder is the operator's, read by name on the command line."""
    rest = spec[len(PREFIX):].strip()
    key, sep, name = rest.partition("/")
    if not sep or not KEY.match(key):  # a plain name ("../x" is refused as a name)
        key, name = None, rest
    name = check_name(name, "dataset")
    if key is None and visitor and hosted():
        raise InputError(f"dataset: saved sets here are each visitor's own; pick «{name}» from the list after "
                         "saving it")
    return key, name


def path_of(spec: str, *, visitor: bool = True) -> Path:
    """The file a saved set's name reads, or an error that names the set and how to make it."""
    key, name = parse(spec, visitor=visitor)
    path = _folder(key) / f"{name}.jsonl"
    if not path.is_file():
        raise InputError(f"dataset: no saved set «{name}» here; save one from Counterfactuals (pin edits, then "
                         "'Save the pinned edits as a dataset') or write it with --save-as")
    return path


def _files(key: str | None) -> list[Path]:
    """An owner's set files (a name a set can have; not the files being written)."""
    folder = _folder(key)
    return [p for p in folder.glob("*.jsonl") if NAME.match(p.stem)] if folder.is_dir() else []


def listed(key: str | None = None) -> list[SavedSet]:
    """An owner's sets, the newest first."""
    out = []
    for p in _files(key):
        try:
            st = p.stat()
            with p.open("rb") as f:
                n = sum(1 for line in f if line.strip())
        except OSError:
            continue
        out.append(SavedSet(p.stem, spec_of(p.stem, key), n, st.st_mtime))
    return sorted(out, key=lambda s: -s.modified)


def _sweep_hosted(now: float) -> int:
    """Hosted: drop sets older than a day; the number of sets left on the server."""
    left = 0
    base = root() / "hosted"
    if not base.is_dir():
        return 0
    for owner in base.iterdir():
        for p in owner.glob("*.jsonl"):
            try:
                if now - p.stat().st_mtime > HOSTED_TTL_S:
                    p.unlink()
                else:
                    left += 1
            except OSError:
                continue
        try:
            owner.rmdir()  # only when empty
        except OSError:
            pass
    return left


def save(name: str, records: Sequence[dict], *, key: str | None = None) -> SavedSet:
    """Write `records` (each a dataset row: its text columns, and `label`, `origin`, `original`, `edits` where
    known) as the set `name` of owner `key` (None: the local folder), replacing a set of that name. Refused, with
    the cap named, where the owner or (hosted) the server holds its most sets."""
    name = check_name(name)
    if not records:
        raise InputError("edits: nothing to save; pin an edit first")
    folder = _folder(key)
    path = folder / f"{name}.jsonl"
    if not path.is_file():  # a new set, not one replaced
        mine = len(_files(key))
        cap = MAX_SETS["visitor" if key else "local"]
        if mine >= cap:
            raise InputError(f"name: {mine} saved sets already (the limit here is {cap}); reuse a name to replace "
                             "one")
        if key and _sweep_hosted(time.time()) >= MAX_SETS["server"]:
            raise InputError("name: this server holds its most saved sets; try again later")
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{name}.{secrets.token_hex(4)}.tmp"
    try:
        with tmp.open("w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        os.replace(tmp, path)  # a reader never sees half a set
    finally:
        tmp.unlink(missing_ok=True)
    return SavedSet(name, spec_of(name, key), len(records), path.stat().st_mtime)
