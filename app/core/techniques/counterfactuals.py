"""Counterfactuals: edit words, see both models before and after.

Generators: word replacement from user pairs (the study's "cities -> townships"), WordNet synonym/antonym
swaps, ablation flips (the smallest set of removed words that flips each model) and a gradient-guided,
HotFlip-style single-token swap. Over a dataset: each model's flip rate, and the examples that flip one model
but not the other.
"""
from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from ..declare.capabilities import COUNTERFACTUAL_GENERATORS
from ..declare.results import CounterfactualResult
from ..execution.inference import predict, windowed
from ..execution.inputs import check_readable, dataset_of, example_from
from ..execution.pair import Pair
from ..ground import jobs
from ..ground.alignment import edit_texts, split_words
from ..ground.compat import quick_wordnet
from ..ground.data import Example, blank_reason, surrogate_reason
from ..ground.errors import InputError, WordNetMissing
from ..ground.policy import OPERATOR_CAP, limits
from ..ground.significance import compare_events
from ..models.loading import Classifier
from . import meaning
from .gradients import input_gradients
from .saliency import Occlusion


@dataclass
class Change:
    """One edited input and what each model said before and after."""

    original: tuple[str, ...]
    edited: tuple[str, ...]
    edits: list[tuple[str, str]]  # (old word, new word); new "" = removed
    generator: str
    before: list[dict] = field(default_factory=list)  # per model: label, probabilities
    after: list[dict] = field(default_factory=list)
    flipped: list[bool] = field(default_factory=list)
    deltas: list[dict] = field(default_factory=list)  # per model: probability change per label
    validity: dict | None = None  # WordNet swaps: whether the edit keeps the meaning (`meaning.validity`)

    def to_dict(self) -> dict:
        return self.__dict__.copy()


def _score(models: Sequence[Classifier], originals: list[Example], edited: list[Example], progress=None
           ) -> list[tuple]:
    """Predict originals and edits with every model in one batch each, each distinct input once (a dataset's
    WordNet swaps repeat their original once per swap: 885 swaps of 100 sentences predicted 1,770 inputs for 985
    distinct); per pair of inputs, per model. `progress(done, total)` counts inputs over all models."""
    out = []
    rows: dict[tuple[str, ...], int] = {}
    index = [rows.setdefault(tuple(e.texts), len(rows)) for e in (*originals, *edited)]
    distinct = [Example(t) for t in rows]
    total = len(distinct) * len(models)
    preds = [predict(clf, distinct, validate=False,
                     progress=(lambda d, _n, k=k: progress(k * len(distinct) + d, total)) if progress else None)
             for k, clf in enumerate(models)]
    n = len(originals)
    for i in range(n):
        before, after, flipped, deltas = [], [], [], []
        for clf, p in zip(models, preds):
            b, a = p.record(index[i]), p.record(index[n + i])
            before.append(b)
            after.append(a)
            if clf.is_regression:
                flipped.append(False)
                deltas.append({"score": a["score"] - b["score"]})
            else:
                flipped.append(a["label"] != b["label"])
                deltas.append({k: a["probabilities"][k] - b["probabilities"][k] for k in b["probabilities"]})
        out.append((before, after, flipped, deltas))
    return out


def compare(models: Sequence[Classifier], example: Example, edited: Example, edits, generator: str) -> Change:
    (before, after, flipped, deltas), = _score(models, [example], [edited])
    return Change(example.texts, edited.texts, list(edits), generator, before, after, flipped, deltas)


# ------------------------------------------------------------------ word replacement


def parse_pairs(spec: str) -> dict[str, str]:
    """'cities -> townships, good=>bad; film: movie' -> {"cities": "townships", ...}. Messages name the entry."""
    pairs = {}
    for raw in re.split(r"[,;\n]", spec or ""):
        if not raw.strip():
            continue
        m = re.match(r"^\s*(.+?)\s*(?:->|=>|:|→)\s*(.*?)\s*$", raw)
        if not m or not m.group(1):
            raise InputError(f"replacements: can't read {raw.strip()!r}; write 'old -> new'")
        pairs[m.group(1)] = m.group(2)
    if not pairs:
        raise InputError("replacements: empty; write pairs like 'cities -> townships, good -> bad'")
    return pairs


