"""One `Example` type and readers for the files researchers actually have.

Gold labels are stored by *name* (e.g. "positive", "entailment"), never by index: TextAttack's BERT SNLI/MNLI
models order their outputs differently from the datasets, so only names compare safely across models.
"""
from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import re
import stat
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import DataError
from .policy import limits
from .runtime import hub_reachable

csv.field_size_limit(10**8)


@dataclass(frozen=True)
class Example:
    texts: tuple[str, ...]
    label: str | float | None = None
    meta: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if isinstance(self.texts, str):
            object.__setattr__(self, "texts", (self.texts,))
        else:
            object.__setattr__(self, "texts", tuple(self.texts))

    @property
    def text(self) -> str:
        return self.texts[0]


@dataclass
class Dataset:
    name: str
    examples: list[Example]
    task: str | None = None  # preset task name when known (sst2, rte, ...)
    source: str = ""
    # each example's row in the file it was read from, 1-based (some rows of a dataset: `<dataset> @rows:...`);
    # None: 1, 2, ... Every table and plot numbers an example by it, so a row keeps its number through a slice
    rows: list[int] | None = None

    def __len__(self) -> int:
        return len(self.examples)

    def __iter__(self):
        return iter(self.examples)

    def row_numbers(self) -> list[int]:
        return list(self.rows) if self.rows is not None else list(range(1, len(self.examples) + 1))

    def head(self, n: int | None) -> "Dataset":
        cut = slice(None, n if n else None)
        return Dataset(self.name, self.examples[cut], self.task, self.source,
                       None if self.rows is None else self.rows[cut])


# ------------------------------------------------------------------ helpers
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def surrogate_reason(text: str) -> str | None:
    """Why `text` is not Unicode text a tokenizer can take (a lone surrogate), or None."""
    if (bad := _LONE_SURROGATE.search(text)) is None:
        return None
    return (f"has an unpaired surrogate (U+{ord(bad.group()):04X}) at character {bad.start() + 1}, which is not "
            "Unicode text; send the text as valid UTF-8")


def blank_reason(text: str) -> str | None:
    """Why a text gives a model nothing it can read, or None. Zero-width, control and format characters count as
    blank: tokenizers drop them, so the model would be asked about an empty input and answer anyway. A lone
    surrogate (JSON's "\\ud800" decodes to one) is no Unicode text at all: the tokenizer cannot take the string."""
    if (why := surrogate_reason(text)) is not None:
        return why
    if not text.strip():
        return "is empty"
    if any(unicodedata.category(c)[0] not in "CZM" for c in text):
        return None
    shown = ", ".join(sorted({f"U+{ord(c):04X}" for c in text if not c.isspace()})[:3])
    if any(unicodedata.category(c)[0] == "M" for c in text):  # accents with nothing to sit on: the uncased
        # tokenizers strip them (NFD, then every mark), the cased ones read [UNK]
        return f"has only invisible characters or combining marks ({shown}), nothing a model can read"
    return f"has only invisible characters ({shown}), nothing a model can read"


GLUE_LABELS: dict[str, tuple[str, ...] | None] = {
    "sst2": ("negative", "positive"),
    "rte": ("entailment", "not_entailment"),
    "mrpc": ("not_equivalent", "equivalent"),
    "qqp": ("not_duplicate", "duplicate"),
    "cola": ("unacceptable", "acceptable"),
    "wnli": ("not_entailment", "entailment"),
    "qnli": ("entailment", "not_entailment"),
    "mnli": ("entailment", "neutral", "contradiction"),
    "snli": ("entailment", "neutral", "contradiction"),
    "stsb": None,
    "ag_news": ("World", "Sports", "Business", "Sci/Tech"),
    "imdb": ("negative", "positive"),
    "rotten_tomatoes": ("negative", "positive"),
    "yelp_polarity": ("negative", "positive"),
}


SYSTEM_ROOTS = ("/proc", "/sys", "/dev")  # regular-looking files there are endless or secret (/proc/self/environ)
SUFFIXES = (".csv", ".tsv", ".txt", ".jsonl", ".json")


