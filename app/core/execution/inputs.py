"""What a request names, read: one input's text fields (`example_from`) or a dataset (`resolve_dataset`: a shipped
example set, a released set by name, a file or upload, a `datasets` id, or some of its rows, `<dataset> @rows:...`),
checked against this server's limits once, before any model runs. Below the techniques: every capability's runner
reads its inputs here."""
from __future__ import annotations

import re
from pathlib import Path

from ..ground import saved
from ..ground.data import DataError, Dataset, Example, load_dataset, read_table
from ..ground.errors import InputError
from ..ground.policy import OPERATOR_CAP, check_length, count, limits, readable
from ..ground.runtime import ASSETS_DIR, SHARED_DATA
from .inference import check_examples
from .pair import Pair

EXAMPLES = ASSETS_DIR / "examples"


def example_from(pair: Pair, text: str | None, text2: str | None = None) -> Example:
    """Raw strings to a checked Example; NUL characters become spaces, over-long fields are refused."""
    fields = pair.task.fields
    cap = limits()["max_chars"]
    texts = []
    for name, t in zip(fields, [text, text2]):
        t = "" if t is None else t
        if not isinstance(t, str):
            raise InputError(f"field {name!r} must be text, got {type(t).__name__}")
        check_length(name, t, cap)
        texts.append(t.replace("\x00", " "))
    ex = check_examples(pair.task, [Example(tuple(texts))])[0]
    check_readable(pair.models, zip(fields, ex.texts))
    return ex


def check_readable(models, named_texts) -> None:
    """Each (field, text) refused, naming the field, where none of `models` reads the text (`unreadable`): the
    app's inputs, LIT's datapoints and the ones it keeps."""
    for name, text in named_texts:
        if text and (why := unreadable(models, text)) is not None:
            raise InputError(f"field {name!r} {why}")


def read_pieces(tok, text: str) -> list[str]:
    """The pieces a tokenizer reads in `text` other than [UNK] and SentencePiece's bare word start ("▁", which
    ALBERT's tokenizer puts before an unknown word)."""
    pieces = tok.convert_ids_to_tokens(tok(text, add_special_tokens=False)["input_ids"])
    return [p for p in pieces if p != tok.unk_token and p.strip("\u2581")]


def unreadable(models, text: str) -> str | None:
    """Why none of `models` (a pair's classifiers) can read `text`, or None: each tokenizer makes nothing of it
    but [UNK] (Hangul fillers, braille blanks, a lone emoji), so both would be asked about an unknown token and
    answer anyway. Decided by the tokenizers themselves, not by a list of characters; where one model reads
    something, the text is taken (how two tokenizers differ is the point)."""
    if any(c.isascii() and c.isalnum() for c in text):
        return None  # an English word piece every tokenizer here has: no need to ask them (LIT's datasets)
    for clf in models:
        if read_pieces(clf.tokenizer, text[:4096]):
            return None
    shown = ", ".join(sorted({f"U+{ord(c):04X}" for c in text if not c.isspace()})[:3])
    return f"reads as nothing but [UNK] to both models ({shown}): nothing a model can read"



def shipped_examples(task, limit: int | None = None) -> list[Example]:
    """The shipped examples a pair of this task reads (`task`: a pair's `.task`), by the same loader as any
    dataset, their labels as written."""
    path = shipped_datasets()[shipped_for(task)]
    return read_table(path, labels=(), n_fields=len(task.fields), limit=limit).examples



def shipped_datasets() -> dict[str, Path]:
    return {p.stem: p for p in sorted(EXAMPLES.glob("*.jsonl"))}



def default_dataset(pair: Pair) -> str:
    """The shipped example set the pair's task can read: sentence pairs or single sentences."""
    return shipped_for(pair.task)


def shipped_for(task) -> str:
    return "rte_pairs" if task.two_texts else "sentiment_plain"


def released_dev_set(pair: Pair) -> str | None:
    """The task's GLUE dev split in the released data beside the checkout, when it is there: a benchmark on
    the shipped examples alone (30 sentences) can't tell two models apart."""
    path = SHARED_DATA / "glue" / pair.task.name / "dev.tsv"
    return str(path) if path.is_file() else None


