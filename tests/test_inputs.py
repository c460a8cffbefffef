"""What a request names, read (`app/core/execution/inputs.py`): datasets a caller built held to the checks of
those named."""
from __future__ import annotations

import pytest

from app.core.execution.inputs import resolve_dataset
from app.core.ground.data import Dataset, Example
from app.core.ground.errors import InputError


def test_a_dataset_a_caller_built_is_read_as_a_named_one(tiny_pair, monkeypatch):
    """LIT's selected examples reach a capability as a `Dataset`: its first `limit` rows, refused when empty, when a
    row has the wrong number of fields, or, from a visitor, when a text is past this server's length."""
    rows = Dataset("picked", [Example((f"film number {i}",)) for i in range(6)], "sst2")
    assert [e.texts for e in resolve_dataset(tiny_pair, rows, 4).examples] == [(f"film number {i}",) for i in range(4)]
    with pytest.raises(InputError, match="dataset: picked has no examples"):
        resolve_dataset(tiny_pair, Dataset("picked", [], "sst2"))
    with pytest.raises(InputError, match="dataset: picked has 2 text field"):
        resolve_dataset(tiny_pair, Dataset("picked", [Example(("a", "b"))], "sst2"))
    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    long = Dataset("picked", [Example(("a" * 100_000,))], "sst2")
    with pytest.raises(InputError, match="dataset: picked, example 1: field 'sentence' is 100,000 characters"):
        resolve_dataset(tiny_pair, long)
    assert len(resolve_dataset(tiny_pair, long, visitor=False)) == 1
    with pytest.raises(InputError, match="dataset: expected a name or path, got list"):
        resolve_dataset(tiny_pair, ["a fine film"])


def _rows_file(tmp_path, n=60):
    rows = tmp_path / "rows.tsv"
    rows.write_text("sentence\tlabel\n" + "".join(f"film number {i} was {'fine' if i % 2 else 'dull'}\t{i % 2}\n"
                                                  for i in range(1, n + 1)), encoding="utf-8")
    return rows


def test_rows_keep_the_whole_datasets_numbers_through_a_slice_of_a_slice(tiny_pair, tmp_path):
    """One numbering: a slice's examples carry the whole dataset's row numbers; rows picked from it (a brush over
    its projection) name the whole dataset's rows again, and "@rows:A @rows:B" reads B's rows, each among A's (the
    app once handed "872 @rows:211" to @rows as one row number)."""
    from app.core.execution.inputs import slice_spec

    rows = str(_rows_file(tmp_path))
    first = resolve_dataset(tiny_pair, slice_spec(rows, [40, 5, 12, 33]), visitor=False)
    assert first.row_numbers() == [40, 5, 12, 33] and first.examples[0].texts == ("film number 40 was dull",)
    assert first.head(2).row_numbers() == [40, 5]
    again = slice_spec(slice_spec(rows, [40, 5, 12, 33]), [12, 40])
    assert again == f"{rows} @rows:12,40"
    got = resolve_dataset(tiny_pair, again, visitor=False)
    assert got.row_numbers() == [12, 40] and [e.texts[0] for e in got] == ["film number 12 was dull",
                                                                             "film number 40 was dull"]
    nested = resolve_dataset(tiny_pair, f"{rows} @rows:40,5,12,33 @rows:33,5", visitor=False)
    assert nested.row_numbers() == [33, 5] and nested.examples[0].texts == ("film number 33 was fine",)
    with pytest.raises(InputError, match="dataset: row 7 is not among the rows picked before it"):
        resolve_dataset(tiny_pair, f"{rows} @rows:40,5,12,33 @rows:5,7", visitor=False)
    with pytest.raises(InputError, match="row 61 is past the end"):
        resolve_dataset(tiny_pair, f"{rows} @rows:4 @rows:61", visitor=False)


def test_a_slice_of_a_slice_projected_brushed_and_read_by_every_tab(tiny_pair, tmp_path):
    """The chain the app offers: a slice of a dataset as the dataset, its projection (each point under the whole
    dataset's row), every point brushed, the picked points as every tab's dataset: the projection, Benchmark's
    disagreements, Find slices and Inside's CKA each read the same rows, under the same numbers."""
    from app.core import api

    rows = str(_rows_file(tmp_path))
    picked = [7, 22, 23, 30, 41, 44, 50, 51, 52, 58]
    proj = api.project(tiny_pair, api.slice_spec(rows, picked), projection="pca", visitor=False)
    assert sorted({p["row"] for p in proj["points"]}) == sorted(picked)
    by_row = {p["row"]: p["text"] for p in proj["points"]}
    assert all(by_row[r] == f"film number {r} was {'fine' if r % 2 else 'dull'}" for r in picked)
    brushed = api.slice_spec(api.slice_spec(rows, picked), sorted(picked)[2:])  # what a brush over it names
    ds = api.resolve_dataset(tiny_pair, brushed, visitor=False)
    assert ds.row_numbers() == sorted(picked)[2:]
    assert api.similarity(tiny_pair, brushed, visitor=False)["n"] == len(ds)
    assert {p["row"] for p in api.project(tiny_pair, brushed, projection="pca", visitor=False)["points"]} == set(
        sorted(picked)[2:])
    from app.core.techniques.benchmark import benchmark

    for e in benchmark(tiny_pair, ds)["disagreements"]["examples"]:
        word = "fine" if e["row"] % 2 else "dull"
        assert e["row"] in picked and e["texts"][0] == f"film number {e['row']} was {word}"


@pytest.mark.parametrize("text", ["\u3164\u3164", "\u2800 \u2800 \u2800", "\uffa0", "\u115f\u1160 \u2800"])
def test_a_text_both_tokenizers_read_as_nothing_but_unknown_is_refused(tiny_pair, text):
    """Hangul fillers and braille blanks passed the blank check (they are letters and symbols to Unicode) and were
    answered, each model reading [UNK]; the tokenizers decide now, at every door that takes one input."""
    from app.core import api

    for clf in tiny_pair.models:  # the premise, checked independently: each tokenizer reads only [UNK] (and, for
        # the ALBERT's SentencePiece, the word start "▁" before each unknown word)
        tok = clf.tokenizer
        pieces = tok.convert_ids_to_tokens(tok(text, add_special_tokens=False)["input_ids"])
        assert tok.unk_token in pieces and set(pieces) <= {tok.unk_token, "\u2581"}, (clf.name, pieces)
    with pytest.raises(InputError, match=r"^field 'sentence' reads as nothing but \[UNK\] to both models \(U\+"):
        api.predict(tiny_pair, text)
    with pytest.raises(InputError, match=r"reads as nothing but \[UNK\]"):
        api.saliency(tiny_pair, text, method="gradient_x_input")


def test_a_text_one_tokenizer_reads_is_taken(tiny_pair):
    """The tiny ALBERT's SentencePiece learnt the emoji from the sentences it was trained on; the BERT reads it as
    [UNK]: a text one model reads is a comparison worth making, and is answered."""
    bert, albert = tiny_pair.models
    assert bert.tokenizer("😍", add_special_tokens=False)["input_ids"] == [bert.tokenizer.unk_token_id]
    assert set(albert.tokenizer("😍", add_special_tokens=False)["input_ids"]) - {albert.tokenizer.unk_token_id}
    from app.core import api

    assert len(api.predict(tiny_pair, "😍").models) == 2
    assert len(api.predict(tiny_pair, "a fine film 😍").models) == 2