def check_file(path: Path, max_bytes: int | None = None) -> os.stat_result:
    """Refuse, before reading a byte, anything but a regular data file within `max_bytes` (default: this
    server's `max_file_bytes`). `/dev/zero` as a dataset once read until the kernel killed the server at 22.6 GB."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except OSError as exc:
        raise DataError(f"{path}: can't be read ({exc.strerror or type(exc).__name__})") from None
    if stat.S_ISDIR(st.st_mode):
        raise DataError(f"{path}: is a folder, expected a file")
    resolved = str(path.resolve())
    if not stat.S_ISREG(st.st_mode) or any(resolved == r or resolved.startswith(r + "/") for r in SYSTEM_ROOTS):
        raise DataError(f"{path}: not a regular file (a device, pipe, socket or system file); name a data file")
    cap = limits()["max_file_bytes"] if max_bytes is None else max_bytes
    if st.st_size > cap:
        raise DataError(f"{path}: {st.st_size / 2**20:,.1f} MB; the limit here is {cap / 2**20:,.0f} MB "
                        "(ALBERT_LENS_MAX_FILE_MB)")
    return st


def _read_text(path: Path, max_bytes: int | None = None) -> str:
    cap = limits()["max_file_bytes"] if max_bytes is None else max_bytes
    st = check_file(path, cap)
    with path.open("rb") as fh:
        # what the check saw, plus a byte: read(cap + 1) allocated the whole cap (1 GB locally) for any file
        want = min(cap, st.st_size) + 1
        raw = fh.read(want)
        if len(raw) == want and want <= cap:  # the file grew after the check: the rest, bounded, in chunks
            chunks = [raw]
            total = len(raw)
            while total <= cap and (chunk := fh.read(min(2**20, cap + 1 - total))):
                chunks.append(chunk)
                total += len(chunk)
            raw = b"".join(chunks)
    if len(raw) > cap:
        raise DataError(f"{path}: more than {cap / 2**20:,.0f} MB; the limit here is {cap / 2**20:,.0f} MB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(
            f"{path}, line {line}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "re-save the file as UTF-8"
        ) from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise DataError(f"{path}, line {line}: contains a NUL byte; is this a binary file?")
    return text.lstrip("\ufeff")


MAX_DIGITS = 30  # a whole number in a data file: past a count or a label; Python refuses str() past 4,300


class TooManyDigits(ValueError):
    """A JSON integer past MAX_DIGITS (`short_int`)."""


def short_int(text: str) -> int:
    """JSON's integers (`json.loads(..., parse_int=short_int)`), refused past MAX_DIGITS: a 5,000-digit label
    failed inside the parser (a bare ValueError) and again wherever it was turned into text. One guard for every
    JSON a visitor sends: data files, CheckList suites, LIT's request bodies."""
    digits = len(text.lstrip("-"))
    if digits > MAX_DIGITS:
        raise TooManyDigits(f"a number with {digits:,} digits; numbers here have at most {MAX_DIGITS}")
    return int(text)


def _label_name(value: str, labels: Sequence[str] | None, path: Path, line: int) -> str | float | None:
    """A file's label or score checked as a typed number is: a score finite, a label one of the task's names or
    a whole class number in range (1.5 was read as class 1, and "inf" failed inside int())."""
    value = value.strip()
    if value == "":
        return None
    if labels is None:
        try:
            score = float(value)
        except ValueError:
            raise DataError(f"{path}, line {line}: score {value[:40]!r} is not a number") from None
        if not math.isfinite(score):
            raise DataError(f"{path}, line {line}: score {value[:40]!r} is not a finite number")
        return score
    if value in labels:
        return value
    try:
        number = float(value)
    except ValueError:
        raise DataError(
            f"{path}, line {line}: unknown label {value[:40]!r}; expected one of {list(labels)} or "
            f"0..{len(labels) - 1}"
        ) from None
    if not number.is_integer() or not 0 <= number < len(labels):
        raise DataError(f"{path}, line {line}: label {value[:40]!r} is not a whole class number 0..{len(labels) - 1}"
                        f" nor one of {list(labels)}")
    return labels[int(number)]