def released_datasets(pair: Pair) -> dict[str, str]:
    """Released data a front end offers by name (label and value alike, so a dropdown never sends a label for a
    value, and no server path reaches the page)."""
    dev = released_dev_set(pair)
    return {f"{pair.task.name} dev (released GLUE)": dev} if dev else {}



def read_cap(visitor: bool, key: str) -> int | float:
    return limits()[key] if visitor else OPERATOR_CAP


# "<dataset> @rows:3,17,40-45": rows of a dataset (1-based, its own numbers: every table and plot numbers an
# example so, a slice's rows included), what a brushed projection or a slice hands the dataset-level tabs; the
# CLI's --dataset takes it too. "<dataset> @rows:A @rows:B": the rows of B, each of which must be among A's
SLICE_SPEC = re.compile(r"^(?P<base>.+?)\s*@rows:(?P<rows>.*)$", re.S)


def ascii_digits(text: str) -> bool:
    """0-9 only: str.isdigit() also takes "²" and "١", which int() then refuses (or reads) on its own terms."""
    text = text.strip()
    return text.isascii() and text.isdigit()


def slice_ranges(text: str, cap: int) -> list[tuple[int, int]]:
    """The (first, last) row ranges a slice names, in its order, validated but not expanded: a range is only
    expanded once the dataset's length is known (`@rows:1-999999999` on the command line, whose cap is the
    operator's, once built a billion-row list before any check and took 16 GB)."""
    ranges: list[tuple[int, int]] = []
    named = 0
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        if not ascii_digits(lo) or (hi and not ascii_digits(hi)) or len(part) > 40:
            raise InputError(f"dataset: {part[:20]!r} in @rows is not a row number or a range like 40-45")
        a, b = int(lo), int(hi or lo)
        if a < 1 or b < a:
            raise InputError(f"dataset: rows count from 1 and a range runs upwards; got {part[:20]!r}")
        named += b - a + 1
        if named > cap:
            raise InputError(f"dataset: @rows names more than {cap:,} rows, this server's limit")
        ranges.append((a, b))
    if not ranges:
        raise InputError("dataset: @rows names no row")
    return ranges


def slice_spec(dataset: str, rows) -> str:
    """The dataset name of some of `dataset`'s rows (its own 1-based numbers), for every dataset field and
    --dataset. Rows picked from a slice carry the whole dataset's numbers, so a slice of a slice names the whole
    dataset's rows again (a brush over a projection of a slice)."""
    picked = SLICE_SPEC.match(dataset)
    base = picked["base"] if picked is not None else dataset
    return f"{base} @rows:{','.join(str(int(r)) for r in rows)}"


