"""CheckList behavioural suites on both models, with labels mapped by name.

The released suites (sentiment, QQP) load from their data-only JSON export; the original pickles need Python 3.7.
Where the export lost a test's expectation function, it is re-implemented from the test's name and type as
CheckList defines them: MFT compares with the labels (or a rule such as "not negative"); INV wants the prediction
unchanged; DIR wants the confidence not to move the wrong way by more than CheckList's tolerance (0.1).

Binary sentiment models meet a 3-class suite (0 negative, 1 neutral, 2 positive): a positive-class probability in
[1/3, 2/3] counts as neutral, and a binary model's "neutral confidence" is 1 - |p(pos) - p(neg)|. Labels are
matched by *name* ("positive", "duplicate"), never by index: the study's run compared against "POSITIVE" on
models whose configs have no label names, and so failed "single positive words" 100% for every model.
"""
from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..declare.results import ChecklistResult
from ..execution.engine import Engine
from ..execution.inference import from_logits, logits_batch, predict
from ..execution.inputs import dataset_of
from ..execution.pair import Pair
from ..ground.data import DataError, Example, TooManyDigits, blank_reason, check_file, short_int
from ..ground.errors import InputError
from ..ground.policy import limits, readable
from ..ground.runtime import SHARED_DATA
from ..ground.significance import holm, mcnemar_exact
from ..models.loading import ModelHead

TOLERANCE = 0.1
SENTIMENT = ("negative", "neutral", "positive")
QQP = ("not_duplicate", "duplicate")


@dataclass
class Test:
    name: str
    type: str  # MFT, INV, DIR
    capability: str
    description: str
    data: list  # MFT: inputs; INV/DIR: cases, each a list of inputs (first = original)
    labels: int | list | None
    run_idxs: list[int] | None = None
    expectation: str = ""  # how the expectation was obtained, shown in reports
    rows: list[int] | None = None  # a dataset's perturbations: case i's row in the dataset (its own numbers)


@dataclass
class Suite:
    name: str
    kind: str  # "sentiment" or "qqp"
    tests: list[Test]
    source: str = ""


MAX_SUITE_BYTES = 256 * 2**20  # ten times the largest released suite (QQP, 26 MB of JSON)
# JSON objects and lists in a suite, counted by their opening brackets before parsing (brackets inside texts count
# too, so it errs towards refusing): QQP's has 236,000. Parsed, 240 MB of `{},` took a worker to 7 GB.
MAX_SUITE_CONTAINERS = 2_000_000


