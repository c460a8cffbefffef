"""Your own edit beside its original, pinned edits, and edits kept as a saved set every dataset field and --dataset
read (issue 71: LIT's datapoint editor and its named sets, both models at once): the edit's answers against the
models' own predictions, the word changes against hand-made cases, the saved set read back row for row, a hosted
visitor's sets kept from every other visitor, and the refusals' messages."""
import json
import os
import time

import pytest

from .conftest import SENTENCES


@pytest.fixture()
def store(tmp_path, monkeypatch):
    """Each test its own saved-set folder (the run's cache is shared by its processes)."""
    from app.core.ground import saved

    monkeypatch.setattr(saved, "root", lambda: tmp_path / "saved")
    return tmp_path / "saved"


def test_word_edits_name_each_changed_run_of_words():
    from app.core.techniques.counterfactuals import word_edits

    assert word_edits(["a good film"], ["a really bad film"]) == [("good", "really bad")]
    assert word_edits(["not a good film at all"], ["a good film"]) == [("not", ""), ("at all", "")]
    assert word_edits(["a film"], ["a long film", ]) == [("", "long")]
    assert word_edits(["A man sleeps.", "He rests"], ["A man sleeps.", "He runs"]) == [("rests", "runs")]


def test_your_edit_scores_the_edit_beside_the_original_as_each_model_predicts_them(tiny_pair):
    from app.core import api

    original, edited = SENTENCES[0], SENTENCES[0].replace("charming", "dreadful", 1)
    assert edited != original
    res = json.loads(json.dumps(api.counterfactual(tiny_pair, original, generator="your_edit",
                                                   edited=edited).to_dict()))  # as a front end receives it
    (change,) = res["changes"]
    assert change["original"] == [original] and change["edited"] == [edited]
    assert change["edits"] == [["charming", "dreadful"]]
    for k, clf in enumerate(tiny_pair.models):
        for which, text in (("before", original), ("after", edited)):
            own = api.predict_examples(clf, [api.Example((text,))]).record(0)
            assert change[which][k]["label"] == own["label"]
            for label, p in own["probabilities"].items():
                assert change[which][k]["probabilities"][label] == pytest.approx(p, abs=1e-6)
        b, a = change["before"][k], change["after"][k]
        assert change["flipped"][k] == (a["label"] != b["label"])
        assert change["deltas"][k][b["label"]] == pytest.approx(
            a["probabilities"][b["label"]] - b["probabilities"][b["label"]], abs=1e-6)


def test_your_edit_refuses_no_edit_the_same_text_and_an_unreadable_one(tiny_pair):
    from app.core import api

    with pytest.raises(api.InputError, match="edited: write your edit"):
        api.counterfactual(tiny_pair, "a good film", generator="your_edit")
    with pytest.raises(api.InputError, match="edited: it is the same as the original"):
        api.counterfactual(tiny_pair, "a good film", generator="your_edit", edited="a good film")
    with pytest.raises(api.InputError, match="field 'edited' is 100,001 characters long"):
        api.counterfactual(tiny_pair, "a good film", generator="your_edit", edited="x" * 100_001)
    with pytest.raises(api.InputError, match="edited.*nothing a model can read"):
        api.counterfactual(tiny_pair, "a good film", generator="your_edit", edited="\u3164\u3164")


def _edits(pair):
    from app.core import api

    first = api.counterfactual(pair, SENTENCES[0], generator="your_edit",
                               edited=SENTENCES[0].replace("charming", "awful", 1)).saved_edits()
    second = api.counterfactual(pair, SENTENCES[0], generator="your_edit",
                                edited=SENTENCES[0] + " Not really.").saved_edits()
    other = api.counterfactual(pair, SENTENCES[2], generator="word_replacement",
                               replacements="the -> a").saved_edits()
    return [*first, *second, *other]