def resolve_dataset(pair: Pair, spec: str | Dataset | None, limit: int | str | None = None, *,
                    visitor: bool = True) -> Dataset:
    """A shipped example set by name, a local path (or uploaded file), or a `datasets` id when online; its first
    `limit` examples (validated: a whole number from 1 to this server's `max_examples`; empty: the cap), read no
    further. A `Dataset` a caller built (LIT's selected examples, a script's own rows) is held to the same checks.
    `visitor=False` when the server's operator named it (command-line flags): hosted mode checks only what
    visitors type (`readable`), and only a visitor's rows are held to the text cap."""
    caps = limits()
    n = count("limit", limit, cap=read_cap(visitor, "max_examples"))
    if spec is None or (isinstance(spec, str) and not spec):  # an empty Dataset is not "no dataset"
        spec = default_dataset(pair)
    if isinstance(spec, Dataset):
        return _checked(pair, spec.head(n), visitor, caps)
    if not isinstance(spec, str):
        raise InputError(f"dataset: expected a name or path, got {type(spec).__name__}")
    if (picked := SLICE_SPEC.match(spec)) is not None:  # a slice: some rows of a dataset, as the app names them
        reads = read_cap(visitor, "max_examples")
        groups = [slice_ranges(g, reads) for g in picked["rows"].split("@rows:")]
        last = max(b for ranges in groups for _, b in ranges)
        if last > reads:
            raise InputError(f"dataset: row {last:,} is past the first {reads:,} rows this server reads")
        whole = resolve_dataset(pair, picked["base"], last, visitor=visitor)
        if last > len(whole):
            first = next(max(a, len(whole) + 1) for ranges in groups for a, b in ranges if b > len(whole))
            raise InputError(f"dataset: row {first:,} is past the end of {whole.name} ({len(whole):,} rows)")
        named = [list(dict.fromkeys(r for a, b in ranges for r in range(a, b + 1))) for ranges in groups]
        rows = named[-1]
        for before in named[:-1]:  # a slice of a slice: the later rows, each among the earlier ones
            among = set(before)
            if (out := next((r for r in rows if r not in among), None)) is not None:
                raise InputError(f"dataset: row {out:,} is not among the rows picked before it ({len(among):,} "
                                 "rows); rows are the whole dataset's numbers")
        own = whole.row_numbers()
        return Dataset(f"{whole.name}, {len(rows):,} picked rows", [whole.examples[r - 1] for r in rows][:n],
                       whole.task, whole.source, [own[r - 1] for r in rows][:n])
    if saved.is_saved(spec):  # a set the researcher saved (pinned edits, a generator's): read as any file is
        path = saved.path_of(spec, visitor=visitor)
        ds = read_table(path, labels=pair.task.labels or (), n_fields=len(pair.task.fields), limit=n)
        ds.name, ds.source = f"saved «{path.stem}»", spec
        return _checked(pair, ds.head(n), visitor, caps)
    shipped = shipped_datasets()
    spec = released_datasets(pair).get(spec, spec)
    if spec not in shipped and visitor:
        spec = readable(spec, "dataset")
    if spec in shipped:
        try:
            ds = read_table(shipped[spec], labels=pair.task.labels or (), n_fields=len(pair.task.fields), limit=n)
        except DataError:  # shipped gold labels from another label space (RTE pairs on an MNLI model): drop them
            ds = read_table(shipped[spec], labels=(), n_fields=len(pair.task.fields), limit=n)
            ds.examples = [Example(e.texts) for e in ds.examples]
    else:
        try:
            ds = load_dataset(spec, task=pair.task.name, limit=n)
        except OSError as exc:  # a name the file system refuses (too long, ...), not a file
            raise DataError(f"dataset: {spec[:80]!r} can't be opened ({exc.strerror or type(exc).__name__})") from None
    return _checked(pair, ds.head(n), visitor, caps)


def _checked(pair: Pair, ds: Dataset, visitor: bool, caps: dict) -> Dataset:
    """A dataset as every capability may read it: some examples, each with the task's fields, a visitor's texts
    within this server's length."""
    if not ds.examples:
        raise InputError(f"dataset: {ds.name} has no examples")
    if any(len(e.texts) != len(pair.task.fields) for e in ds.examples):
        raise InputError(f"dataset: {ds.name} has {len(ds.examples[0].texts)} text field(s); the {pair.task.name} "
                         f"task needs {len(pair.task.fields)}")
    if visitor:
        for i, e in enumerate(ds.examples, 1):
            for f, t in zip(pair.task.fields, e.texts):
                if len(t) > caps["max_chars"]:
                    raise InputError(f"dataset: {ds.name}, example {i}: field {f!r} is {len(t):,} characters long; "
                                     f"the limit here is {caps['max_chars']:,}")
    return ds


def dataset_of(pair: Pair, dataset: str | None, limit: int | str | None, *, default: int | None,
               visitor: bool = True, cap: str = "max_examples") -> Dataset:
    """A runner's dataset: its first `limit` examples (a whole number up to this server's `cap` for a visitor;
    empty: `default`, or the cap where `default` is None)."""
    return resolve_dataset(pair, dataset, count("limit", limit, cap=read_cap(visitor, cap), default=default),
                           visitor=visitor)