def _rows(text: str, delimiter: str, quoting=csv.QUOTE_MINIMAL, *, path: str | Path = "the file"):
    """Rows as they are parsed: a reader that stops at its row limit never parses the rest. A row the csv module
    can't read (a lone carriage return inside a field, found by the fuzz test) is a DataError naming its line."""
    reader = csv.reader(io.StringIO(text), delimiter=delimiter, quoting=quoting)
    try:
        yield from reader
    except csv.Error as exc:
        raise DataError(f"{path}, line {reader.line_num}: not a well-formed row ({exc})") from None


def _enough(examples: list, limit: int | None) -> bool:
    return limit is not None and len(examples) >= limit


def _header_index(header: list[str], wanted: Sequence[str], path: Path) -> list[int]:
    lower = [h.strip().lower() for h in header]
    out = []
    for name in wanted:
        if name.lower() not in lower:
            raise DataError(f"{path}, line 1: missing column {name!r} among the header's {len(header)} columns")
        out.append(lower.index(name.lower()))
    return out


def _check_width(row: list[str], need: int, path: Path, line: int) -> None:
    if len(row) < need:
        raise DataError(f"{path}, line {line}: expected at least {need} columns, found {len(row)}")


# ------------------------------------------------------------------ GLUE and the shared corpora


def read_glue(path: str | Path, task: str, limit: int | None = None) -> Dataset:
    """GLUE-format TSV of `task` (sst2, rte, mrpc, stsb, cola, wnli, qnli, qqp, mnli); the first `limit` rows."""
    path = Path(path)
    labels = GLUE_LABELS[task]
    text = _read_text(path)
    examples: list[Example] = []
    if task == "cola":
        for i, row in enumerate(_rows(text, "\t", csv.QUOTE_NONE, path=path), 1):
            if _enough(examples, limit):
                break
            if not row:
                continue
            _check_width(row, 4, path, i)
            examples.append(Example((row[3],), _label_name(row[1], labels, path, i)))
        return Dataset(path.stem, examples, task, str(path))
    quoting = (
        csv.QUOTE_NONE if task in {"mrpc", "stsb", "sst2", "rte", "wnli", "qnli", "qqp", "mnli"} else csv.QUOTE_MINIMAL
    )
    rows = _rows(text, "\t", quoting, path=path)
    header = next(rows, None)
    if header is None:
        raise DataError(f"{path}: empty file")
    columns = {
        "sst2": ("sentence", "label"),
        "rte": ("sentence1", "sentence2", "label"),
        "wnli": ("sentence1", "sentence2", "label"),
        "mrpc": ("#1 String", "#2 String", "Quality"),
        "stsb": ("sentence1", "sentence2", "score"),
        "qnli": ("question", "sentence", "label"),
        "qqp": ("question1", "question2", "is_duplicate"),
        "mnli": ("sentence1", "sentence2", "gold_label"),
    }[task]
    idx = _header_index(header, columns, path)
    need = max(idx) + 1
    for i, row in enumerate(rows, 2):
        if _enough(examples, limit):
            break
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) < need and task == "stsb" and len(row) == need - 1:
            row = row + [""]  # unlabelled test rows
        _check_width(row, need, path, i)
        texts = tuple(row[j] for j in idx[:-1])
        examples.append(Example(texts, _label_name(row[idx[-1]], labels, path, i)))
    return Dataset(path.parent.name + "/" + path.stem, examples, task, str(path))


def read_ag_news(path: str | Path, limit: int | None = None) -> Dataset:
    """The original AG News csv: class (1-4), title, description; text = title + ' ' + description."""
    path = Path(path)
    labels = GLUE_LABELS["ag_news"]
    examples: list[Example] = []
    for i, row in enumerate(_rows(_read_text(path), ",", path=path), 1):
        if _enough(examples, limit):
            break
        if not row:
            continue
        _check_width(row, 3, path, i)
        try:
            cls = int(row[0])
        except ValueError:
            raise DataError(f"{path}, line {i}: class {row[0]!r} is not 1-4") from None
        if not 1 <= cls <= 4:
            raise DataError(f"{path}, line {i}: class {cls} is not 1-4")
        body = " ".join(p.strip() for p in row[1:3]).replace("\\", " ")
        examples.append(Example((body,), labels[cls - 1]))
    return Dataset("ag_news/" + path.stem, examples, "ag_news", str(path))


