"""A capability declared once: its options checked as declared, and a toy capability defined here appears in the
facade, the command line (its --help and its answer) and the app's API with no edit anywhere else."""
import json
from pathlib import Path

import pytest

from app.core.declare import capabilities
from app.core.declare.capabilities import Capability, Option
from app.core.ground import policy
from app.core.ground.errors import InputError

from .conftest import tiny_models


def shout_batch(pair, batch, times=2, mark="!"):
    """Toy job: each model's predicted label of the one input, repeated."""
    from app.core.execution.inference import predict

    return [{"model": clf.name, "said": (predict(clf, batch).predicted[0] + mark) * times} for clf in pair.models]


shout_batch.combine = "whole"
TOY = Capability("toy_shout", "Toy: each model's label, shouted.", shout_batch,
                 options=(Option("times", int, 2, "how many times", low=1, high=5),
                          Option("mark", str, "!", "what follows each label", choices=("!", "?"))))


@pytest.fixture
def toy():
    capabilities.register(TOY)
    yield TOY
    capabilities.unregister(TOY.name)


def test_a_toy_capability_appears_in_the_facade_the_cli_and_the_app(toy, tiny_pair, tiny_dirs, capsys):
    from app import cli
    from app.core import api
    from app.core.execution.inference import predict
    from app.core.ground.data import Example
    from app.ui import build, declared
    from app.ui.common import Ctx

    # the facade: api.NAME, checked against the declaration
    res = api.toy_shout(tiny_pair, "a fine film", times=3, mark="?")
    labels = [predict(m, [Example(("a fine film",))]).predicted[0] for m in tiny_pair.models]
    assert res["result"] == [{"model": m.name, "said": (lab + "?") * 3} for m, lab in zip(tiny_pair.models, labels)]
    assert res["options"] == {"times": 3, "mark": "?"}
    assert api.run("toy_shout", tiny_pair, "a fine film")["options"] == {"times": 2, "mark": "!"}
    with pytest.raises(InputError, match="times: 9 is out of range; give a whole number from 1 to 5"):
        api.toy_shout(tiny_pair, "a fine film", times=9)
    with pytest.raises(InputError, match=r"mark: '\.' is not one of \['!', '\?'\]"):
        api.toy_shout(tiny_pair, "a fine film", mark=".")
    with pytest.raises(InputError, match=r"loud: toy_shout takes no such option; it takes \['mark', 'times'\]"):
        api.toy_shout(tiny_pair, "a fine film", loud=True)

    # the command line: a subcommand with the options as flags, answering as the facade does
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["toy-shout", "--help"])
    helped = capsys.readouterr().out
    assert "Toy: each model's label, shouted." in helped and "how many times (default: 2)" in helped
    assert "--mark {!,?}" in helped
    models = tiny_models(tiny_dirs)
    assert cli.main(["toy-shout", *models, "--times", "3", "--mark", "?", "--json", "a fine film"]) == 0
    assert json.loads(capsys.readouterr().out)["result"] == res["result"]
    assert cli.main(["toy-shout", *models, "--times", "0", "a fine film"]) == 2
    assert "times: 0 is out of range" in capsys.readouterr().err

    # the app: an endpoint named as the capability, its gradio_client parameters the options, the same answer
    demo = build(tiny_pair)
    endpoint = demo.get_api_info()["named_endpoints"]["/toy_shout"]
    assert [p["parameter_name"] for p in endpoint["parameters"]] == ["text", "text2", "times", "mark"]
    assert [p["parameter_has_default"] for p in endpoint["parameters"]] == [False, True, True, True]
    got, text, figure = declared.handler("toy_shout")(Ctx.of(tiny_pair), "a fine film", None, 3, "?")
    assert figure is None  # a batch function's answer has no figure
    assert got["result"] == res["result"] and all(r["said"] in text for r in res["result"])

    # gone from every front end built after it is withdrawn
    capabilities.unregister("toy_shout")
    assert "/toy_shout" not in build(tiny_pair).get_api_info()["named_endpoints"]
    assert "toy-shout" not in cli.build_parser()._subparsers._group_actions[0].choices
    with pytest.raises(AttributeError):
        api.toy_shout  # noqa: B018


