"""Where is my sentence (`app/core/techniques/locate.py`): an input among a dataset's examples, for each model,
through the
facade, the command line and the Projection tab's handler."""
from __future__ import annotations

import json

import numpy as np
import pytest

from app.core.execution.inference import predict
from app.core.ground.data import Example
from app.core.techniques.locate import nearest, share_below


def _rows(tmp_path, n=40):
    rows = tmp_path / "rows.tsv"
    words = ["fine", "dull", "lovely", "awful", "long", "short", "warm", "cold"]
    rows.write_text("sentence\tlabel\n" + "".join(f"the film was {words[i % 8]} and number {i}\t{i % 2}\n"
                                                  for i in range(1, n + 1)), encoding="utf-8")
    return str(rows)


def test_share_below_and_nearest_against_a_count_by_hand():
    assert share_below(np.array([0.1, 0.2, 0.2, 0.9]), 0.2) == pytest.approx((1 + 0.5 * 2) / 4)
    assert share_below(np.array([0.5]), 0.7) == 1.0 and share_below(np.array([0.5]), 0.1) == 0.0
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.0]])
    order, cos = nearest(vectors, np.array([2.0, 0.1]), 2)
    assert list(order) == [0, 2] and cos[0] == pytest.approx(2 / np.hypot(2, 0.1))