def load_suite(path: str | Path, max_chars: int | None = None) -> Suite:
    """A released CheckList suite from its data-only JSON(.gz) export. Checked before any model runs: a regular
    file within the size limit, a non-empty list of tests, each with its fields, a non-empty list of cases of
    text (each at most `max_chars` long, when given); anything else is a `DataError` naming the test and case."""
    path = Path(path)
    if path.suffix == ".pkl" or path.name.endswith(".tar.gz"):
        raise DataError(f"{path}: pickled CheckList suites don't load on Python 3.11 (and unpickling files is unsafe); "
                        "use the data-only export (*_suite.json.gz)")
    check_file(path)
    try:
        with (gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")) as fh:
            raw = fh.read(MAX_SUITE_BYTES + 1)  # bounded: a small .gz can inflate to gigabytes
        if len(raw) > MAX_SUITE_BYTES:
            raise DataError(f"{path}: the suite is larger than {MAX_SUITE_BYTES // 2**20} MB once decompressed; "
                            "the released ones are at most 26 MB")
        containers = raw.count(b"{") + raw.count(b"[")
        if containers > MAX_SUITE_CONTAINERS:
            raise DataError(f"{path}: {containers:,} JSON objects and lists; a suite here has at most "
                            f"{MAX_SUITE_CONTAINERS:,} (the released QQP suite, the largest, has 236,000)")
        obj = json.loads(raw.decode("utf-8"), parse_int=short_int)
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError, TooManyDigits, RecursionError) as exc:
        raise DataError(f"{path}: not a CheckList JSON export ({type(exc).__name__}: {str(exc)[:120]})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("tests"), list):
        raise DataError(f"{path}: expected an object with a 'tests' list")
    if not obj["tests"]:
        raise DataError(f"{path}: the suite has no tests")
    kind = _kind(obj["tests"], path)
    n_labels = len(label_names(kind))
    tests = []
    for i, t in enumerate(obj["tests"]):
        if not isinstance(t, dict):
            raise DataError(f"{path}: test {i + 1} is not an object")
        missing = [k for k in ("name", "type", "capability", "data") if k not in t]
        if missing:
            raise DataError(f"{path}: test {i + 1} lacks {missing}")
        name = t["name"]
        if not isinstance(name, str) or not isinstance(t["capability"], str):
            raise DataError(f"{path}: test {i + 1}: 'name' and 'capability' must be text")
        if t["type"] not in ("MFT", "INV", "DIR"):
            raise DataError(f"{path}: test {name[:80]!r} has unknown type {str(t['type'])[:20]!r}")
        _check_cases(path, name, t["data"], max_chars)
        labels, run_idxs = t.get("labels"), t.get("run_idxs")
        _check_labels(path, name, labels, t["data"], n_labels)
        if run_idxs is not None and not (isinstance(run_idxs, list)
                                         and all(isinstance(k, int) and k >= 0 for k in run_idxs)):
            raise DataError(f"{path}: test {name[:80]!r}: 'run_idxs' must be a list of case numbers")
        tests.append(Test(name, t["type"], t["capability"], str(t.get("description") or ""), t["data"],
                          labels, run_idxs))
    return Suite(str(obj.get("suite") or path.stem), kind, tests, str(path))


def _kind(tests: list, path: Path) -> str:
    """The suite's label space: QQP's cases are question pairs, the sentiment suite's single texts."""
    first = tests[0].get("data") if isinstance(tests[0], dict) else None
    first = first[0] if isinstance(first, list) and first else None
    return "qqp" if (isinstance(first, list) or "qqp" in path.name.lower()) else "sentiment"


def _check_labels(path: Path, name: str, labels, data: list, n_labels: int) -> None:
    """A test's labels: none, one class number for every case, or one per case; a case's own may be a list of
    class numbers (QQP's implications: one per question pair). A class number is a whole number from 0 to the
    suite's last label: -1 once read silently as the last ("positive"), 7 failed inside the run."""
    where = f"{path}: test {name[:80]!r}"
    allowed = f"a class number from 0 to {n_labels - 1}"

    def in_range(x, place: str) -> None:
        if isinstance(x, bool) or not isinstance(x, int):
            raise DataError(f"{where}{place}: label {str(x)[:40]!r} is not {allowed}")
        if not 0 <= x < n_labels:
            raise DataError(f"{where}{place}: label {x if abs(x) < 10**9 else 'of ' + str(len(str(x))) + ' digits'} "
                            f"is out of range; give {allowed}")

    if labels is None:
        return
    if isinstance(labels, list):
        if len(labels) != len(data):
            raise DataError(f"{where}: 'labels' has {len(labels):,} entries for {len(data):,} cases; give one per "
                            "case or one class number")
        for k, lab in enumerate(labels):
            if isinstance(lab, list):
                size = len(data[k]) if isinstance(data[k], list) else 1
                if not lab or len(lab) > size:
                    raise DataError(f"{where}, case {k}: {len(lab)} labels for a case of {size} input(s)")
                for x in lab:
                    in_range(x, f", case {k}")
            else:
                in_range(lab, f", case {k}")
        return
    in_range(labels, "")


def _check_cases(path: Path, name: str, data, max_chars: int | None) -> None:
    """Every case is text, a question pair, or a list of those (INV/DIR), within the text cap."""
    if not isinstance(data, list) or not data:
        raise DataError(f"{path}: test {name[:80]!r}: 'data' must be a non-empty list of cases")

    def texts(x, depth=0):
        if isinstance(x, str):
            yield x
        elif isinstance(x, list) and depth < 2 and x:
            for y in x:
                yield from texts(y, depth + 1)
        else:
            raise DataError(f"{path}: test {name[:80]!r}: case {str(x)[:60]!r} is not text or a list of texts")

    for k, case in enumerate(data):
        for text in texts(case):
            if (why := blank_reason(text)) is not None:  # the docs promise its place
                raise DataError(f"{path}: test {name[:80]!r}, case {k}: a text {why}")
            if max_chars is not None and len(text) > max_chars:
                raise DataError(f"{path}: test {name[:80]!r}, case {k}: a text of {len(text):,} characters; the "
                                f"limit here is {max_chars:,}")


def default_suites(pair) -> list[str]:
    """The released CheckList suite the pair's models can answer, read from their labels (a pair given by path
    has its task from its configs, not a preset's name): sentiment for one text with negative/positive, QQP for
    two texts with QQP's labels; none for other tasks (RTE, MRPC, ...)."""
    task = pair.task
    labels = {str(lab).lower() for lab in (task.labels or ())}
    if task.two_texts:
        name = "qqp_suite.json.gz" if labels == set(QQP) else None
    else:
        name = "sentiment_suite.json.gz" if {"negative", "positive"} <= labels else None
    path = SHARED_DATA / "checklist" / name if name else None
    return [str(path)] if path is not None and path.is_file() else []


# ------------------------------------------------------------------ predictions in the suite's label space


@dataclass
class Space:
    """A model's predictions mapped to the suite's classes: preds (n,), confs (n, k)."""

    preds: np.ndarray
    confs: np.ndarray


def sentiment_space(clf: ModelHead, probs: np.ndarray) -> Space:
    labels = [lab.lower() for lab in clf.labels]
    if set(labels) >= {"negative", "positive"} and "neutral" not in labels:
        p_pos, p_neg = probs[:, labels.index("positive")], probs[:, labels.index("negative")]
        preds = np.where(p_pos > 2 / 3, 2, np.where(p_pos < 1 / 3, 0, 1))
        confs = np.stack([p_neg, 1 - np.abs(p_pos - p_neg), p_pos], 1)
        return Space(preds, confs)
    if set(labels) >= set(SENTIMENT):
        confs = probs[:, [labels.index(s) for s in SENTIMENT]]
        return Space(confs.argmax(1), confs)
    raise InputError(f"suite: the sentiment suite needs a model with 'negative'/'positive' labels; "
                     f"{clf.name} predicts {list(clf.labels)}")


def qqp_space(clf: ModelHead, probs: np.ndarray) -> Space:
    labels = [lab.lower() for lab in clf.labels]
    if set(labels) != set(QQP):
        raise InputError(f"suite: the QQP suite needs a model with labels {list(QQP)}; {clf.name} predicts "
                         f"{list(clf.labels)}")
    confs = probs[:, [labels.index(s) for s in QQP]]
    return Space(confs.argmax(1), confs)


# ------------------------------------------------------------------ expectations


# (passed; None = filtered out), detail: a string, or a function that writes it, called only for the failures a
# result shows (every case wrote its sentence, 154,104 of them for the sentiment suite, and few are shown)
Outcome = tuple[bool | None, str | Callable[[], str]]


def detail_text(detail: str | Callable[[], str]) -> str:
    """An outcome's detail as words (written only now where the expectation left a function)."""
    return detail() if callable(detail) else detail


def label_names(kind: str) -> tuple[str, ...]:
    """The suite's label space in index order: failure details name labels, not indices."""
    return SENTIMENT if kind == "sentiment" else QQP


def _said(preds, names: Sequence[str]) -> str:
    return ", ".join(names[int(p)] for p in np.atleast_1d(preds))


@dataclass
class Cases:
    """A test's cases laid end to end for one model: each row an input of a case (a case's original first),
    `starts` where each case begins, `case` each row's case, `labels` each case's own label(s) or None. Every
    case has at least one input."""

    preds: np.ndarray  # (rows,)
    confs: np.ndarray  # (rows, classes)
    starts: np.ndarray  # (cases,)
    case: np.ndarray  # (rows,): each row's case
    labels: list | None

    @property
    def first(self) -> np.ndarray:
        return self.starts[self.case]

    def every(self, good: np.ndarray) -> np.ndarray:
        """Per case: whether `good` holds on every one of its rows."""
        return np.logical_and.reduceat(good, self.starts)


# An expectation's twin over all cases at once (`Cases` -> passed per case, and which cases are tested; None:
# take the cases one at a time), attached to the per-case expectation as `.over`: the sentiment suite's 172,840
# per-case calls for two models were most of its bookkeeping.
Over = Callable[[Cases], tuple[np.ndarray, np.ndarray] | None]


def _with_over(expect: Callable, over: Over) -> Callable:
    expect.over = over
    return expect


def _all_tested(c: Cases) -> np.ndarray:
    return np.ones(len(c.starts), dtype=bool)


def _mft_label(label: int, names: Sequence[str]) -> Callable:
    def expect(preds, confs, case_labels=None) -> Outcome:
        return bool((preds == label).all()), lambda: f"expected {names[label]}, got {_said(preds, names)}"
    return _with_over(expect, lambda c: (c.every(c.preds == label), _all_tested(c)))


def _mft_own_labels(c: Cases) -> tuple[np.ndarray, np.ndarray]:
    """MFT with a label per case (`test.labels` a list): every input of a case must get its label."""
    return c.every(c.preds == np.asarray(c.labels)[c.case]), _all_tested(c)


def _monotonic(label: int | None, increasing: bool, names: Sequence[str], tol: float = TOLERANCE) -> Callable:
    def expect(preds, confs, case_labels=None) -> Outcome:
        k = int(preds[0]) if label is None else label
        delta = confs[1:, k] - confs[0, k]
        ok = (delta >= -tol) if increasing else (delta <= tol)
        moved = delta.min() if increasing else delta.max()
        return bool(ok.all()), lambda: f"confidence in {names[k]} moved by {moved:+.3f}"

    def over(c: Cases) -> tuple[np.ndarray, np.ndarray]:
        first = c.first
        k = c.preds[first] if label is None else np.full(len(c.preds), label)
        delta = c.confs[np.arange(len(c.preds)), k] - c.confs[first, k]  # 0 on a case's first row: passes
        return c.every((delta >= -tol) if increasing else (delta <= tol)), _all_tested(c)
    return _with_over(expect, over)


def _inv(names: Sequence[str]) -> Callable:
    def expect(preds, confs, case_labels=None) -> Outcome:
        return bool((preds[1:] == preds[0]).all()), lambda: f"predictions {_said(preds, names)}"
    return _with_over(expect, lambda c: (c.every(c.preds == c.preds[c.first]), _all_tested(c)))


def _all_equal(value: int, only_if_original: int | None = None, skip_first: bool = False) -> Callable:
    def expect(preds, confs, case_labels=None) -> Outcome:
        if only_if_original is not None and preds[0] != only_if_original:
            return None, "original not predicted as the test requires"
        rest = preds[1:] if skip_first else preds
        return bool((rest == value).all()), lambda: f"predictions {_said(preds, QQP)}"

    def over(c: Cases) -> tuple[np.ndarray, np.ndarray]:
        good = c.preds == value
        if skip_first:
            good[c.starts] = True
        tested = _all_tested(c) if only_if_original is None else c.preds[c.starts] == only_if_original
        return c.every(good), tested
    return _with_over(expect, over)


def _implications(preds, confs, case_labels=None) -> Outcome:
    """f(x,a)=1, f(x,b)=1 => f(a,b)=1; f(x,a)=1, f(x,b)=0 => f(a,b)=0; cases with a wrong f(x,.) are filtered."""
    la, lb = case_labels[0], case_labels[1]
    if preds[0] != la or preds[1] != lb:
        return None, "f(x, a) or f(x, b) predicted wrongly"
    if la == 1 and lb == 1:
        return bool(preds[2] == 1), f"f(a, b) = {QQP[preds[2]]}, expected {QQP[1]}"
    if la != lb:
        return bool(preds[2] == 0), f"f(a, b) = {QQP[preds[2]]}, expected {QQP[0]}"
    return None, "no implication when both are 0"


def _implications_over(c: Cases) -> tuple[np.ndarray, np.ndarray] | None:
    """`_implications` on every case at once, where each case has its three inputs f(x, a), f(x, b), f(a, b)
    (else None: one case at a time)."""
    if c.labels is None or len(c.preds) != 3 * len(c.starts) or (np.diff(c.starts) != 3).any():
        return None
    la, lb = (np.asarray([lab[j] for lab in c.labels]) for j in (0, 1))
    p0, p1, p2 = (c.preds[c.starts + j] for j in range(3))
    tested = (p0 == la) & (p1 == lb) & ((la != lb) | ((la == 1) & (lb == 1)))
    return np.where(la == lb, p2 == 1, p2 == 0), tested


_implications.over = _implications_over


def expectation(test: Test, kind: str) -> tuple[Callable, str]:
    """The expectation for a test, with a note saying where it came from."""
    name = test.name.lower()
    names = label_names(kind)
    if test.type == "MFT":
        if isinstance(test.labels, int):
            return _mft_label(test.labels, names), f"label {names[test.labels]} (from the suite)"
        if isinstance(test.labels, list):
            return None, "per-example labels (from the suite)"  # handled per case
        if kind == "sentiment" and ("not negative" in name or "negative, but it was not" in name
                                    or "negation of negative" in name):
            def not_negative(preds, confs, case_labels=None) -> Outcome:
                return bool((preds != 0).all()), lambda: f"expected neutral or positive, got {_said(preds, names)}"
            return _with_over(not_negative, lambda c: (c.every(c.preds != 0), _all_tested(c))), \
                "rule 'not negative' (re-implemented from the test name)"
        raise InputError(f"suite: no expectation known for MFT test {test.name!r}")
    if test.type == "INV":
        return _inv(names), "prediction unchanged (INV)"
    # DIR
    if kind == "sentiment":
        table = {
            "intensifiers": (None, True, "confidence in the original prediction must not drop"),
            "reducers": (1, True, "neutral confidence must not drop"),
            "add positive phrases": (2, True, "positive confidence must not drop"),
            "add negative phrases": (0, True, "negative confidence must not drop"),
            '"used to" should reduce': (None, False, "confidence in the original prediction must not rise"),
        }
        if test.name in table:
            label, inc, why = table[test.name]
            return _monotonic(label, inc, names), f"{why} by more than {TOLERANCE} (DIR, re-implemented)"
    else:
        if name.startswith("change") and "one of the questions" in name:
            return _all_equal(0, only_if_original=1, skip_first=True), \
                "originally duplicate, perturbed must be non-duplicate (DIR, re-implemented)"
        if "gibberish" in name:
            return _all_equal(0, skip_first=True), "perturbed must be non-duplicate (DIR, re-implemented)"
        if "paraphrase" in name:
            return _all_equal(1), "every (q, paraphrase(q)) must be duplicate (DIR, re-implemented)"
        if "implications" in name:
            return _implications, "f(x,a), f(x,b) imply f(a,b) (DIR, re-implemented)"
    raise InputError(f"suite: no expectation known for DIR test {test.name!r}")


# ------------------------------------------------------------------ running


def _key(x) -> tuple[str, ...]:
    return tuple(x) if isinstance(x, list | tuple) else (x,)


def _is_input(x, kind: str) -> bool:
    if kind == "qqp":
        return isinstance(x, list | tuple) and len(x) == 2 and all(isinstance(t, str) for t in x)
    return isinstance(x, str)


def case_inputs(test: Test, i: int, kind: str) -> list:
    """The inputs of case i: one input for a plain MFT item, else the case's list (first = original)."""
    item = test.data[i]
    if test.type == "MFT" and _is_input(item, kind):
        return [item]
    bad = [x for x in item if not _is_input(x, kind)]
    if bad:
        raise DataError(f"suite: test {test.name!r}, case {i}: {str(bad[0])[:80]!r} is not a "
                        f"{'question pair' if kind == 'qqp' else 'text'}")
    return list(item)


def _cases(test: Test, sample: int | None, seed: int, left_out: set[int] = frozenset()) -> list[int]:
    """The cases a test runs: `sample` of them (CheckList's own run_idxs first, else a seeded draw) from those
    not `left_out`."""
    n = len(test.data)
    pool = [i for i in range(n) if i not in left_out]
    if not sample or sample >= len(pool):
        return pool
    if test.run_idxs:  # short of `sample` only where cases were left out: then a draw from those left
        picked = [i for i in test.run_idxs if i < n and i not in left_out][:sample]
        if len(picked) == sample or not left_out:
            return picked
    return sorted(np.random.default_rng(seed).choice(pool, size=sample, replace=False).tolist())


@dataclass
class TestResult:
    name: str
    type: str
    capability: str
    description: str
    expectation: str
    results: list[dict] = field(default_factory=list)  # per model: n, failed, fail_rate, examples
    paired: dict = field(default_factory=dict)  # two models: cases both were tested on, McNemar's exact test
    # why cases (or the whole test) were left out: they expect a label a model does not predict
    left_out: str | None = None
    # a dataset's perturbations: every case run, its row, inputs and whether each model passed
    cases: list[dict] | None = None


def _expected(test: Test, i: int) -> set[int]:
    """The labels an MFT case must be given (none for other types, whose expectations are rules)."""
    if test.type != "MFT" or test.labels is None:
        return set()
    lab = _case_labels(test, i)
    return {x for x in (lab if isinstance(lab, list | tuple) else [lab]) if isinstance(x, int)}


def absent_labels(models: Sequence[ModelHead], names: Sequence[str]) -> dict[int, list[str]]:
    """The suite's labels some model does not predict, each with those models: a binary sentiment model has no
    "neutral", and a test expecting it would score the model on a class it cannot give (CheckList's mapping of
    a probability between 1/3 and 2/3 to neutral made "neutral words in context" fail 66.7-100% for both)."""
    out = {}
    for k, name in enumerate(names):
        lacking = [m.name for m in models if name.lower() not in {str(x).lower() for x in m.labels}]
        if lacking:
            out[k] = lacking
    return out


def _left_out_reason(names: Sequence[str], absent: dict[int, list[str]], labels: set[int], dropped: int,
                     total: int) -> str:
    said = " and ".join(f"'{names[k]}'" for k in sorted(labels))
    who = list(dict.fromkeys(m for k in sorted(labels) for m in absent[k]))  # the pair's order
    which = " and ".join(who)
    what = "every case" if dropped == total else f"{dropped:,} of {total:,} cases"
    verb = "expects" if dropped in (1, total) else "expect"
    return (f"{what} {verb} {said}, which {which} "
            f"{'does' if len(who) == 1 else 'do'} not predict: left out")


def run_suite(suite: Suite, models: Sequence[ModelHead], *, sample: int | None = None, seed: int = 0,
              n_examples: int = 3, progress=None,
              probabilities: Callable[[list[Example]], list[np.ndarray]] | None = None) -> list[TestResult]:
    """Every test on every model; each distinct input is predicted once per model, in process or by
    `probabilities` (inputs -> one probability array per model), e.g. on a Ray engine; with it, `models` may be
    heads alone (`loading.ModelHead`), else they must be loaded `Classifier`s."""
    space_fn = sentiment_space if suite.kind == "sentiment" else qqp_space
    n_fields = 2 if suite.kind == "qqp" else 1
    names = label_names(suite.kind)
    for clf in models:
        if len(clf.task.fields) != n_fields:
            raise InputError(f"suite: {suite.name} needs a {'pair' if n_fields == 2 else 'single-text'} task; "
                             f"{clf.name} takes {len(clf.task.fields)} field(s)")
        space_fn(clf, np.full((1, len(clf.labels)), 1 / len(clf.labels)))  # label check before heavy work
    plan = []
    uniq: dict[tuple[str, ...], int] = {}
    absent = absent_labels(models, names)
    for test in suite.tests:
        fn, how = expectation(test, suite.kind)
        test.expectation = how
        cases = []  # (case index, its inputs' keys, their rows in `inputs`)
        # a case expecting a label a model cannot give is left out, for both models (the paired test stays
        # paired), before the sample is drawn: the sample is of the cases that can be scored
        missing, dropped = set(), set()
        for i in range(len(test.data)) if absent else ():
            lacking = _expected(test, i) & absent.keys()
            if lacking:
                missing |= lacking
                dropped.add(i)
        for i in _cases(test, sample, seed, dropped):
            keys = [_key(x) for x in case_inputs(test, i, suite.kind)]
            cases.append((i, keys, [uniq.setdefault(k, len(uniq)) for k in keys]))
        why = _left_out_reason(names, absent, missing, len(dropped), len(test.data)) if missing else None
        plan.append((test, fn, cases, why))
    inputs = [Example(k) for k in uniq]
    if not inputs:  # every case left out (each expects a label no model here predicts): nothing to predict
        all_probs = [np.empty((0, len(clf.labels))) for clf in models]
    elif probabilities is not None:
        all_probs = probabilities(inputs)
    else:
        all_probs = []
        for m, clf in enumerate(models):
            step = (lambda d, n, m=m: progress(m * n + d, len(models) * n)) if progress else None
            all_probs.append(predict(clf, inputs, batch_size=64, progress=step, validate=False).probs)
    spaces = [space_fn(clf, probs) for clf, probs in zip(models, all_probs)]
    out = []
    for test, fn, cases, why in plan:
        tr = TestResult(test.name, test.type, test.capability, test.description, test.expectation, left_out=why)
        outcomes = []  # per model, case index -> passed, for the paired test
        layout = _layout(cases)
        for clf, sp in zip(models, spaces):
            ok, tested = _judged(test, fn, cases, layout, sp, names)
            at = np.flatnonzero(tested)
            failing = at[~ok[at]]
            examples = []
            for pos in failing[:n_examples]:  # the failures a result shows, with their details in words
                i, keys, rows = cases[pos]
                examples.append({"inputs": [list(k) for k in keys],
                                 "detail": detail_text(_case_outcome(test, fn, i, rows, sp, names)[1]),
                                 **({"row": test.rows[i]} if test.rows is not None else {})})
            n, failed = len(at), len(failing)
            tr.results.append({"model": clf.name, "n": n, "failed": failed,
                               "fail_rate": failed / n if n else None, "examples": examples})
            outcomes.append({cases[pos][0]: bool(ok[pos]) for pos in at})
        if len(outcomes) == 2 and cases:
            tr.paired = paired_failures(*outcomes)
        if test.rows is not None:
            tr.cases = [{"row": test.rows[i], "inputs": [list(k) for k in keys],
                         "passed": [o.get(i) for o in outcomes]} for i, keys, _ in cases]
        out.append(tr)
    scored = [r for r in out if r.paired]  # Holm over the tests that were run: one left out whole is no test
    if scored:
        for r, adj in zip(scored, holm([r.paired["p_value"] for r in scored])):
            r.paired["p_holm"] = adj
    return out


def _case_labels(test: Test, i: int):
    return test.labels[i] if isinstance(test.labels, list) else test.labels


def _case_outcome(test: Test, fn, i: int, rows, sp: Space, names: Sequence[str]) -> Outcome:
    """Case `i`'s outcome by its per-case expectation (`fn`; None: the case's own MFT label)."""
    labels = _case_labels(test, i)
    expect = _mft_label(labels, names) if fn is None else fn
    return expect(sp.preds[rows], sp.confs[rows], labels)


def _layout(cases: list) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """A test's cases' rows laid end to end: (rows, where each case starts, each row's case); None when a case
    has no input (the per-case checks say what is wrong with it)."""
    lengths = np.fromiter((len(rows) for _, _, rows in cases), dtype=np.int64, count=len(cases))
    if not len(cases) or not lengths.all():
        return None
    flat = np.fromiter((r for _, _, rows in cases for r in rows), dtype=np.int64, count=int(lengths.sum()))
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return flat, starts, np.repeat(np.arange(len(cases)), lengths)


VECTORISED = True  # off: one case at a time, the reference the tests hold the checks over all cases to


def _judged(test: Test, fn, cases: list, layout, sp: Space, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(passed, tested) per case for one model: every case at once where the expectation has its `over` twin, else
    one case at a time."""
    over = _mft_own_labels if fn is None else getattr(fn, "over", None)
    if VECTORISED and over is not None and layout is not None:
        flat, starts, case = layout
        labels = [_case_labels(test, i) for i, _, _ in cases] if isinstance(test.labels, list) else None
        judged = over(Cases(sp.preds[flat], sp.confs[flat], starts, case, labels))
        if judged is not None:
            return judged
    ok, tested = np.zeros(len(cases), dtype=bool), np.zeros(len(cases), dtype=bool)
    for pos, (i, _, rows) in enumerate(cases):
        passed = _case_outcome(test, fn, i, rows, sp, names)[0]
        if passed is not None:
            ok[pos], tested[pos] = passed, True
    return ok, tested


def paired_failures(first: dict[int, bool], second: dict[int, bool]) -> dict:
    """The two models' failures on the cases both were tested on: McNemar's exact test of "they fail equally
    often", from the cases exactly one of them fails (a case one model skips, e.g. its original prediction is
    not what the test needs, is left out)."""
    both = sorted(first.keys() & second.keys())
    only = [sum(not first[i] and second[i] for i in both), sum(first[i] and not second[i] for i in both)]
    return {"n": len(both), "only_failed": only, "p_value": mcnemar_exact(*only)}


def by_capability(results: list[TestResult]) -> dict[str, list[TestResult]]:
    groups: dict[str, list[TestResult]] = {}
    for r in results:
        groups.setdefault(r.capability, []).append(r)
    return groups


def differing_tests(results: list[TestResult], alpha: float = 0.05) -> list[TestResult]:
    """Tests on which the two models' fail rates differ beyond chance across the whole suite (Holm)."""
    return [t for t in results if t.paired.get("p_holm") is not None and t.paired["p_holm"] < alpha]


def to_dict(results: list[TestResult]) -> list[dict]:
    return [r.__dict__ for r in results]


# ------------------------------------------------------------------ CheckList's perturbations of a dataset

# CheckList's robustness tests (the released sentiment suite's INV tests: typos, contractions, punctuation, URLs and
# handles), made from a dataset's own rows instead of the suite's tweets, each case keeping its row
CONTRACTIONS = {"is not": "isn't", "are not": "aren't", "was not": "wasn't", "were not": "weren't",
                "do not": "don't", "does not": "doesn't", "did not": "didn't", "can not": "can't",
                "cannot": "can't", "will not": "won't", "would not": "wouldn't", "should not": "shouldn't",
                "could not": "couldn't", "have not": "haven't", "has not": "hasn't", "it is": "it's",
                "that is": "that's", "i am": "i'm", "you are": "you're", "they are": "they're", "we are": "we're",
                "there is": "there's", "what is": "what's", "i have": "i've", "i will": "i'll", "let us": "let's"}
# each contraction and its expansion, either way ("cannot" is not what "can't" expands to), longest first
_CONTRACTED = {**CONTRACTIONS, **{v: k for k, v in CONTRACTIONS.items() if k != "cannot"}}
_CONTRACTABLE = re.compile(r"\b(" + "|".join(re.escape(k) for k in sorted(_CONTRACTED, key=len, reverse=True))
                           + r")\b", re.I)
MIN_ROWS = 5  # a dataset's perturbation suite needs a few rows to be a test


def _typos(text: str, rng: np.random.Generator, n: int) -> str | None:
    """`n` swaps of two neighbouring characters inside words of 3+ letters (CheckList's `Perturb.add_typos`)."""
    chars = list(text)
    spots = [i for i in range(len(chars) - 1) if chars[i].isalpha() and chars[i + 1].isalpha()
             and chars[i] != chars[i + 1]]
    if len(spots) < n:
        return None
    for i in sorted(rng.choice(spots, size=n, replace=False).tolist()):
        chars[i], chars[i + 1] = chars[i + 1], chars[i]
    out = "".join(chars)
    return out if out != text else None


def _contractions(text: str) -> str | None:
    """Expansions contracted and contractions expanded, keeping the first letter's case (CheckList's
    `Perturb.contractions`)."""
    def swap(m):
        new = _CONTRACTED[m.group(0).lower()]
        return new[:1].upper() + new[1:] if m.group(0)[:1].isupper() else new

    out = _CONTRACTABLE.sub(swap, text)
    return out if out != text else None


def _punctuation(text: str) -> str | None:
    """The final punctuation taken away, or a full stop added where there is none (CheckList's
    `Perturb.punctuation`)."""
    stripped = text.rstrip()
    bare = stripped.rstrip(".!?;:, ")
    return bare if bare and bare != stripped else (stripped + "." if stripped else None)


def _url_or_handle(text: str, rng: np.random.Generator) -> str:
    """A random URL or @handle added at the end (CheckList's `add random urls and handles`)."""
    token = "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz0123456789"), size=8).tolist())
    return f"{text.rstrip()} {'@' + token if rng.random() < 0.5 else 'https://t.co/' + token}"