def test_options_are_checked_as_declared_and_capped_for_a_visitor(monkeypatch):
    """A count with a hosted cap is refused above it for a visitor and not for the operator, a size of work
    (`clamp`) lowered to it; an index (a range without a cap) is refused outside it; a yes/no takes its words;
    text is held to the server's length."""
    top = Option("top", int, 10, "how many", cap="max_examples")
    flag = Option("loud", bool, False, "shout")
    layer = Option("layer", int, -1, "which layer", low=-1, high=6)
    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    assert top.check(500) == 500 and top.check(10**6, visitor=False) == 10**6 and top.check("") == 10
    with pytest.raises(InputError, match="top: 1,000,000 is more than this server takes; give a whole number from 1 "
                                         "to 500"):
        top.check(10**6)
    assert Option("batch", int, 8, "rows", high=64, clamp=True).check(10**6) == 64
    with pytest.raises(InputError, match="top: 0 is too small"):
        top.check(0)
    assert [flag.check(v) for v in ("yes", "false", True, None)] == [True, False, True, False]
    with pytest.raises(InputError, match="loud: 'maybe' is not true or false"):
        flag.check("maybe")
    assert layer.check("3") == 3 and layer.check(None) == -1
    with pytest.raises(InputError, match="layer: 7 is out of range; give a whole number from -1 to 6"):
        layer.check(7)
    with pytest.raises(InputError, match="note"):
        Option("note", str, "", "a note").check("x" * 3000)
    with pytest.raises(ValueError, match="take one of"):
        Capability("bad", "clashes", shout_batch, options=(Option("dataset", str, "", "no"),))


def test_a_controls_range_is_the_one_the_check_takes(monkeypatch):
    """What a front end's control offers (`Option.span`: LIT's settings read it) is the range `check` takes: the
    hosted cap for a visitor, the declared range of an index, and a validator's own range (integrated gradients'
    tolerance, from this server's smallest to 1) where a validator sets it."""
    from lit_models.salience import lit_type

    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    top = Option("top", int, 10, "how many", cap="max_examples")
    assert top.span() == (1, 500) and top.span(visitor=False) == (1, None)
    assert Option("layer", int, -1, "which layer", low=-1, high=6).span() == (-1, 6)
    tol = capabilities.get("saliency").option("tolerance")
    low, high = tol.span()
    assert (low, high) == (policy.limits()["min_ig_tolerance"], 1.0) and low > 0
    tol.check(low), tol.check(high)
    for outside in (low / 2, high * 2):
        with pytest.raises(InputError, match="tolerance"):
            tol.check(outside)
    scalar = lit_type(tol)
    assert (scalar.min_val, scalar.max_val) == (low, high)
    assert (lit_type(top).min_val, lit_type(top).max_val) == (1, 500)


def test_the_declared_tokens_capability_reads_each_models_pieces(offline_pair, capsys):
    """The catalogue's `tokens`, through the facade and the CLI: each model's pieces are its tokenizer's own."""
    from app import cli
    from app.core import api

    text = "Unbelievably good"
    res = api.tokens(offline_pair, text, special=True)
    for clf, r in zip(offline_pair.models, res["result"]):
        ids = clf.tokenizer(text)["input_ids"]
        assert r["tokens"] == clf.tokenizer.convert_ids_to_tokens(ids) and r["n_tokens"] == len(ids)
        assert r["split_words"][0]["word"] == "Unbelievably" and "".join(
            p.lstrip("#▁") for p in r["split_words"][0]["pieces"]).lower() == "unbelievably"
    assert cli.main(["tokens", "--pair", "offline", "--special", "true", "--json", text]) == 0
    assert json.loads(capsys.readouterr().out)["result"] == res["result"]