def read_imdb(path: str | Path, limit: int | None = None) -> Dataset:
    """The IMDB sample TSV (file, rating, label, text); `<br />` becomes a space."""
    path = Path(path)
    rows = _rows(_read_text(path), "\t", path=path)
    idx = _header_index(next(rows, []), ("text", "label"), path)
    labels = GLUE_LABELS["imdb"]
    examples: list[Example] = []
    for i, row in enumerate(rows, 2):
        if _enough(examples, limit):
            break
        if not row:
            continue
        _check_width(row, max(idx) + 1, path, i)
        examples.append(Example((row[idx[0]].replace("<br />", " "),), _label_name(row[idx[1]], labels, path, i)))
    return Dataset("imdb/" + path.stem, examples, "imdb", str(path))


def read_snli(folder: str | Path, split: str = "dev", limit: int | None = None) -> Dataset:
    """SNLI as three line-aligned files s1.<split>, s2.<split>, labels.<split>."""
    folder = Path(folder)
    parts = [
        _read_text(folder / f"{n}.{split}").rstrip("\n").split("\n") for n in ("s1", "s2", "labels")
    ]
    if not len(parts[0]) == len(parts[1]) == len(parts[2]):
        raise DataError(
            f"{folder}: s1/s2/labels.{split} have {len(parts[0])}/{len(parts[1])}/{len(parts[2])} lines; "
            "they must be line-aligned"
        )
    labels = GLUE_LABELS["snli"]
    examples = [
        Example((a.strip(), b.strip()), _label_name(c, labels, folder / f"labels.{split}", i))
        for i, (a, b, c) in enumerate(itertools.islice(zip(*parts), limit), 1)
    ]
    return Dataset("snli/" + split, examples, "snli", str(folder))


# ------------------------------------------------------------------ generic files


TEXT_COLUMNS = [("text",), ("sentence",), ("sentence1", "sentence2"), ("premise", "hypothesis"),
                ("question1", "question2"), ("question", "sentence"), ("text_a", "text_b")]


def _pick_columns(header: Sequence[str], n_fields: int | None, path: Path) -> tuple[str, ...]:
    lower = {h.strip().lower() for h in header}
    for cols in sorted(TEXT_COLUMNS, key=len, reverse=True):
        if all(c in lower for c in cols) and (n_fields is None or len(cols) == n_fields):
            return cols
    for cols in TEXT_COLUMNS:
        if cols[0] in lower and n_fields == 2 and len(cols) == 1:
            break
    # the header's names are not repeated: a path that is no dataset (a link to /etc/passwd) would have its first
    # line echoed to whoever named it
    raise DataError(
        f"{path}, line 1: no text column among the header's {len(header)} columns; name it 'text' or 'sentence' "
        f"(pairs: 'sentence1'+'sentence2' or 'premise'+'hypothesis')"
    )