# each test's edit of one text, by the test's name as CheckList's suite has it (None: the text has nothing to edit)
PERTURBATIONS: dict[str, Callable[[str, np.random.Generator], str | None]] = {
    "typos": lambda t, rng: _typos(t, rng, 1),
    "2 typos": lambda t, rng: _typos(t, rng, 2),
    "contractions": lambda t, rng: _contractions(t),
    "punctuation": lambda t, rng: _punctuation(t),
    "add random urls and handles": _url_or_handle,
}


def perturbed_suite(ds, kind: str, seed: int = 0) -> Suite:
    """CheckList's robustness INV tests on a dataset's rows: per test, each row it can perturb as one case
    (original, perturbed), the case's `rows` the dataset's own numbers, so a failure names its row."""
    if kind != "sentiment":
        raise InputError("over: CheckList's perturbations of a dataset are run here on sentiment models; QQP's "
                         "and other tasks' pairs take a suite")
    if len(ds) < MIN_ROWS:
        raise InputError(f"dataset: {ds.name} has {len(ds)} rows; perturbing a dataset takes at least {MIN_ROWS}")
    numbers = ds.row_numbers()
    tests = []
    for k, (name, perturb) in enumerate(PERTURBATIONS.items()):
        rng = np.random.default_rng([seed, k])
        data, rows = [], []
        for e, r in zip(ds.examples, numbers):
            t = e.texts[0]
            new = perturb(t, rng)
            if new and new != t and not blank_reason(new):
                data.append([t, new])
                rows.append(r)
        if data:
            tests.append(Test(name, "INV", "Robustness", f"{name}, on the rows of {ds.name}", data, None,
                              rows=rows))
    return Suite(f"{ds.name}, perturbed", kind, tests, source=ds.source)