def test_the_built_in_capabilities_are_declared_once():
    """Every capability the app has tabs for is declared and answered through `api.run`: its facade function is
    the declaration's entry point (each declared option by name, None meaning "the declared default"), its runner
    takes each option checked (keyword-only, no default of its own to drift from the declaration's) and answers
    the declared result; the command line's flags, the saliency methods and the generators are the declaration's."""
    import inspect
    import typing

    from app import cli
    from app.core import api
    from app.core.techniques import saliency

    built_in = {"saliency", "saliency_methods", "counterfactual", "project", "similarity", "attention", "attack",
                "checklist", "slices"}
    assert built_in <= {c.name for c in capabilities.declared()}
    for name in built_in:
        cap = capabilities.get(name)
        runner = capabilities.resolve(cap.runner)
        assert runner.__module__ != "app.core.api", name  # beside its technique, not in the facade
        # its declared answer is the runner's
        answers = inspect.signature(runner, eval_str=True).return_annotation
        assert cap.result is answers or cap.result in typing.get_args(answers), name
        assert cap.result.__module__ == "app.core.declare.results", name
        facade, params = inspect.signature(getattr(api, name)).parameters, inspect.signature(runner).parameters
        # the options its variants (methods, generators) declare reach it checked through **: it names none
        parts = capabilities.part_options(cap.parts) if cap.parts is not None else ()  # `get`: merged in
        assert not parts or any(p.kind is p.VAR_KEYWORD for p in params.values()), name
        for o in cap.options:
            assert facade[o.name].kind is inspect.Parameter.KEYWORD_ONLY and facade[o.name].default is None
            if o in parts:
                assert o.name not in params, (name, o.name)
                continue
            assert params[o.name].kind is inspect.Parameter.KEYWORD_ONLY, (name, o.name)
            assert params[o.name].default is inspect.Parameter.empty, (name, o.name)
    assert set(saliency.METHODS) == set(capabilities.get("saliency").option("method").choices)
    generators = capabilities.get("counterfactual").option("generator").choices
    assert tuple(capabilities.COUNTERFACTUAL_GENERATORS) == generators

    sub = next(a for a in cli.build_parser()._actions if a.dest == "command" or getattr(a, "choices", None)
               and "saliency" in a.choices).choices
    for command, name in [("saliency", "saliency"), ("counterfactual", "counterfactual"), ("project", "project"),
                          ("similarity", "similarity"), ("attention", "attention"), ("attack", "attack"),
                          ("checklist", "checklist"), ("slices", "slices")]:
        flags = {a.dest: a for a in sub[command]._actions}
        for o in capabilities.get(name).options:
            assert flags[o.name].option_strings == [o.flag], (command, o.name)
            assert flags[o.name].default == o.default and o.help in flags[o.name].help, (command, o.name)
            assert list(flags[o.name].choices or ()) == list(o.choices), (command, o.name)