def _match_case(src: str, new: str) -> str:
    if src.isupper() and len(src) > 1:
        return new.upper()
    if src[:1].isupper():
        return new[:1].upper() + new[1:]
    return new


def replace_words(example: Example, pairs: dict[str, str]) -> tuple[Example, list[tuple[str, str]]]:
    """Whole-word, case-insensitive replacement that keeps the original capitalisation; multi-word keys allowed.
    All pairs apply at once, longest key first, so 'film -> movie, movie -> film' swaps the two words instead of
    turning every replacement back. An edited text is held to the text cap, as a typed one is."""
    table = {old.lower(): new for old, new in pairs.items() if old}
    if not table:
        return example, []
    keys = sorted(table, key=len, reverse=True)
    pat = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, keys)) + r")(?!\w)", re.IGNORECASE)
    texts, edits = [], []
    for text in example.texts:
        def sub(m):
            found = m.group(0)
            key = found.lower() if found.lower() in table else next(  # case folds that change length ('İ')
                k for k in keys if re.fullmatch(re.escape(k), found, re.IGNORECASE))
            new = _match_case(found, table[key])
            edits.append((found, new))
            return new

        texts.append(re.sub(r"  +", " ", pat.sub(sub, text)))
        if len(texts[-1]) > (cap := int(limits()["max_chars"])):  # "a -> xxx..." grew a text past what one may send
            raise InputError(f"replacements: the edited text would be {len(texts[-1]):,} characters long; the "
                             f"limit here is {cap:,} (give shorter replacements)")
    return Example(tuple(texts), example.label), edits


def word_replacement(models, example: Example, pairs: dict[str, str]) -> Change:
    edited, edits = replace_words(example, pairs)
    return compare(models, example, edited, edits, "word_replacement")


# ------------------------------------------------------------------ your own edit (the datapoint editor's)


def word_edits(original: Sequence[str], edited: Sequence[str]) -> list[tuple[str, str]]:
    """What changed between two versions of an input, as (old words, new words) runs, field by field ("" on one
    side: words removed or added), from the longest matching word sequence (difflib's), so "a good film" -> "a
    really bad film" is one run, ("good", "really bad")."""
    out = []
    for a, b in zip(original, edited):
        wa, wb = [w.text for w in split_words(a)], [w.text for w in split_words(b)]
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=wa, b=wb, autojunk=False).get_opcodes():
            if tag != "equal":
                out.append((" ".join(wa[i1:i2]), " ".join(wb[j1:j2])))
    return out


def your_edit(models, ex: Example, edited: str = "", edited2: str = "") -> CounterfactualResult:
    """The input as the researcher rewrote it, scored beside the original on both models (LIT's datapoint editor,
    with both answers and the change in each): `edited` replaces the text, `edited2` the second text of a pair
    (empty: that text unchanged). Their length is checked as every declared text option's is (`api.run`)."""
    given = [edited, edited2][:len(ex.texts)]
    texts = tuple(g if g and g.strip() else t for g, t in zip(given, ex.texts))
    if not (edited or "").strip() and not (edited2 or "").strip():
        raise InputError("edited: write your edit of the text (the text box holds the original)")
    for name, t in zip(("edited", "edited2"), texts):
        if (why := surrogate_reason(t) or blank_reason(t)) is not None:
            raise InputError(f"{name}: {why}")
    check_readable(models, zip(("edited", "edited2"), texts))
    if texts == tuple(ex.texts):
        raise InputError("edited: it is the same as the original; change a word to compare the models")
    edits = word_edits(ex.texts, texts)
    if not edits:  # only spacing or punctuation moved: still an edit the models read
        edits = [(a, b) for a, b in zip(ex.texts, texts) if a != b]
    change = compare(models, ex, Example(texts, ex.label), edits, "your_edit")
    return CounterfactualResult("your_edit", [m.name for m in models], [change.to_dict()])


def _texts(value, what: str, n: int) -> list[str]:
    if not isinstance(value, list | tuple) or len(value) != n or not all(isinstance(t, str) for t in value):
        raise InputError(f"its {what} is not {n} text(s)")
    return list(value)