# ------------------------------------------------------------------ the capability's runner (`api.run` calls it)


def released_suites(pair) -> dict[str, str]:
    """The released CheckList suites the pair's models answer, by name."""
    return {f"{Path(p).name.split('_suite')[0]} (released CheckList)": p for p in default_suites(pair)}


def run_checklist(pair: Pair, *, suite: str, sample: int, over: str, dataset: str | None = None,
                  limit: int | str | None = None, progress=None, engine: Engine | None = None,
                  visitor: bool = True) -> ChecklistResult:
    """A released CheckList suite (a path to its JSON export, or a released suite's name) on both models, or
    (`over="dataset"`) CheckList's robustness perturbations of `dataset`'s first `limit` rows, each failure with
    its row; with a Ray `engine` the inputs are predicted on its workers. `visitor=False`: the operator's suite
    (the CLI, the report): read wherever it is, its cases and sample not held to a visitor's caps."""
    if over == "dataset":
        ds = dataset_of(pair, dataset, limit, default=200 if visitor else None, visitor=visitor)
        s = perturbed_suite(ds, "sentiment" if not pair.task.two_texts else "qqp")
    elif not suite:
        raise InputError("suite: give the path of a CheckList suite export (*_suite.json.gz)")
    else:
        suite = released_suites(pair).get(suite, suite)
        s = load_suite(readable(suite, "suite") if visitor else suite,
                       max_chars=limits()["max_chars"] if visitor else None)
    heads = pair.heads  # a Ray driver needs labels, not weights

    def probabilities(inputs):  # each distinct input once per model, in process or on the engine's workers
        logits = (engine or Engine()).run(pair, logits_batch, inputs, params={"validate": False, "batch_size": 64},
                                          progress=progress)
        return [from_logits(clf, lg).probs for clf, lg in zip(heads, logits)]

    # over a dataset, every failing row is listed (a row is what the other tabs show of it); a suite's, three
    results = run_suite(s, heads, sample=sample, progress=progress, probabilities=probabilities,
                        n_examples=3 if over == "suite" else max((len(t.data) for t in s.tests), default=0))
    names = [m.name for m in heads]
    rates_by = {}
    for cap_name, tests in by_capability(results).items():
        rates_by[cap_name] = {}
        for k, n in enumerate(names):
            rates = [t.results[k]["fail_rate"] for t in tests if t.results[k]["fail_rate"] is not None]
            rates_by[cap_name][n] = float(sum(rates) / len(rates)) if rates else None
    tests = to_dict(results)
    # the table and the verdict in words, as the front ends show them (`views`), kept in the JSON for scripts
    return ChecklistResult(suite=s.name, kind=s.kind, sample=sample, models=names, over=over, tests=tests,
                           capabilities=rates_by,
                           markdown=checklist_table_markdown(tests, names),
                           differing=[t.name for t in differing_tests(results)],
                           summary=checklist_summary(tests, names))