def test_an_input_from_the_dataset_finds_itself_and_its_place(tiny_pair, tmp_path, capsys):
    """An input that is one of the dataset's rows is its own nearest example in both models (cosine 1), sits at
    the mean place of its neighbours in the projection, and its score's share below matches a count over the
    models' own predictions of the dataset; the command line and the app's handler give the same answer."""
    from app import cli
    from app.core import api
    from app.ui import projection
    from app.ui.common import Ctx

    rows = _rows(tmp_path)
    text = "the film was cold and number 7"  # row 7
    res = api.locate(tiny_pair, text, dataset=rows, projection="pca", k=3, visitor=False)
    assert res["n"] == 40 and res["k"] == 3 and res["input"] == [text]
    texts = [Example((f"the film was {['fine', 'dull', 'lovely', 'awful', 'long', 'short', 'warm', 'cold'][i % 8]}"
                      f" and number {i}",)) for i in range(1, 41)]
    points = res["projection"]["points"]
    for clf, m in zip(tiny_pair.models, res["models"]):
        first = m["neighbours"][0]
        assert first["row"] == 7 and first["cosine"] == pytest.approx(1.0, abs=1e-5) and first["text"] == text
        assert [nb["cosine"] for nb in m["neighbours"]] == sorted((nb["cosine"] for nb in m["neighbours"]),
                                                                  reverse=True)
        place = [(p["x"], p["y"]) for p in points if p["model"] == m["model"]]
        want = np.mean([place[nb["index"]] for nb in m["neighbours"]], axis=0)
        assert m["position"] == pytest.approx(list(want))
        probs = predict(clf, texts).probs
        own = predict(clf, [Example((text,))]).probs[0]
        c = int(own.argmax())
        assert m["answer"] == clf.labels[c] and m["score"] == pytest.approx(float(own[c]), abs=1e-5)
        # between the share surely below and the share below or level, to within float noise between passes
        low, high = (probs[:, c] < m["score"] - 1e-5).mean(), (probs[:, c] <= m["score"] + 1e-5).mean()
        assert low <= m["share_below"] <= high and m["scores"] == pytest.approx(list(probs[:, c]), abs=1e-5)
    models = ["--models", str(tiny_pair.models[0].path), str(tiny_pair.models[1].path), "--task", "sst2"]
    assert cli.main(["locate", *models, text, "--dataset", rows, "--projection", "pca", "--k", "3", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [[nb["row"] for nb in m["neighbours"]] for m in got["models"]] == \
        [[nb["row"] for nb in m["neighbours"]] for m in res["models"]]
    assert cli.main(["locate", *models, text, "--dataset", rows, "--projection", "pca"]) == 0
    printed = capsys.readouterr().out
    assert "nearest examples:" in printed and "row     7  cos 1.000" in printed

    out = projection.locate(Ctx.of(tiny_pair), text, None, rows, None, "pca", "cls", -1, "gold", 3, None)
    raw, summary, figure, table, *plots, overlay, picked, state = out
    assert [nb["row"] for nb in raw["models"][0]["neighbours"]] == [nb["row"] for nb in res["models"][0]["neighbours"]]
    assert list(table["row"])[:3] == [nb["row"] for nb in res["models"][0]["neighbours"]]
    for plot, m in zip(plots, res["models"]):
        star = plot["value"][plot["value"]["nearest"] == projection.YOURS]
        # the mark: its point at the input's place, then rings around it, which make it findable among 500
        assert len(star) > 1 and list(star[["x", "y"]].iloc[0]) == pytest.approx(m["position"])
        assert star[["x", "y"]].mean().tolist() == pytest.approx(m["position"])
        (xlo, xhi), (ylo, yhi) = plot["x_lim"], plot["y_lim"]
        assert 0.01 < (star["x"].max() - star["x"].min()) / (xhi - xlo) < 0.1
        assert 0.01 < (star["y"].max() - star["y"].min()) / (yhi - ylo) < 0.1
        assert (star["row"] == 0).all()  # a click on the mark opens no dataset row
        # a colour of its own, with a legend entry; its nearest examples (either model's) picked in another
        colours = plot["color_map"]
        assert colours[projection.YOURS] == projection.MARK_COLOUR and set(colours) >= set(plot["value"]["nearest"])
        assert list(colours.values()).count(projection.MARK_COLOUR) == 1
        near = plot["value"][plot["value"]["nearest"] == projection.NEAREST]
        assert set(near["row"]) == {nb["row"] for mm in res["models"] for nb in mm["neighbours"]}
    # the nearest examples are the picked points: listed, in the dataset's order, and a dataset every tab can read
    near_rows = sorted({nb["row"] for m in res["models"] for nb in m["neighbours"]})
    assert list(picked["row"]) == near_rows
    name, spec = projection.picked_dataset(state)
    assert spec == f"{rows} @rows:{','.join(map(str, near_rows))}" and name.startswith(f"{len(near_rows)} points")
    # the overlay is drawn too (it had stayed empty): both clouds and the input marked on each
    both = overlay["value"]
    assert len(both[~both["model"].str.startswith(projection.YOURS)]) == len(raw["projection"]["points"]) == 80
    for m in res["models"]:
        mine = both[both["model"] == f"{projection.YOURS} ({m['model']})"]
        assert len(mine) > 1 and list(mine[["x", "y"]].iloc[0]) == pytest.approx(m["position"])
    assert projection.neighbour_texts(raw, 0) == [text] and "row 7" in projection.neighbour_note(raw, 0)
    assert state["dataset"] == rows and len(state["points"]) == 80
    assert figure.axes and "above" in figure.axes[0].get_title()


def test_locate_needs_an_input_and_checks_its_options(tiny_pair, tmp_path):
    from app.core import api
    from app.core.ground.errors import InputError

    rows = _rows(tmp_path, 12)
    with pytest.raises(InputError, match="empty"):
        api.locate(tiny_pair, "  ", dataset=rows, projection="pca")
    with pytest.raises(InputError, match="k: 51 is out of range"):
        api.locate(tiny_pair, "a fine film", dataset=rows, projection="pca", k=51)


@pytest.mark.parametrize("capability", ["locate", "project"])
def test_a_layers_refusal_states_the_models_real_range_or_none(tiny_pair, tmp_path, capability):
    """A fractional layer is refused as not whole, without a range no model has (it said "from -1000 to 1000");
    a whole one past the model's layers is refused with the model's own range (the tiny models: -1 to 2)."""
    from app.core import api
    from app.core.ground.errors import InputError

    rows = _rows(tmp_path, 12)
    given = {"dataset": rows, "projection": "pca"}
    run = (lambda **o: api.locate(tiny_pair, "a fine film", **given, **o)) if capability == "locate" else \
        (lambda **o: api.project(tiny_pair, **given, **o))
    for bad in (2.5, "2.5", "two"):
        with pytest.raises(InputError, match=r"^layer: .* is not a whole number \(-1 = the top layer") as err:
            run(layer=bad)
        assert "1000" not in str(err.value)
    with pytest.raises(InputError, match=r"^layer: 9 is out of range; give a whole number from -1 to 2$"):
        run(layer=9)
