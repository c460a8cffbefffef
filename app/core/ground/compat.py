"""The shims that let libraries declaring older bounds import on today's stack (transformers 5, numpy 2), in one
place. Each is as small as what it answers: tests/test_stack.py imports through them in seconds, so an upgrade
that breaks one fails there first, by name.

- TextAttack imports flair on import (`textattack/shared/utils/strings.py`); flair 0.15.1 imports
  `LayoutLMv2FeatureExtractor` from transformers (`flair/embeddings/transformer.py`), a name transformers 5
  removed. flair uses it only in an `isinstance` test on a LayoutLM model's feature extractor, which no
  model here has: a class nothing is an instance of stands in for it.
- LIT 1.3.1 declares numpy < 2 and shap < 0.46; it runs on numpy 2 with shap >= 0.46 (the install's overrides,
  requirements-overrides.txt), with no shim.
- NLTK's WordNet reader maps the loaded WordNet onto itself at every load (`quick_wordnet`).
"""
from __future__ import annotations

import os
import sys

from .runtime import restore_environment


class _RemovedInTransformers5:
    """Stands in for a class transformers 5 removed, where a library only tests `isinstance` against it."""


def _flair_on_transformers_5() -> None:
    import transformers

    if "LayoutLMv2FeatureExtractor" not in vars(transformers):
        try:
            _ = transformers.LayoutLMv2FeatureExtractor  # transformers 4: the real one, loaded lazily
        except (AttributeError, ImportError):
            transformers.LayoutLMv2FeatureExtractor = _RemovedInTransformers5


# what TextAttack's import sets for the whole process (`set_cache_dir`, where TA_CACHE_DIR is set, as
# `runtime.prepare_textattack` does): the Hugging Face cache and XDG's, which moved this project's own cache folder
# (`runtime.cache_dir`: saved sets, embeddings) and every later process's Hugging Face cache into TextAttack's
ENVIRONMENT_KEPT = ("HF_HOME", "XDG_CACHE_HOME", "PYTORCH_TRANSFORMERS_CACHE")


def import_textattack():
    """`import textattack`, with flair's one removed name answered first and the process's cache settings kept
    (`ENVIRONMENT_KEPT`); raises what the import raises."""
    if sys.modules.get("textattack") is not None:  # (None there: the import is barred, and raises below)
        return sys.modules["textattack"]
    _flair_on_transformers_5()
    kept = {k: os.environ.get(k) for k in ENVIRONMENT_KEPT}
    try:
        import textattack  # noqa: PLC0415 - heavy (flair, NLTK): only attacks need it
    finally:
        restore_environment(kept)
    quick_wordnet()  # its WordNet swaps load WordNet on first use
    return textattack


def _corpus_root(name: str):
    """Where NLTK's loader of corpus `name` reads it from (a zip first, as `LazyCorpusLoader` looks), or None."""
    import nltk

    for where in (f"corpora/{name}.zip/{name}/", f"corpora/{name}"):
        try:
            return nltk.data.find(where)
        except LookupError:
            continue
    return None


def quick_wordnet() -> None:
    """NLTK's WordNet reader maps the Open Multilingual WordNet's synset ids (WordNet 3.0's, from the corpus named
    "wordnet") onto the WordNet it loads, at every load (`map_wn`: it compares the loaded version, "3.0", with that
    corpus's name, which never match), reading index.sense twice: ~4 of the load's ~7 CPU s, which a process's
    first WordNet swap or attack waited for. Where the corpus it maps from is the one loaded, that map is the
    identity, which NLTK writes `map30 = None`; its one reader, the multilingual tab files (`custom_lemmas`), then
    takes ids as they are, and English lookups never read it. Any other WordNet is mapped as before. Idempotent;
    for loads after it."""
    from nltk.corpus.reader import wordnet as reader

    cls = reader.WordNetCorpusReader
    if getattr(cls.map_wn, "onto_itself_skipped", False):
        return
    mapped = cls.map_wn

    def map_wn(self, version="wordnet"):
        source = _corpus_root(version)
        if source is not None and getattr(source, "path", source) == getattr(self.root, "path", self.root):
            return None  # the identity: the loaded WordNet is the one it maps from
        return mapped(self, version)

    map_wn.onto_itself_skipped = True
    cls.map_wn = map_wn


_quiet = False


def quiet_weight_loading() -> None:
    """transformers 5 draws a "Loading weights" bar on stderr for every model it loads (four for a pair and its
    twin): the command line's first line of stderr stopped being its own, and its progress bar was broken up.
    Only that bar is silenced (a download's progress is still drawn). Idempotent."""
    global _quiet
    if _quiet:
        return
    from transformers.utils import logging as hf_logging

    if hasattr(hf_logging, "set_tqdm_hook"):  # transformers 5; 4 drew no such bar
        previous = None

        def hook(factory, args, kwargs):
            if kwargs.get("desc") == "Loading weights" and (args or "iterable" in kwargs):
                # the bare iterable, no bar at all: even a disabled bar takes tqdm's console lock, and a load in
                # a server's thread waited forever where another thread had left that lock held (seen in a test
                # run: a model loading for /slices while the test's thread held it)
                return args[0] if args else kwargs["iterable"]
            return previous(factory, args, kwargs) if previous is not None else factory(*args, **kwargs)

        previous = hf_logging.set_tqdm_hook(hook)
    _quiet = True