def _p(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2g}" if p >= 0.001 else "<0.001"


def checklist_table_markdown(tests: list[dict], models: Sequence[str]) -> str:
    """A CheckList run (its tests, `checklist.to_dict`) in the study's Tables 2/3 layout: capability, test, type,
    then fail rate per model, with the paired test's p-values."""
    paired = len(models) == 2
    head = "| capability | test | type | " + " | ".join(f"{m} fail %" for m in models) + " | n |"
    head += " p (McNemar) | p (Holm) |\n" if paired else "\n"
    head += "|---|---|---|" + "---|" * len(models) + "---|" + ("---|---|\n" if paired else "\n")
    groups: dict[str, list[dict]] = {}
    for t in tests:
        groups.setdefault(t["capability"], []).append(t)
    rows = []
    for cap, group in groups.items():
        for t in group:
            rates = " | ".join("n/a" if r["fail_rate"] is None else f"{100 * r['fail_rate']:.1f}"
                               for r in t["results"])
            got = t["paired"] or {}
            p = f" {_p(got.get('p_value'))} | {_p(got.get('p_holm'))} |" if paired else ""
            mark = " ¹" if t.get("left_out") else ""
            rows.append(f"| {cap} | {t['name'].replace('|', '/')}{mark} | {t['type']} | {rates} | "
                        f"{t['results'][0]['n']} |{p}")
    notes = [f"¹ {t['name']}: {t['left_out']}" for t in tests if t.get("left_out")]
    return head + "\n".join(rows) + "\n" + ("\n" + "\n".join(notes) + "\n" if notes else "")