def test_the_built_in_catalogue_names_its_code_as_objects_and_reads_without_pytorch():
    """Every built-in runner, batch function, saliency method and generator is named as an object (a `Later` or
    the function), not a "module:function" string, and resolves to its technique's own function; reading the whole
    catalogue, as the CLI's `--help` does, printing a declaration included, imports no PyTorch (a fresh process)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from app.core.declare import capabilities as c\n"
        "caps = c.declared()\n"
        "print(len(caps), repr(c.get('saliency').runner), repr(c.SALIENCY_METHODS['lime']))\n"
        "assert 'torch' not in sys.modules, 'reading the catalogue imported PyTorch'\n"
        f"built = {sorted(BUILT_IN)!r}\n"
        "named = [(x.name, x.runner or x.batch_fn) for x in caps if x.name in built]\n"
        "named += [(n, p.code) for p in (c.SALIENCY_METHODS, c.COUNTERFACTUAL_GENERATORS) for n, p in p.items()\n"
        "          if p.code is not None and n in built]\n"
        "for name, code in named:\n"
        "    assert isinstance(code, c.Later) or callable(code), (name, code)\n"
        "    got = c.resolve(code)\n"
        "    assert got.__module__.startswith('app.core.techniques.'), (name, got.__module__)\n"
        "print('resolved', len(named))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr[-2000:]
    count, *_ = out.stdout.split()
    assert int(count) >= 11 and "Later(_explanation.run_saliency)" in out.stdout, out.stdout
    assert f"resolved {len(BUILT_IN)}" in out.stdout, out.stdout


# the built-in capabilities, saliency methods and one-input counterfactual generators
BUILT_IN = {"tokens", "saliency", "saliency_methods", "counterfactual", "project", "locate", "similarity", "attention",
            "attack", "checklist", "slices", "gradient_norm", "gradient_x_input", "integrated_gradients", "lime",
            "occlusion", "word_replacement", "wordnet_synonym", "wordnet_antonym", "ablation_flip", "hotflip"}


def test_a_built_in_capability_runs_through_the_one_runner(tiny_pair):
    """`api.run("saliency", ...)` is `api.saliency(...)`, and a bad option is refused by the declaration, naming
    the field and what it may be."""
    from app.core import api

    via_run = api.run("saliency", tiny_pair, "a fine film", method="gradient_x_input")
    direct = api.saliency(tiny_pair, "a fine film", method="gradient_x_input")
    assert [s for m in via_run["maps"] for s in m["scores"]] == \
        pytest.approx([s for m in direct["maps"] for s in m["scores"]], rel=1e-6)
    assert via_run["method"] == "gradient_x_input" and via_run["output"] == "prob"
    with pytest.raises(InputError, match=r"method: 'shap' is not one of \['gradient_norm'"):
        api.run("saliency", tiny_pair, "a fine film", method="shap")
    with pytest.raises(InputError, match="steps: saliency takes no such option"):
        api.run("saliency", tiny_pair, "a fine film", steps=3)
    with pytest.raises(InputError, match=r"pooling: 'max' is not one of \['cls', 'mean', 'words'\]"):
        api.similarity(tiny_pair, pooling="max")
    with pytest.raises(InputError, match="head: 99999 is out of range; give a whole number from 0 to 1000"):
        api.attention(tiny_pair, "a fine film", head=99999)


def test_a_toy_saliency_method_reaches_every_front_end_from_its_class_alone(tiny_pair, tiny_dirs, capsys):
    """A method is its class (its name, its label for people, its sign, its options) and `saliency.register`: it is
    then offered by the facade, the command line, the app (its menu and gradio_client) and LIT, which serves our
    implementation under its label where LIT has none of its own; withdrawn, it is gone from each."""
    from app import cli
    from app.core import api
    from app.core.ground.data import Example
    from app.core.techniques import saliency
    from app.ui import build
    from app.ui import saliency as tab
    from app.ui.common import Ctx
    from lit_models.salience import LensSalience
    from lit_models.server import make_server

    class WordLength(saliency.Method):
        """Toy: each word scores its length, read as sensitivity (no sign)."""

        name, label, signed = "word_length", "word length", False

        def _attribute(self, example, enc, al, tgt, ctx=None):
            return self._result(al, tgt, [float(len(w.text)) for w in al.words])

    saliency.register(WordLength)
    try:
        res = api.saliency(tiny_pair, "a fine film", method="word_length")
        assert [m["scores"] for m in res["maps"]] == [[1.0, 4.0, 4.0]] * 2 and res["signed"] is False
        models = tiny_models(tiny_dirs)
        assert cli.main(["saliency", *models, "--method", "word_length", "--json", "a fine film"]) == 0
        assert [m["scores"] for m in json.loads(capsys.readouterr().out)["maps"]] == [[1.0, 4.0, 4.0]] * 2

        demo = build(tiny_pair)
        menus = [b for b in demo.blocks.values() if getattr(b, "label", None) == "method" and hasattr(b, "choices")]
        assert any(("word length", "word_length") in m.choices for m in menus)
        sal = next(f for f in demo.fns.values() if f.api_name == "saliency")  # what gradio_client calls
        got = sal.fn("a fine film", None, "word_length", "predicted", "1e-03", "prob")[0]
        assert [m["scores"] for m in got["maps"]] == [[1.0, 4.0, 4.0]] * 2
        assert tab.saliency(Ctx.of(tiny_pair), "a fine film", method="word_length")[0]["method"] == "word_length"

        lit = make_server(tiny_pair, port=None, server_type="external").serve()  # the WSGI app alone
        ours = lit._interpreters["word length"]
        assert isinstance(ours, LensSalience) and ours.meta_spec()["salience"].signed is False
        out = ours.run([{"sentence": "a fine film"}], lit._models[tiny_pair.models[0].name], None)
        assert list(out[0]["salience"].tokens) == ["a", "fine", "film"]
        assert [float(x) for x in out[0]["salience"].salience] == [1.0, 4.0, 4.0]
        assert WordLength(tiny_pair.models[0]).attribute(Example(("a fine film",))).scores == [1.0, 4.0, 4.0]
    finally:
        saliency.unregister("word_length")
    with pytest.raises(InputError, match="method: 'word_length' is not one of"):
        api.saliency(tiny_pair, "a fine film", method="word_length")
    sub = next(a for a in cli.build_parser()._actions if getattr(a, "choices", None) and "saliency" in a.choices)
    assert "word_length" not in next(a for a in sub.choices["saliency"]._actions if a.dest == "method").choices
    assert "word length" not in make_server(tiny_pair, port=None, server_type="external").serve() \
        ._interpreters


def votes_batch(pair, batch, top=2):
    """Toy job over a dataset: each model's commonest predicted labels, with their counts."""
    from collections import Counter

    from app.core.execution.inference import predict

    return [{"model": clf.name, "top": [[lab, n] for lab, n in Counter(predict(clf, batch).predicted).most_common(top)]}
            for clf in pair.models]


