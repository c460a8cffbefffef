"""The facade is the one door: each capability answers the same through the command line and through the
facade the app's handlers call, for the same inputs, shipped example names and released names included (the
CLI once refused names the app accepted). Each test runs the CLI with --json and the facade directly."""
from __future__ import annotations

import json

import numpy as np
import pytest

from app.cli import main
from app.core import api

pytestmark = pytest.mark.usefixtures("textattack_loaded")  # see the fixture: an import under capsys

SHIPPED = "sentiment_plain"  # a shipped example set, by name
TEXT = "a gorgeous, witty, seductive movie."


def _cli(capsys, tiny_dirs, *args: str) -> dict:
    assert main([args[0], "--models", str(tiny_dirs["bert"]), str(tiny_dirs["albert"]), "--task", "sst2",
                 *args[1:]]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_predict(tiny_dirs, tiny_pair, capsys):
    cli = _cli(capsys, tiny_dirs, "predict", "--json", TEXT)
    app = api.predict(tiny_pair, TEXT)
    assert cli["input"] == app["input"] == [TEXT]
    for a, b in zip(cli["models"], app["models"]):
        assert a["label"] == b["label"] and a["probabilities"] == pytest.approx(b["probabilities"], abs=1e-6)


def test_saliency_of_one_input_and_of_a_shipped_dataset(tiny_dirs, tiny_pair, capsys):
    cli = _cli(capsys, tiny_dirs, "saliency", "--method", "gradient_x_input", "--json", TEXT)
    app = api.saliency(tiny_pair, TEXT, None, method="gradient_x_input")
    for a, b in zip(cli["maps"], app["maps"]):
        assert a["words"] == b["words"] and a["scores"] == pytest.approx(b["scores"], abs=1e-6)
    cli = _cli(capsys, tiny_dirs, "saliency", "--method", "gradient_x_input", "--dataset", SHIPPED, "--limit", "6",
               "--json")
    app = api.saliency(tiny_pair, dataset=SHIPPED, method="gradient_x_input", limit=6)
    assert cli["n"] == app["n"] == 6 and cli["dataset"] == app["dataset"]
    for key in ("comprehensiveness", "sufficiency"):
        assert [m["mean"] for m in cli[key]] == pytest.approx([m["mean"] for m in app[key]], abs=1e-6)


def test_counterfactual_flip_rate_over_a_shipped_dataset(tiny_dirs, tiny_pair, capsys):
    cli = _cli(capsys, tiny_dirs, "counterfactual", "--generator", "dataset_flip_rate", "--replacements",
               "film -> movie, movie -> film", "--dataset", SHIPPED, "--limit", "20", "--json")
    app = api.counterfactual(tiny_pair, "", None, generator="dataset_flip_rate",
                             replacements="film -> movie, movie -> film", dataset=SHIPPED, limit=20)
    assert cli["examples_changed"] == app["examples_changed"] > 0
    assert cli["flip_rate"] == pytest.approx(app["flip_rate"])


def test_projection_of_a_shipped_dataset(tiny_dirs, tiny_pair, capsys):
    cli = _cli(capsys, tiny_dirs, "project", "--dataset", SHIPPED, "--projection", "pca", "--limit", "12", "--json")
    app = api.project(tiny_pair, SHIPPED, projection="pca", layer=-1, pooling="cls", limit=12)
    assert cli["n"] == app["n"] == 12
    assert cli["knn_overlap"] == pytest.approx(app["knn_overlap"])
    assert cli["procrustes_disparity"] == pytest.approx(app["procrustes_disparity"], abs=1e-6)


def test_benchmark_of_a_shipped_and_a_released_dataset(tiny_dirs, tiny_pair, capsys):
    """The CLI's benchmark read files only: a shipped name or the released dev set by name was refused."""
    for name, limit in ((SHIPPED, 30), ("sst2 dev (released GLUE)", 40)):
        cli = _cli(capsys, tiny_dirs, "benchmark", "--dataset", name, "--limit", str(limit), "--json")
        app = api.benchmark(tiny_pair, name, limit)
        assert cli["n"] == app["n"] == limit and cli["dataset"] == app["dataset"]
        assert [m["accuracy"] for m in cli["models"]] == [m["accuracy"] for m in app["models"]]
        assert cli["comparison"]["p_value"] == pytest.approx(app["comparison"]["p_value"])


def test_attack_of_a_shipped_dataset_and_its_resume_file(tiny_dirs, tiny_pair, capsys, tmp_path):
    out = tmp_path / "rows.jsonl"
    cli = _cli(capsys, tiny_dirs, "attack", "--recipe", "deepwordbug", "--dataset", SHIPPED, "--n", "3",
               "--query-budget", "40", "--out", str(out), "--json")
    app = api.attack(tiny_pair, recipe="deepwordbug", dataset=SHIPPED, n=3, query_budget=40, time_limit=60)

    def outcomes(rows):
        return [[(r["outcome"], r["adversarial"], r["queries"]) for r in ex["results"]] for ex in rows]

    assert len(cli["examples"]) == len(app["examples"]) == 3
    assert outcomes(cli["examples"]) == outcomes(app["examples"])
    def counts(summary):  # everything but the seconds each attack took
        return {m: {k: v for k, v in s.items() if "seconds" not in k} for m, s in summary.items()}

    assert counts(cli["summary"]) == counts(app["summary"])
    # the file the CLI wrote resumes the facade: nothing is attacked again, the answer is the same
    again = api.attack(tiny_pair, recipe="deepwordbug", dataset=SHIPPED, n=3, query_budget=40, time_limit=60, out=out)
    assert again["resumed"] == 3 and outcomes(again["examples"]) == outcomes(app["examples"])
    assert len(out.read_text().splitlines()) == 3


def test_checklist_by_its_released_name(tiny_dirs, tiny_pair, capsys):
    name = "sentiment (released CheckList)"
    cli = _cli(capsys, tiny_dirs, "checklist", "--suite", name, "--sample", "2", "--json")
    app = api.checklist(tiny_pair, suite=name, sample=2)
    assert [t["name"] for t in cli["tests"]] == [t["name"] for t in app["tests"]]
    assert [[r["fail_rate"] for r in t["results"]] for t in cli["tests"]] == \
        [[r["fail_rate"] for r in t["results"]] for t in app["tests"]]


def test_facts(tiny_dirs, tiny_pair, capsys):
    cli = _cli(capsys, tiny_dirs, "facts", "--json", TEXT, "a dull film")
    app = api.facts(tiny_pair, [TEXT, "a dull film"])
    for a, b in zip(cli["models"], app["models"]):
        assert a["parameters"] == b["parameters"] and a["shares_layers"] == b["shares_layers"]
        assert a["transitions"]["cosine"] == pytest.approx(b["transitions"]["cosine"], abs=1e-6)


def test_embed_of_a_shipped_dataset(tiny_dirs, tiny_pair, capsys, tmp_path):
    from app.core.techniques.embeddings import embed

    out = tmp_path / "emb.npz"
    assert main(["embed", "--models", str(tiny_dirs["bert"]), str(tiny_dirs["albert"]), "--task", "sst2",
                 "--dataset", SHIPPED, "--limit", "10", "--pooling", "mean", "--out", str(out)]) == 0
    saved = np.load(out)
    app = api.embed(tiny_pair, SHIPPED, 10, pooling="mean")
    examples = api.resolve_dataset(tiny_pair, SHIPPED, 10).examples
    for clf in tiny_pair.models:
        np.testing.assert_allclose(saved[clf.name], app["embeddings"][clf.name], atol=1e-6)
        np.testing.assert_allclose(app["embeddings"][clf.name], embed(clf, examples, pooling="mean"), atol=1e-6)
    assert app["n"] == 10


def test_an_empty_limit_is_every_row_for_the_operator_and_a_thousand_for_a_visitor(tiny_pair, tmp_path):
    """The CLI's benchmark without --limit scored every row before it went through the facade, and still does;
    the app's empty field means the visitor's default of 1000."""
    rows = tmp_path / "rows.csv"
    rows.write_text("text,label\n" + "".join(f"a {'fine' if i % 2 else 'dull'} film take {i},{i % 2}\n"
                                             for i in range(1200)))
    assert api.benchmark(tiny_pair, str(rows), None, visitor=False)["n"] == 1200
    assert api.benchmark(tiny_pair, str(rows), None)["n"] == 1000


def test_front_ends_enter_the_core_through_the_facade_only():
    """The CLI, the app's tabs, the report and the LIT wrappers import from the core only the facade and the
    modules that shape its answers for people (views, plots, errors); the CLI also its light flag checks and
    process set-up, which must not load PyTorch before `--help`."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    top = {p.stem for p in (root / "app/core").glob("*.py")}  # the modules at the top of the core
    allowed = {"api", "views", "plots", "errors"}
    # workers: the app's thread limits, set before PyTorch loads (the facade would load it first); capabilities:
    # the declarations the CLI's generated commands are built from, so their --help answers without PyTorch
    extra = {"app/cli.py": {"policy", "runtime", "workers", "capabilities"}}
    files = [root / "app/cli.py", root / "app/report.py", *(root / "app/ui").glob("*.py"),
             *(root / "lit_models").glob("*.py")]
    seen = {}
    for path in files:
        rel = str(path.relative_to(root))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            # a core module by its own name, whichever layer's folder holds it (`app.core.present.views`)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("app.core"):
                parts = node.module.removeprefix("app.core").lstrip(".").split(".")
                names = [parts[-1]] if len(parts) == 2 or parts[0] in top else [a.name for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name.split(".")[-1] for a in node.names if a.name.startswith("app.core.")]
            for name in names:
                seen.setdefault(rel, set()).add(name)
                assert name in allowed | extra.get(rel, set()), f"{rel} imports app.core.{name}"
    assert seen["app/ui/compare.py"] == {"api", "views"} and "api" in seen["app/report.py"]


# what a front end takes and the facade doesn't: which pair and how it runs, where the answer goes and how it is
# drawn, a file dropped on the page (read instead of `dataset`); `ctx` and `progress` are the app's plumbing
FRONT_END_ONLY = {"ctx", "progress", "uploaded", "colour", "pair", "models", "task", "device", "precision",
                  "force_precision", "json", "png", "show", "out", "file", "list", "engine", "address", "workers",
                  "batch", "save_as"}  # save_as: the command line keeps a result as a saved set (`api.save_result`)
# an endpoint named otherwise than the facade call that answers it
SERVED_BY = {"saliency_dataset": "saliency"}


def test_every_front_end_spells_each_option_as_the_facade_does():
    """One name per option: each gradio_client parameter of an endpoint and each flag of a command is a
    parameter of the facade call that answers it, under the same name (the app once said `method_name`,
    `ig_tolerance` and `explained` where the facade and the CLI say `method`, `tolerance` and `output`)."""
    import argparse
    import inspect

    from app import cli
    from app.core import api
    from app.ui import attacks, benchmark, checklist, compare, counterfactuals, facts, inside, projection, saliency

    def facade(name: str) -> set[str]:
        name = name.replace("-", "_")
        return set(inspect.signature(getattr(api, SERVED_BY.get(name, name))).parameters)

    checked = []
    for module in (attacks, benchmark, checklist, compare, counterfactuals, facts, inside, projection, saliency):
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn.__module__ == module.__name__ and hasattr(api, SERVED_BY.get(name, name)) \
                    and not name.startswith("_"):
                params = set(inspect.signature(fn).parameters)
                assert params - FRONT_END_ONLY <= facade(name), (f"/{name}", params - FRONT_END_ONLY - facade(name))
                checked.append("/" + name)
    assert len(checked) >= 13 and "/saliency_dataset" in checked and "/checklist" in checked
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    # every command but the offline pair's training, an operator's build step whose flags fill `TrainSettings`
    commands = [c for c in sub.choices if hasattr(api, c.replace("-", "_")) and c != "train-offline"]
    for command in commands:
        flags = {a.dest for a in sub.choices[command]._actions} - {"help"}
        assert flags - FRONT_END_ONLY <= facade(command), (command, flags - FRONT_END_ONLY - facade(command))
    assert len(commands) >= 12


def test_every_method_facts_and_attention_report_their_progress(tiny_pair):
    """Their bars sat at 10% until the answer came: now each reports what it has done, in its own units."""
    from app.core import api

    seen = {"methods": [], "facts": [], "attention": []}
    api.saliency_methods(tiny_pair, "a fine film", progress=lambda d, n: seen["methods"].append((d, n)))
    api.facts(tiny_pair, ["a fine film", "an awful film"], lambda d, n: seen["facts"].append((d, n)))
    api.attention(tiny_pair, "a fine film", progress=lambda d, n: seen["attention"].append((d, n)))
    n = len(api.METHODS)
    assert seen["methods"] == [(k, n) for k in range(1, n + 1)]
    assert seen["facts"] == [(1, 3), (2, 3), (3, 3)]  # each model's facts, then the paired latency
    assert seen["attention"] == [(1, 2), (2, 2)]


def test_a_slice_of_a_dataset_is_a_dataset_every_front_end_reads(tiny_pair, tiny_dirs, tmp_path, capsys,
                                                                    monkeypatch):
    """"<dataset> @rows:..." names some rows of a dataset (1-based, as the app's tables number them): the facade
    reads exactly those, in that order, once each; the CLI's --dataset takes it; a slice from `api.slices`
    carries its rows as the dataset numbers them (an unlabelled row first shifts them), so its spec reads its
    examples back. Bad or oversized specs are refused naming the field."""
    from app.cli import main
    from app.core import api
    from app.core.ground.errors import InputError

    rows = tmp_path / "rows.csv"
    lines = ["a film take 0,"] + [f"a {'fine' if i % 2 else 'dull'} film take {i},{i % 2}" for i in range(1, 60)]
    rows.write_text("text,label\n" + "\n".join(lines) + "\n")
    whole = api.resolve_dataset(tiny_pair, str(rows), visitor=False)
    got = api.resolve_dataset(tiny_pair, f"{rows} @rows:5,2-3,5,40", visitor=False)
    assert [e.texts for e in got.examples] == [whole.examples[r - 1].texts for r in (5, 2, 3, 40)]
    assert got.name.endswith("4 picked rows")
    assert api.benchmark(tiny_pair, api.slice_spec(str(rows), [2, 3, 4]), visitor=False)["n"] == 3
    assert main(["benchmark", "--models", str(tiny_dirs["bert"]), str(tiny_dirs["albert"]), "--task", "sst2",
                 "--dataset", f"{rows} @rows:2-11", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 10
    res = api.slices(tiny_pair, str(rows), limit=None, min_size=5, clusters=0, visitor=False)
    for s in res.slices[:3]:
        assert s["rows"] == [i + 2 for i in s["indices"]]  # row 1 has no label: the labelled ones start at 2
        back = api.resolve_dataset(tiny_pair, api.slice_spec(str(rows), s["rows"]), visitor=False)
        assert [list(e.texts) for e in back.examples[:5]] == s["examples"]
    for spec, msg in ((f"{rows} @rows:61", "row 61 is past the end"), (f"{rows} @rows:0", "rows count from 1"),
                      (f"{rows} @rows:3-1", "a range runs upwards"), (f"{rows} @rows:,", "names no row"),
                      (f"{rows} @rows:2,x", "'x' in @rows is not a row number")):
        with pytest.raises(InputError, match=f"dataset: .*{msg}"):
            api.resolve_dataset(tiny_pair, spec, visitor=False)
    # issue 58: the operator's cap is 2**62, and this range was once expanded to a list before the dataset's
    # length was known (16 GB, then SIGKILL); now it is refused from the ranges' ends, nothing built
    import tracemalloc

    tracemalloc.start()
    try:
        for spec, msg in ((f"{rows} @rows:3,1-999999999", "row 61 is past the end of"),
                          (f"{rows} @rows:70-80,2", "row 70 is past the end of"),
                          (f"{rows} @rows:{'9' * 5000}", "is not a row number"),
                          (f"{rows} @rows:1-²", "'1-²' in @rows is not a row number")):
            with pytest.raises(InputError, match=f"dataset: .*{msg}"):
                api.resolve_dataset(tiny_pair, spec, visitor=False)
        assert tracemalloc.get_traced_memory()[1] < 50 * 2**20
    finally:
        tracemalloc.stop()
    assert main(["benchmark", "--models", str(tiny_dirs["bert"]), str(tiny_dirs["albert"]), "--task", "sst2",
                 "--dataset", f"{rows} @rows:1-999999999"]) == 2
    assert "row 61 is past the end" in capsys.readouterr().err
    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    with pytest.raises(InputError, match="dataset: @rows names more than 500 rows"):
        api.resolve_dataset(tiny_pair, "sentiment_plain @rows:1-600")
    with pytest.raises(InputError, match="row 501 is past the first 500 rows"):
        api.resolve_dataset(tiny_pair, "sentiment_plain @rows:501")


def test_one_row_number_for_an_example_in_every_dataset_view(tiny_pair, tmp_path):
    """Issue 71: saliency over a slice numbered its rows by their place in the slice ("row 2" was the dataset's
    row 6), and counterfactuals over a dataset had no row at all. Each view of a slice now names the dataset's own
    row, as the file and the CLI count it: saliency, counterfactual edits, attacks, and their tables."""
    from app.core import api
    from app.core.present import views

    rows = tmp_path / "rows.csv"
    lines = ["a film take 0,"] + [f"a {'fine' if i % 2 else 'dull'} film take {i},{i % 2}" for i in range(1, 40)]
    rows.write_text("text,label\n" + "\n".join(lines) + "\n")
    picked = [6, 28, 1, 33]  # row 1 has no gold label: an attack leaves it out, the others keep theirs
    spec = f"{rows} @rows:{','.join(map(str, picked))}"
    text_of = {r: lines[r - 1].rsplit(",", 1)[0] for r in picked}

    sal = api.saliency(tiny_pair, dataset=spec, method="gradient_x_input", visitor=False).to_dict()
    assert [e["row"] for e in sal["examples"]] == picked
    assert all(text_of[e["row"]] == e["texts"][0] for e in sal["examples"])
    table = views.lowest_agreement_frame(sal)
    assert set(table["row"]) <= set(picked) and all(text_of[r] == t for r, t in zip(table["row"], table["input"]))

    cf = api.counterfactual(tiny_pair, dataset=spec, generator="dataset_flip_rate",
                            replacements="film -> movie", visitor=False).to_dict()
    assert sorted(c["row"] for c in cf["examples"]) == sorted(picked)
    assert all(c["original"][0] == text_of[c["row"]] for c in cf["examples"])
    frame = views.changes_frame(cf, [m.name for m in tiny_pair.models])
    assert sorted(frame["row"]) == sorted(picked)

    att = api.attack(tiny_pair, recipe="deepwordbug", dataset=spec, n=3, query_budget=20, time_limit=60,
                     visitor=False).to_dict()
    assert [e["row"] for e in att["examples"]] == [6, 28, 33]
    shown = views.attack_views(att, [m.name for m in tiny_pair.models], list(tiny_pair.task.labels))[2]
    assert sorted(set(shown["row"])) == [6, 28, 33]