def left_out_whole(tests: list[dict]) -> list[dict]:
    """The tests (`to_dict`) left with no case: every one expects a label a model does not predict."""
    return [t for t in tests if not t["paired"] and t.get("left_out")]


def checklist_summary(tests: list[dict], models: Sequence[str], alpha: float = 0.05) -> str:
    """Which differences between the two models' fail rates are more than chance: a gap of 70% against 40% on
    20 cases often is not, and "less fair" should rest on the tests where it is."""
    whole = left_out_whole(tests)
    left = (f" Left out of these figures: {len(whole)} test{'s' if len(whole) != 1 else ''} whose every case "
            f"expects a label a model does not predict ({'; '.join(t['name'] for t in whole)})." if whole else "")
    tests = [t for t in tests if t["paired"]]
    if len(models) != 2 or not tests:
        return left.strip()
    differ = [t for t in tests if t["paired"].get("p_holm") is not None and t["paired"]["p_holm"] < alpha]
    if not differ:
        return (f"No test's fail rates differ beyond chance between {models[0]} and {models[1]} (McNemar's exact "
                f"test on the cases both were tested on, Holm-corrected over {len(tests)} tests, {alpha}); more "
                "cases per test give the test more power." + left)
    parts = []
    for t in differ:
        a, b = (r["fail_rate"] for r in t["results"])
        worse = models[0] if t["paired"]["only_failed"][0] > t["paired"]["only_failed"][1] else models[1]
        p = _p(t["paired"]["p_holm"])
        parts.append(f"{t['name']} ({t['capability']}: {100 * a:.0f}% vs {100 * b:.0f}%, {worse} fails more, "
                     f"p {'< ' + p[1:] if p.startswith('<') else '= ' + p})")
    return (f"{len(differ)} of {len(tests)} tests differ beyond chance (McNemar's exact test, Holm-corrected, "
            f"{alpha}): " + "; ".join(parts) + "." + left)