def read_table(path: str | Path, labels: Sequence[str] | None = (), n_fields: int | None = None,
               limit: int | None = None) -> Dataset:
    """A local CSV/TSV with a header, or JSONL; the first `limit` rows. `labels=None` means a regression score;
    `()` accepts any name."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:  # before reading: a device or a binary named anything else is never opened
        raise DataError(f"{path}: unsupported file type {suffix!r}; use .csv, .tsv or .jsonl")
    records: list[tuple[int, dict]] = []
    text = _read_text(path)
    if suffix in {".jsonl", ".json"}:
        for i, line in enumerate(io.StringIO(text), 1):
            if _enough(records, limit):
                break
            if not line.strip():
                continue
            try:
                obj = json.loads(line, parse_int=short_int)
            except TooManyDigits as exc:
                raise DataError(f"{path}, line {i}: {exc}") from None
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}, line {i}: not valid JSON ({exc.msg})") from None
            except RecursionError:  # [[[[...]]]] past the parser's depth: no row of a dataset is nested so
                raise DataError(f"{path}, line {i}: nested too deeply; each line is one flat JSON object such as "
                                '{"text": "...", "label": 1}') from None
            if not isinstance(obj, dict):
                raise DataError(f"{path}, line {i}: expected a JSON object per line")
            records.append((i, {str(k).lower(): v for k, v in obj.items()}))
    else:
        rows = _rows(text, "\t" if suffix != ".csv" else ",", path=path)
        first = next(rows, None)
        if first is None:
            raise DataError(f"{path}: empty file")
        header = [h.strip().lower() for h in first]
        for i, row in enumerate(rows, 2):
            if _enough(records, limit):
                break
            if not row:
                continue
            if len(row) != len(header):
                raise DataError(f"{path}, line {i}: expected {len(header)} columns, found {len(row)}")
            records.append((i, dict(zip(header, row))))
    if not records:
        raise DataError(f"{path}: no rows")
    cols = _pick_columns(list(records[0][1].keys()), n_fields, path)
    examples = []
    for i, rec in records:
        texts = []
        for c in cols:
            v = rec.get(c)
            if v is None or not isinstance(v, str | int | float):
                raise DataError(f"{path}, line {i}: column {c!r} is missing or not text")
            if (why := blank_reason(str(v))) is not None:
                raise DataError(f"{path}, line {i}: column {c!r} {why}; remove the row or fill it in")
            texts.append(str(v))
        label = rec.get("label", rec.get("score"))
        if label is not None and str(label).strip() != "":
            if labels == ():
                label = str(label).strip()
            else:
                label = _label_name(str(label), labels, path, i)
        else:
            label = None
        examples.append(Example(tuple(texts), label))
    return Dataset(path.stem, examples, None, str(path))


def load_dataset(spec: str | Path, task: str | None = None, split: str | None = None,
                 limit: int | None = None) -> Dataset:
    """Read a dataset from a path (format guessed from its name and place) or a `datasets` hub id; the first
    `limit` examples, parsing no further.

    Known layouts: GLUE task folders (`glue/<task>/*.tsv`), AG News csv, the IMDB sample, SNLI line files.
    Anything else: a CSV/TSV/JSONL with a `text`/`sentence` (or pair) column and an optional `label`.
    """
    path = Path(spec)
    if path.is_dir() and (path / "s1.dev").is_file():
        return read_snli(path, split or "dev", limit)
    if path.is_dir():
        raise DataError(f"{path}: is a folder; name a file inside it")
    if path.exists() or path.is_symlink():
        parent = path.parent.name.lower().replace("-", "")
        if parent in GLUE_LABELS and path.suffix == ".tsv" and parent not in {"imdb", "ag_news"}:
            return read_glue(path, parent, limit)
        if parent == "ag_news" and path.suffix == ".csv":
            return read_ag_news(path, limit)
        if parent == "imdb" and path.suffix == ".tsv":
            return read_imdb(path, limit)
        labels = GLUE_LABELS.get(task) if task else ()
        return read_table(path, labels=labels, limit=limit)
    if "/" in str(spec) and not str(spec).startswith((".", "/")) or str(spec) in {"glue", "imdb", "ag_news", "snli"}:
        return _load_hub_dataset(str(spec), task, split)
    raise DataError(f"{spec}: no such file, and not a `datasets` hub id")


def _load_hub_dataset(spec: str, task: str | None, split: str | None) -> Dataset:
    if not hub_reachable():
        raise DataError(f"{spec}: not a local file, and the Hugging Face hub can't be reached to load it as a dataset")
    import datasets  # noqa: PLC0415 - heavy, online-only path

    name, _, config = spec.partition(":")
    ds = datasets.load_dataset(name, config or None, split=split or "validation")
    cols = _pick_columns(ds.column_names, None, Path(spec))
    labels = GLUE_LABELS.get(task or (config or name).split("/")[-1])
    examples = []
    for row in ds:
        lab = row.get("label")
        if labels and isinstance(lab, int) and lab >= 0:
            lab = labels[lab]
        elif isinstance(lab, int) and lab < 0:
            lab = None
        examples.append(Example(tuple(str(row[c]) for c in cols), lab))
    return Dataset(spec, examples, task, "datasets:" + spec)