def test_saved_edits_are_read_back_row_for_row_with_their_originals_by_every_dataset_reader(tiny_pair, store):
    from app.core import api

    changes = _edits(tiny_pair)
    kept = api.save_edits(tiny_pair, "my edits", changes)
    assert (kept.name, kept.spec, kept.n) == ("my edits", "saved:my edits", 5)
    ds = api.resolve_dataset(tiny_pair, kept.spec)
    # each original once, before its first edit; the edits in the order given
    expected = [changes[0]["original"], changes[0]["edited"], changes[1]["edited"], changes[2]["original"],
                changes[2]["edited"]]
    assert [list(e.texts) for e in ds.examples] == [list(t) for t in expected]
    assert ds.row_numbers() == [1, 2, 3, 4, 5] and ds.name == "saved «my edits»"
    rows = [json.loads(line) for line in (store / "my edits.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in rows] == ["original", "edit", "edit", "original", "edit"]
    assert [r.get("original_row") for r in rows] == [None, 1, 1, None, 4]
    assert rows[1]["edits"] == "charming -> awful" and rows[1]["generator"] == "your_edit"
    # a slice of a saved set, as a brush or a slice names it
    part = api.resolve_dataset(tiny_pair, kept.spec + " @rows:2,5")
    assert [list(e.texts) for e in part.examples] == [list(expected[1]), list(expected[4])]
    assert part.row_numbers() == [2, 5]
    # edits only; saving again under the name replaces the set
    again = api.save_edits(tiny_pair, "my edits", changes, originals=False)
    assert again.n == 3 and [s.name for s in api.saved_sets()] == ["my edits"]
    assert [list(e.texts) for e in api.resolve_dataset(tiny_pair, again.spec).examples] == \
        [list(c["edited"]) for c in changes]


def test_a_dataset_generators_edits_keep_the_rows_they_came_from(tiny_pair, store):
    from app.core import api

    res = api.counterfactual(tiny_pair, generator="dataset_flip_rate", dataset="sentiment_plain @rows:3,4,7,11",
                             replacements="the -> a, a -> the")
    kept = api.save_result(tiny_pair, res, "swaps", originals=False)
    rows = [json.loads(line) for line in (store / "swaps.jsonl").read_text().splitlines()]
    assert kept.n == len(res.examples) and kept.n >= 2
    assert [r["origin"] for r in rows] == [f"{res.dataset}, row {c['row']}" for c in res.examples]
    assert {c["row"] for c in res.examples} <= {3, 4, 7, 11}
    assert [(r["text"],) for r in rows] == [tuple(c["edited"]) for c in res.examples]


def test_saved_set_names_and_tampered_edits_are_refused_naming_the_field(tiny_pair, store, monkeypatch):
    from app.core import api
    from app.core.ground import saved

    changes = _edits(tiny_pair)
    for bad in ("", "../etc", "a/b", "x" * 49, " -lead"):
        with pytest.raises(api.InputError, match="name: .* can't name a saved set; use 1-48 letters"):
            api.save_edits(tiny_pair, bad, changes)
    with pytest.raises(api.InputError, match="edits: nothing to save"):
        api.save_edits(tiny_pair, "empty", [])
    with pytest.raises(api.InputError, match="edits: edit 1: its edited text is not 1 text"):
        api.save_edits(tiny_pair, "t", [changes[0] | {"edited": [1]}])
    with pytest.raises(api.InputError, match="edits: edit 2's row is not a row number"):
        api.save_edits(tiny_pair, "t", [changes[0], changes[1] | {"row": -3}])
    with pytest.raises(api.InputError, match="edits: edit 1: field 'sentence' is 100,001 characters long"):
        api.save_edits(tiny_pair, "t", [changes[0] | {"edited": ["x" * 100_001]}])
    monkeypatch.setenv("ALBERT_LENS_MAX_EXAMPLES", "4")
    with pytest.raises(api.InputError, match="edits: more than 4 rows to save; the limit here is 4"):
        api.save_edits(tiny_pair, "t", changes)
    monkeypatch.delenv("ALBERT_LENS_MAX_EXAMPLES")
    monkeypatch.setitem(saved.MAX_SETS, "local", 2)
    api.save_edits(tiny_pair, "one", changes)
    api.save_edits(tiny_pair, "two", changes)
    with pytest.raises(api.InputError, match="name: 2 saved sets already \\(the limit here is 2\\)"):
        api.save_edits(tiny_pair, "three", changes)
    assert api.save_edits(tiny_pair, "two", changes[:1]).n == 2  # a name reused replaces its set
    with pytest.raises(api.InputError, match="dataset: no saved set «nothing» here"):
        api.resolve_dataset(tiny_pair, "saved:nothing")
    assert not list(store.glob(".*.tmp"))


def test_hosted_a_visitors_sets_are_theirs_alone(tiny_pair, store, monkeypatch):
    from app.core import api
    from app.core.ground import saved

    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    changes = _edits(tiny_pair)
    with pytest.raises(api.InputError, match="saved sets here are each visitor's own"):
        api.save_edits(tiny_pair, "mine", changes)
    a, b = api.visitor_key("session-a"), api.visitor_key("session-b")
    assert a != b and a == api.visitor_key("session-a") and len(a) == 32
    kept = api.save_edits(tiny_pair, "mine", changes, key=a)
    assert kept.spec == f"saved:{a}/mine"
    assert [s.name for s in api.saved_sets(a)] == ["mine"] and api.saved_sets(b) == []
    assert len(api.resolve_dataset(tiny_pair, kept.spec)) == kept.n
    with pytest.raises(api.InputError, match="dataset: no saved set «mine» here"):
        api.resolve_dataset(tiny_pair, f"saved:{b}/mine")
    with pytest.raises(api.InputError, match="saved sets here are each visitor's own"):
        api.resolve_dataset(tiny_pair, "saved:mine")  # the operator's folder is not a visitor's
    # a day later, the next save anywhere drops it; the server's total is capped
    old = time.time() - saved.HOSTED_TTL_S - 60
    os.utime(store / "hosted" / a / "mine.jsonl", (old, old))
    api.save_edits(tiny_pair, "theirs", changes, key=b)
    assert api.saved_sets(a) == []
    monkeypatch.setitem(saved.MAX_SETS, "server", 1)
    with pytest.raises(api.InputError, match="this server holds its most saved sets"):
        api.save_edits(tiny_pair, "more", changes, key=a)


def test_the_command_line_saves_a_counterfactual_and_reads_the_set_by_name(tiny_pair, tiny_dirs, store, capsys):
    from app.cli import main
    from app.core import api

    models = ["--models", str(tiny_dirs["bert"]), str(tiny_dirs["albert"]), "--task", "sst2"]
    assert main(["counterfactual", *models, SENTENCES[0], "--generator", "your_edit",
                 "--edited", SENTENCES[0] + " Or not.", "--json", "--save-as", "typed"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["changes"][0]["edited"] == [SENTENCES[0] + " Or not."]
    assert "saved: 2 examples as saved:typed" in out.err
    assert main(["counterfactual", *models, "--dataset", "sentiment_plain @rows:1,3,6,7", "--generator",
                 "dataset_flip_rate", "--replacements", "the -> a", "--json", "--save-as", "cli set"]) == 0
    res = json.loads(capsys.readouterr().out)
    source = api.resolve_dataset(tiny_pair, "sentiment_plain @rows:1,3,6,7")
    expected = [t for e, c in zip(source.examples, res["examples"]) for t in (list(e.texts), c["edited"])]
    assert main(["project", *models, "--dataset", "saved:cli set", "--projection", "pca", "--json"]) == 0
    projected = json.loads(capsys.readouterr().out)
    assert projected["dataset"] == "saved «cli set»" and projected["n"] == 8
    assert projected["texts"] == expected
    assert sorted(s.name for s in api.saved_sets()) == ["cli set", "typed"]


def test_the_apps_pins_keep_each_edit_once_and_save_them_for_every_tab(tiny_pair, store):
    from app.core import api
    from app.ui import counterfactuals as ui
    from app.ui.common import Ctx

    ctx = Ctx.of(tiny_pair)
    res = json.loads(json.dumps(api.counterfactual(tiny_pair, SENTENCES[0], generator="your_edit",
                                                   edited=SENTENCES[0].replace("charming", "awful", 1)).to_dict()))
    pinned, table, said = ui.pin([], res)
    pinned, table, said = ui.pin(pinned, res)  # pinned twice: kept once
    more = json.loads(json.dumps(api.counterfactual(tiny_pair, generator="dataset_flip_rate",
                                                    dataset="sentiment_plain @rows:3,4,7",
                                                    replacements="the -> a").to_dict()))
    pinned, table, said = ui.pin(pinned, more)
    other = json.loads(json.dumps(api.counterfactual(tiny_pair, generator="dataset_flip_rate",
                                                     dataset="sentiment_plain @rows:1,6",
                                                     replacements="the -> a").to_dict()))
    pinned, table, said = ui.pin(pinned, other)  # pins from a second dataset
    assert len(pinned) == 1 + len(more["examples"]) + len(other["examples"]) and f"{len(pinned)} edits pinned" in said
    assert list(table["from"]) == ["typed", *[f"row {c['row']}" for c in more["examples"] + other["examples"]]]
    assert list(table["original"])[0] == SENTENCES[0]
    first = tiny_pair.models[0].name
    assert list(table[f"{first} before"])[0] == res["changes"][0]["before"][0]["label"]
    kept = ui.save_pinned(ctx)(pinned, "pins", True, key=None)
    ds = api.resolve_dataset(tiny_pair, kept.spec)
    assert [list(e.texts) for e in ds.examples][:2] == [res["changes"][0]["original"], res["changes"][0]["edited"]]
    rows = [json.loads(line) for line in (store / "pins.jsonl").read_text().splitlines()]
    # each edit names the dataset it was pinned from, the typed one none
    edits = [r["origin"] for r in rows if r["kind"] == "edit"]
    assert more["dataset"] != other["dataset"] and edits == ["typed or generated", *[
        f"{res_['dataset']}, row {c['row']}" for res_ in (more, other) for c in res_["examples"]]]
    assert ui.unpin()[0] == []