def saved_records(pair: Pair, changes, *, originals: bool = True, dataset: str | None = None,
                  visitor: bool = True) -> list[dict]:
    """Pinned or generated edits (`Change` dicts, as a result or the app's pinned table holds them) as a saved
    set's rows: each edit, and with `originals` each original once, before its first edit; every text checked as a
    typed input is; where each came from (`origin`: the dataset's row, the dataset an edit names as its own
    `dataset`, else `dataset`), what was edited (`edits`) and, for an edit, its original's row in the set
    (`original_row`)."""
    if not isinstance(changes, list | tuple):
        raise InputError("edits: expected a list of edits")
    cap = limits()["max_examples"] if visitor else OPERATOR_CAP
    n = len(pair.task.fields)
    columns = ("text",) if n == 1 else ("text_a", "text_b")
    rows: list[dict] = []
    seen: dict[tuple[str, ...], int] = {}
    for i, c in enumerate(changes, 1):
        if not isinstance(c, dict):
            raise InputError(f"edits: edit {i} is not an edit")
        try:
            original = example_from(pair, *_texts(c.get("original"), "original", n))
            edited = example_from(pair, *_texts(c.get("edited"), "edited text", n))
        except InputError as exc:
            raise InputError(f"edits: edit {i}: {str(exc).removeprefix('edits: ')}") from None
        row = c.get("row")
        if row is not None and (isinstance(row, bool) or not isinstance(row, int) or row < 1):
            raise InputError(f"edits: edit {i}'s row is not a row number")
        where = c.get("dataset", dataset)  # pins from several datasets each keep their own
        if where is not None and not isinstance(where, str):
            raise InputError(f"edits: edit {i}'s dataset is not a name")
        where = None if where is None else where[:200]
        origin = (f"{where}, row {row}" if where else f"row {row}") if row else "typed or generated"
        if originals and original.texts not in seen:
            seen[original.texts] = len(rows) + 1
            rows.append({**dict(zip(columns, original.texts)), "kind": "original", "origin": origin})
        pairs = c.get("edits") or []
        if not isinstance(pairs, list) or not all(isinstance(e, list | tuple) and len(e) == 2 and
                                                 all(isinstance(w, str) for w in e) for e in pairs):
            raise InputError(f"edits: edit {i}'s word changes are not (old, new) pairs")
        rows.append({**dict(zip(columns, edited.texts)), "kind": "edit", "origin": origin,
                     "original": " / ".join(original.texts), "original_row": seen.get(original.texts),
                     "edits": "; ".join(f"{a or '(none)'} -> {b or '(removed)'}" for a, b in pairs)[:1000],
                     "generator": str(c.get("generator", ""))[:60]})
        if len(rows) > cap:
            raise InputError(f"edits: more than {cap:,} rows to save; the limit here is {cap:,}")
    return rows


# ------------------------------------------------------------------ WordNet


def _wordnet():
    from nltk.corpus import wordnet as wn  # deferred: NLTK and its data: only WordNet and tagging paths

    quick_wordnet()
    try:
        wn.ensure_loaded()
    except LookupError as exc:
        raise WordNetMissing(
            "WordNet is not installed: run `apt-get install wordnet-base wordnet-sense-index` (Debian) or "
            "`python -m nltk.downloader wordnet` where there is a network"
        ) from exc
    return wn


def warm_up() -> None:
    """Load WordNet ahead of the first synonym/antonym swap (7 s here, which that first click waited for)."""
    _wordnet()
    _tags(["warm", "up"])