votes_batch.combine = "whole"
TOY_DATA = Capability("toy_votes", "Toy: each model's commonest predicted labels over a dataset.", votes_batch,
                      inputs="dataset", options=(Option("top", int, 2, "labels listed", low=1, high=5),))


def test_a_toy_capability_over_a_dataset_appears_in_the_facade_the_cli_the_app_and_lit(tiny_pair, tiny_dirs,
                                                                                         tmp_path, capsys):
    """A capability that reads a dataset, from its declaration alone: the facade reads the dataset's first `limit`
    rows, the command line takes --dataset and --limit, the app's More tab has a section whose gradio_client
    endpoint takes the dataset, its limit and the options, LIT's metrics table has it on the selected examples;
    each answers with the same counts, which a count of the models' own predictions on those rows gives
    independently."""
    from collections import Counter

    from app import cli
    from app.core import api
    from app.core.execution.inference import predict
    from app.core.ground.data import Example
    from app.ui import build, declared
    from app.ui.common import Ctx
    from lit_models.declared import metric_name
    from lit_models.server import make_server

    rows = tmp_path / "rows.tsv"
    texts = ["a fine film", "a dull film", "great", "awful", "fine", "never again"]
    rows.write_text("sentence\tlabel\n" + "".join(f"{t}\t1\n" for t in texts), encoding="utf-8")
    capabilities.register(TOY_DATA)
    try:
        res = api.toy_votes(tiny_pair, str(rows), limit=4, top=1)
        want = [[list(Counter(predict(m, [Example((t,)) for t in texts[:4]]).predicted).most_common(1)[0])]
                for m in tiny_pair.models]
        assert [r["top"] for r in res["result"]] == want and res["n"] == 4 and res["options"] == {"top": 1}
        models = tiny_models(tiny_dirs)
        assert cli.main(["toy-votes", *models, "--dataset", str(rows), "--limit", "4", "--top", "1", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["result"] == res["result"]
        assert cli.main(["toy-votes", *models, "--dataset", str(rows), "--top", "6"]) == 2
        assert "top: 6 is out of range" in capsys.readouterr().err
        endpoint = build(tiny_pair).get_api_info()["named_endpoints"]["/toy_votes"]
        assert [p["parameter_name"] for p in endpoint["parameters"]] == ["dataset", "limit", "top"]
        got, text, _ = declared.handler("toy_votes")(Ctx.of(tiny_pair), str(rows), 4, 1)
        assert got["result"] == res["result"] and all(str(r["model"]) in text for r in res["result"])

        # LIT: a metrics component on the selected examples (the declared defaults: top=2), asked as the page asks
        lit = make_server(tiny_pair, [str(rows)], port=None, server_type="external").serve()
        assert metric_name("toy_votes") in lit._metrics
        named = next(n for n in lit._datasets if "rows" in n)
        picked = [{"id": str(i), "data": {"sentence": t, "label": "positive"}, "meta": {}}
                  for i, t in enumerate(texts[:5])]
        full = api.toy_votes(tiny_pair, str(rows), limit=5)["result"]
        for clf, want in zip(tiny_pair.models, full):
            out = lit._get_metrics({"inputs": picked}, model=clf.name, dataset_name=named,
                                   metrics=metric_name("toy_votes"))
            [row] = out[metric_name("toy_votes")]
            assert row["metrics"] == {f"top.{lab}": float(n) for lab, n in want["top"]}
            assert set(row["metrics"]) <= set(lit._info["metrics"][metric_name("toy_votes")]["metaSpec"])  # columns
            assert sum(row["metrics"].values()) == 5.0
        capabilities.unregister("toy_votes")
        lit = make_server(tiny_pair, [str(rows)], port=None, server_type="external").serve()
        assert metric_name("toy_votes") not in lit._metrics
    finally:
        capabilities.unregister("toy_votes")
