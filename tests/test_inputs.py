"""What a request names, read (`app/core/inputs.py`): datasets a caller built held to the checks of those named."""
from __future__ import annotations

import pytest

from app.core.data import Dataset, Example
from app.core.errors import InputError
from app.core.inputs import resolve_dataset


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