def _stopwords() -> frozenset[str]:
    """Function words are not swapped (TextAttack's recipes forbid it too): WordNet reads "will" as a verb
    (antonym "disinherit") and "had" as one ("lack"), edits that change the grammar, not the meaning.
    scikit-learn's list, so the swaps are the same wherever NLTK's own list is or is not installed."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS  # deferred: scikit-learn: loaded on first use

    return ENGLISH_STOP_WORDS


def _tags(words: list[str]) -> list[str | None] | None:
    """Each word's WordNet part of speech from NLTK's perceptron tagger (`meaning.tags`), or None for all when no
    tagger is installed (then every part of speech is offered, as before)."""
    found = meaning.tags(tuple(words))
    return None if found is None else [meaning.WORDNET_POS.get(t) for t in found]


def wordnet_alternatives(word: str, kind: str = "synonym", limit: int = 5, pos: str | None = None) -> list[str]:
    """WordNet's synonyms or antonyms of `word` (as `pos` when given). An inflected word ("takes", "children")
    gets none: WordNet offers base forms, and "pumpkin give" or "the child were" would test grammar."""
    wn = _wordnet()
    low = word.lower()
    base = wn.morphy(low, pos) if pos else wn.morphy(low)
    if base is not None and base != low:
        return []
    out: list[str] = []
    for syn in wn.synsets(low, pos=pos):
        for lemma in syn.lemmas():
            cands = [lemma] if kind == "synonym" else lemma.antonyms()
            for c in cands:
                name = c.name().replace("_", " ")
                if name.lower() != word.lower() and name not in out and "-" not in name:
                    out.append(name)
    return out[:limit]


def wordnet_candidates(example: Example, kind: str = "antonym", per_word: int = 3, limit: int = 40
                       ) -> list[tuple[Example, list[tuple[str, str]]]]:
    """(edited example, [(word, replacement)]) for every single-word swap WordNet offers, first `limit`."""
    if kind not in ("synonym", "antonym"):
        raise InputError(f"kind: {kind!r} is not 'synonym' or 'antonym'")
    words = [w for f, t in enumerate(example.texts) for w in split_words(t, f)]
    stop = _stopwords()
    pos: list[str | None] = []
    tagged = True
    for f in range(len(example.texts)):  # tagged a field at a time, in context
        field_words = [w.text for w in words if w.field == f]
        tags = _tags(field_words)
        tagged = tagged and tags is not None
        pos += tags or [None] * len(field_words)

    def of_field(f: int):
        for i, w in enumerate(words):
            if w.field != f or not w.text.isalpha() or len(w.text) < 3 or w.text.lower() in stop:
                continue
            if tagged and pos[i] is None:  # a determiner, pronoun, numeral...: no WordNet part of speech
                continue
            for alt in wordnet_alternatives(w.text, kind, per_word, pos[i]):
                alt = _match_case(w.text, alt)
                yield Example(edit_texts(example.texts, words, {i: alt}), example.label), [(w.text, alt)]

    # the fields take turns: a premise's swaps alone would use up `limit` before the hypothesis got any
    turns = [of_field(f) for f in range(len(example.texts))]
    candidates: list = []
    while turns and len(candidates) < limit:
        for g in list(turns):
            nxt = next(g, None)
            if nxt is None:
                turns.remove(g)
            else:
                candidates.append(nxt)
            if len(candidates) == limit:
                break
    return candidates


def wordnet_swaps(models, example: Example, kind: str = "antonym", per_word: int = 3, limit: int = 40) -> list[Change]:
    """Every single-word swap WordNet offers (antonyms or synonyms), scored on both models in one batch."""
    candidates = wordnet_candidates(example, kind, per_word, limit)
    if not candidates:
        return []
    scored = _score(models, [example] * len(candidates), [c[0] for c in candidates])
    checks = meaning.validity([example.texts] * len(candidates), [c[0].texts for c in candidates],
                              [c[1] for c in candidates]) if kind == "synonym" else [None] * len(candidates)
    return [Change(example.texts, ex.texts, edits, f"wordnet_{kind}", *s, validity=v)
            for (ex, edits), s, v in zip(candidates, scored, checks)]


# ------------------------------------------------------------------ ablation flip


def ablation_flip(clf: Classifier, example: Example, max_size: int = 3, candidates: int = 8) -> dict:
    """Smallest set of removed words that changes `clf`'s label: words ranked by occlusion, then subsets of the
    top `candidates` tried in order of size (all of one size in one batch)."""
    if clf.is_regression:
        raise InputError("ablation flip: needs a classifier; this model predicts a score")
    occ = Occlusion(clf).attribute(example)
    al = occ.alignment
    base_label = occ.target_label
    window = windowed(clf, example, al)  # a long input's copies are predicted on the part the model reads
    seen = al.seen
    top = [seen[i] for i in np.argsort(-np.asarray(occ.scores)[seen], kind="stable")[:candidates]]
    for size in range(1, min(max_size, len(top)) + 1):
        subsets = list(itertools.combinations(top, size))
        edited = [Example(edit_texts(window.texts, al.words, {i: "" for i in s})) for s in subsets]
        pred = predict(clf, edited, validate=False)
        for s, lab in zip(subsets, pred.predicted):
            if lab != base_label:
                return {"model": clf.name, "removed": [al.words[i].text for i in sorted(s)],
                        "edited": edit_texts(example.texts, al.words, {i: "" for i in s}),
                        "before": base_label, "after": lab, "size": size}
    return {"model": clf.name, "removed": None, "edited": None, "before": base_label, "after": None,
            "size": None, "note": f"no set of up to {max_size} of the {len(top)} most important words flips it"}


# ------------------------------------------------------------------ HotFlip-style swap


def _whole_word_vocab(clf: Classifier) -> tuple[torch.Tensor, list[str]]:
    """Vocabulary entries that are whole alphabetic words, no special tokens: WordPiece entries without "##";
    in SentencePiece ("▁film") and byte-level BPE ("Ġfilm", RoBERTa) only the pieces that start a word."""
    cache = getattr(clf, "_hotflip_vocab", None)
    if cache is not None:
        return cache
    tok = clf.tokenizer
    vocab = tok.get_vocab()
    marker = next((m for m in ("▁", "Ġ") if sum(p.startswith(m) for p in vocab) > len(vocab) // 4), None)
    ids, words = [], []
    for piece, idx in vocab.items():
        if marker is not None and not piece.startswith(marker):
            continue
        w = piece[1:] if marker is not None else piece
        if piece.startswith("##") or not w.isalpha() or len(w) < 2 or idx in tok.all_special_ids:
            continue
        ids.append(idx)
        words.append(w)
    if not ids:
        raise InputError(f"hotflip: {clf.name}'s vocabulary has no whole-word tokens to swap in")
    res = (torch.tensor(ids, dtype=torch.long), words)
    clf._hotflip_vocab = res  # type: ignore[attr-defined]
    return res


def hotflip(clf: Classifier, example: Example, top_k: int = 20) -> dict:
    """Swap the one word whose first-order (gradient) estimate most lowers the predicted class, verified by
    re-prediction over the `top_k` best candidates; single-token words only, replaced by whole-word tokens."""
    if clf.is_regression:
        raise InputError("hotflip: needs a classifier; this model predicts a score")
    g = input_gradients(clf, example, score="logprob")
    al = g.alignment
    ids, vocab_words = _whole_word_vocab(clf)
    weight = clf.model.get_input_embeddings().weight
    with torch.no_grad():
        table = weight[ids.to(weight.device)].float()  # (V, E)
    swappable = [(w, toks[0]) for w, toks in enumerate(al.word_tokens)
                 if len(toks) == 1 and al.words[w].text.isalpha()]
    cands = []
    if swappable:
        at = [t for _, t in swappable]
        grads = torch.as_tensor(g.gradients[at], device=table.device)  # (W, E)
        emb = torch.as_tensor(g.embeddings[at], device=table.device)
        with torch.no_grad():  # first-order change of log p(target), every word's every swap in one product
            est = table @ grads.T - (emb * grads).sum(-1)  # (V, W)
            vals, order = torch.topk(-est, k=min(3, len(table)), dim=0)  # (3, W)
        vals, order = vals.cpu().numpy(), order.cpu().numpy()  # one copy back, not one per candidate
        for j, (w, _) in enumerate(swappable):
            for v, o in zip(vals[:, j], order[:, j]):
                cands.append((float(v), w, vocab_words[int(o)]))
    if not cands:
        return {"model": clf.name, "edited": None, "note": "no single-token word to swap"}
    cands.sort(reverse=True)
    cands = cands[:top_k]
    edited = [
        Example(edit_texts(example.texts, al.words, {w: _match_case(al.words[w].text, new)})) for _, w, new in cands
    ]
    pred = predict(clf, edited, validate=False)
    p_target = pred.probs[:, g.target]
    best = int(np.argmin(p_target))
    _, w, new = cands[best]
    return {"model": clf.name, "swap": (al.words[w].text, _match_case(al.words[w].text, new)),
            "edited": edited[best].texts, "before": g.target_label, "after": pred.predicted[best],
            "flipped": pred.predicted[best] != g.target_label,
            "target_prob_before": float(g.probs[g.target]), "target_prob_after": float(p_target[best])}


# ------------------------------------------------------------------ over a dataset


DATASET_EDITS = ("word_replacement", "wordnet_synonym", "wordnet_antonym")
PROGRESS_STEPS = 1000


def phased(progress, shares: Sequence[float]):
    """`stage(i, done, total)`: stage i's own (done, total) as one `progress(done, total)` over the whole job,
    stage i holding `shares[i]` of it, so a bar never runs back when a later stage's total is larger."""
    starts = np.concatenate([[0.0], np.cumsum(shares)])

    def stage(i: int, done: int, total: int) -> None:
        if progress:
            frac = starts[i] + shares[i] * (done / total if total else 1.0)
            progress(min(PROGRESS_STEPS, round(frac * PROGRESS_STEPS)), PROGRESS_STEPS)

    return stage


def flip_rate(models, examples: Sequence[Example], pairs: dict[str, str] | None = None, progress=None, *,
              edits: str = "word_replacement", per_example: int = 10, rows: Sequence[int] | None = None) -> dict:
    """Edit every example (`edits`: the word replacement `pairs`, or up to `per_example` single-word WordNet
    swaps) and score originals and edits on every model in one batch each; per model, the share of edits that
    flip its label, and the edits that flip one model only. `progress(done, total)` runs once from 0 to the end
    through the three stages (editing, scoring, for synonyms the meaning checks), each given its share."""
    synonyms = edits == "wordnet_synonym"
    stage = phased(progress, (0.35, 0.45, 0.2) if synonyms else (0.35, 0.65, 0.0))
    originals, edited, made, source = [], [], [], []
    for k, ex in enumerate(examples):
        jobs.checkpoint(k, len(examples), "examples edited")  # WordNet look-ups cost more than the predictions
        stage(0, k, len(examples))
        if edits == "word_replacement":
            new, e = replace_words(ex, pairs or {})
            found = [(new, e)] if e else []
        elif edits in ("wordnet_synonym", "wordnet_antonym"):
            found = wordnet_candidates(ex, edits.split("_")[1], limit=per_example)
        else:
            raise InputError(f"edits: {edits!r} is not one of {list(DATASET_EDITS)}")
        for new, e in found:
            originals.append(ex)
            edited.append(new)
            made.append(e)
            source.append(k)
    if not originals:  # no rate to report: 0 of 0 is not 0%
        return {"edits": edits, "changed": 0, "examples_changed": 0, "flip_rate": [None] * len(models), "both": 0,
                "only": [[] for _ in models], "examples": []}
    scored = _score(models, originals, edited, lambda d, n: stage(1, d, n))
    flips = np.asarray([s[2] for s in scored])  # (n, models)
    checks = [None] * len(originals)
    if synonyms:  # a synonym swap must keep the meaning to test the model rather than the edit
        checks = meaning.validity([o.texts for o in originals], [e.texts for e in edited], made,
                                  progress=lambda d, n: stage(2, d, n))
    changes = [Change(o.texts, e.texts, ed, edits, *s, validity=v)
               for o, e, ed, s, v in zip(originals, edited, made, scored, checks)]
    # each edit names its example's row in the dataset (`rows`: the dataset's own numbers; else 1, 2, ...)
    numbers = list(rows) if rows is not None else list(range(1, len(examples) + 1))
    row_of = [numbers[k] for k in source]
    shown = [c.to_dict() | {"row": r} for c, r in zip(changes, row_of)]
    counted = np.asarray([v is None or v["valid"] for v in checks])  # the edits the rates count
    out = {"edits": edits, "changed": len(originals), "examples_changed": len(set(source)), "examples": shown}
    if edits == "wordnet_synonym":
        out["valid_edits"] = int(counted.sum())
        out["flip_rate_all_edits"] = flips.mean(0).tolist()
    if not counted.any():
        return {**out, "flip_rate": [None] * len(models), "both": 0, "only": [[] for _ in models]}
    kept, groups = flips[counted], np.asarray(source)[counted]
    out.update(flip_rate=kept.mean(0).tolist(), both=int(kept.all(1).sum()),
               only=[[c for c, f, ok in zip(shown, flips, counted) if ok and f[k] and not f[1 - k]]
                     for k in range(len(models))])
    if len(models) == 2:  # is one model flipped more often than chance would give? edits of one example together
        out["comparison"] = compare_events(kept[:, 0], kept[:, 1], groups, metric="flip rate",
                                           group_name="examples")
    return out


# ------------------------------------------------------------------ the capability's runner (`api.run` calls it)


def _replaced(models, ex: Example, replacements: str) -> CounterfactualResult:
    pairs = parse_pairs(replacements)
    changes = [word_replacement(models, ex, pairs).to_dict()]
    if not changes[0]["edits"]:
        words = [w.text for f in ex.texts for w in split_words(f) if w.text.isalpha()]
        own = next((w for w in words if w.lower() not in _stopwords()), words[0] if words else "word")
        shown = list(pairs)[:6] + (["..."] if len(pairs) > 6 else [])
        raise InputError(f"replacements: none of {shown} occurs in the input; write old -> new pairs for its own "
                         f"words ('{own} -> ...'), or choose WordNet synonym swaps, which need none")
    return CounterfactualResult("word_replacement", [m.name for m in models], changes)


def _swapped(kind: str):
    def swaps(models, ex: Example) -> CounterfactualResult:
        changes = [c.to_dict() for c in wordnet_swaps(models, ex, kind)]
        if not changes:
            raise InputError(f"text: WordNet offers no {kind} for its words (function words and inflected forms "
                             "such as 'takes' or 'cities' are not swapped)")
        return CounterfactualResult(f"wordnet_{kind}", [m.name for m in models], changes)

    return swaps


def _searched(name: str, search, edits):
    """A generator that searches each model on its own (`search(clf, ex)`), then scores every edit it found on both
    models; `edits(found)`: the (old, new) pairs of one model's search."""
    def run(models, ex: Example) -> CounterfactualResult:
        per_model = [search(clf, ex) for clf in models]
        changes = [compare(models, ex, Example(r["edited"]), edits(r), f"{name} ({r['model']})").to_dict()
                   for r in per_model if r.get("edited")]
        return CounterfactualResult(name, [m.name for m in models], changes, per_model)

    return run


# one input's generators, named as `capabilities.COUNTERFACTUAL_GENERATORS` declares them (each `Part`'s code); the
# dataset_* ones (a `Part` with `edits`) are answered by `flip_rate` with the edit each names
replaced = _replaced
synonym_swaps = _swapped("synonym")
antonym_swaps = _swapped("antonym")
ablation_search = _searched("ablation_flip", ablation_flip, lambda r: [(w, "") for w in r["removed"]])
hotflip_search = _searched("hotflip", hotflip, lambda r: [r["swap"]])


def run_counterfactual(pair: Pair, text: str | None = None, text2: str | None = None, *, generator: str,
                       dataset: str | None = None, limit: int | str | None = None,
                       progress=None, visitor: bool = True, **generator_options) -> CounterfactualResult:
    """One input edited by `generator` and both models compared before and after; a dataset_* generator edits
    every example of `dataset` (its first `limit`) and compares the models' flip rates. `generator_options`:
    every generator's declared options, checked (`api.run`); a generator is given those it declares."""
    declared = COUNTERFACTUAL_GENERATORS[generator]
    reads = {o.name: generator_options[o.name] for o in declared.options}
    replacements = reads.get("replacements")
    if replacements is not None and (why := surrogate_reason(replacements)) is not None:
        raise InputError(f"replacements: {why}")
    if declared.edits is not None:
        if not dataset:
            raise InputError(f"dataset: {generator} needs a dataset (a shipped name, a file or a datasets id)")
        ds = dataset_of(pair, dataset, limit, default=500 if visitor else None, visitor=visitor)
        edits = declared.edits
        pairs = parse_pairs(replacements) if declared.reads("replacements") else None
        res = flip_rate(pair.models, ds.examples, pairs, progress, edits=edits,
                        per_example=limits()["swaps_per_example"], rows=ds.row_numbers())
        if not res["changed"]:
            what = f"none of {list(pairs)} occurs" if pairs is not None else "WordNet offers no swap"
            field = "replacements" if pairs is not None else "dataset"
            raise InputError(f"{field}: {what} in the {len(ds)} examples of {ds.name}")
        return CounterfactualResult.of(res, generator=generator, dataset=ds.name,
                                       models=[m.name for m in pair.models])
    return declared.load()(pair.models, example_from(pair, text, text2), **reads)
