"""The example plugin (examples/plugin), installed as a user installs it (pip reads its entry points): its saliency
method, generator and capability reach the facade, the command line, the app, gradio_client and LIT, with their
options, in the main process and in a hosted app's workers; uninstalled, none of them is anywhere. And every
declared option of every capability, plugins' included, reaches every front end, and nothing undeclared does."""
from __future__ import annotations

import importlib
import inspect
import json
import logging
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

from app.core import api
from app.core.declare import capabilities, plugins
from app.core.ground.alignment import split_words
from app.core.ground.errors import InputError

from .conftest import free_port, gradio_client, shared

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "examples" / "plugin"
SENTENCE = "A truly wonderful film"


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory) -> Path:
    """The example plugin installed by pip (no index: it needs nothing but albert-lens) into a folder of its own,
    from a copy (pip's build writes beside the source): `PYTHONPATH=<folder>` is the venv with the plugin."""
    source = tmp_path_factory.mktemp("plugin-source") / "plugin"
    shutil.copytree(PLUGIN, source)
    site = tmp_path_factory.mktemp("plugin-site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "--target", str(site), str(source)], check=True, capture_output=True, text=True)
    assert (site / "albert_lens_example").is_dir()
    return site


def _forget_the_plugin(site: Path) -> None:
    capabilities.forget_plugins()
    if str(site) in sys.path:
        sys.path.remove(str(site))
    for name in [m for m in sys.modules if m.startswith("albert_lens_example")]:
        del sys.modules[name]
    importlib.invalidate_caches()


@pytest.fixture
def plugin(plugin_site):
    """This process with the plugin installed (its folder on sys.path, the entry points read afresh); afterwards
    as before, the plugin's method, generator and capability gone again."""
    sys.path.insert(0, str(plugin_site))
    importlib.invalidate_caches()
    capabilities.forget_plugins()
    loaded = capabilities.load_plugins()
    try:
        yield loaded
    finally:
        _forget_the_plugin(plugin_site)


def _with_plugin(site: Path) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


def _cli(args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)


# ------------------------------------------------------------------ loading
def test_the_plugin_loads_its_three_entry_points(plugin):
    assert sorted((p.group, p.name, p.error) for p in plugin) == [
        (plugins.CAPABILITIES_GROUP, "lengths", ""), (plugins.GENERATORS_GROUP, "repeat_word", ""),
        (plugins.METHODS_GROUP, "word_length", "")]
    assert all(p.package == "albert-lens-example-plugin" for p in plugin)


def test_a_broken_plugin_is_named_in_one_warning_and_the_others_load(plugin_site, tmp_path, caplog):
    """An entry point whose module fails to import, and one naming the wrong kind of object: each is left out
    with one warning line naming it and why; the working plugin's method still loads."""
    broken = tmp_path / "broken-0.1.dist-info"
    broken.mkdir()
    (broken / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 0.1\n")
    (broken / "entry_points.txt").write_text("[albert_lens.saliency_methods]\nnope = no_such_module:Nope\n"
                                             "[albert_lens.capabilities]\njson = json:dumps\n")
    sys.path[:0] = [str(tmp_path), str(plugin_site)]
    importlib.invalidate_caches()
    capabilities.forget_plugins()
    try:
        with caplog.at_level(logging.WARNING, logger="albert_lens.plugins"):
            loaded = {p.name: p for p in capabilities.load_plugins()}
        assert "ModuleNotFoundError" in loaded["nope"].error and "TypeError" in loaded["json"].error
        assert loaded["word_length"].error == "" and "word_length" in capabilities.get("saliency").option(
            "method").choices
        lines = [r.getMessage() for r in caplog.records]
        assert "plugin broken (albert_lens.saliency_methods 'nope') not loaded: ModuleNotFoundError: No module " \
            "named 'no_such_module'" in lines
        assert any("'json') not loaded: TypeError" in m for m in lines)
    finally:
        sys.path.remove(str(tmp_path))
        _forget_the_plugin(plugin_site)


def test_a_variants_option_that_clashes_is_refused_and_leaves_the_catalogue_as_it_was():
    from app.core.techniques import saliency

    class Clash(saliency.Method):
        name, label = "clash", "clash"
        options = (capabilities.Option("tolerance", int, 3, "not integrated gradients' tolerance"),)

    before = capabilities.get("saliency").options
    with pytest.raises(ValueError, match="option 'tolerance' is declared otherwise by 'integrated_gradients'"):
        saliency.register(Clash)
    assert "clash" not in saliency.METHODS and capabilities.get("saliency").options == before

    class Reserved(saliency.Method):
        name, label = "reserved", "reserved"
        options = (capabilities.Option("target", str, "", "the capability's own name"),)

    with pytest.raises(ValueError, match="option 'target' is already the capability's"):
        saliency.register(Reserved)
    assert "reserved" not in saliency.METHODS


# ------------------------------------------------------------------ the facade
def test_the_plugins_method_generator_and_capability_through_the_facade(plugin, tiny_pair, offline_pair):
    res = api.saliency(tiny_pair, SENTENCE, method="word_length", power=2)
    for m in res["maps"]:
        assert m["scores"] == [float(len(w) ** 2) for w in SENTENCE.split()]
    assert res["signed"] is False
    with pytest.raises(InputError, match="power: 4 is out of range; give a whole number from 1 to 3"):
        api.saliency(tiny_pair, SENTENCE, method="word_length", power=4)
    # the option reaches the method that reads it; every other method is built without it
    ig = api.saliency(tiny_pair, SENTENCE, method="integrated_gradients", power=3)
    assert ig["method"] == "integrated_gradients"
    table = api.saliency_methods(tiny_pair, SENTENCE, power=3)
    rows = {(r["method"], r["model"]): r["scores"] for r in table["rows"]}
    assert rows[("word_length", tiny_pair.models[0].name)] == [float(len(w) ** 3) for w in SENTENCE.split()]

    edited = api.counterfactual(tiny_pair, "Great film, awful ending", generator="repeat_word", times=2)
    (change,) = json.loads(json.dumps(edited.to_dict()))["changes"]  # as gradio_client and --json read it
    assert change["edited"] == ["Great Great Great film, awful ending"] and change["edits"] == [
        ["Great", "Great Great Great"]]
    after = api.predict(tiny_pair, "Great Great Great film, awful ending")["models"]
    assert [a["label"] for a in change["after"]] == [m["label"] for m in after]
    with pytest.raises(InputError, match="times: 0 is out of range; give a whole number from 1 to 5"):
        api.counterfactual(tiny_pair, "Great film", generator="repeat_word", times=0)


def _lengths_reference(pair, dataset: str, limit: int, short: int = 10, long: int = 25) -> dict:
    """Accuracy per length bucket and McNemar's exact p, computed here: the models' predictions, the words the
    core counts, scipy's binomial test on the discordant pairs."""
    ds = api.resolve_dataset(pair, dataset, limit, visitor=False)
    preds = [api.predict_examples(clf, ds.examples) for clf in pair.models]
    gold = np.asarray([ex.label for ex in ds.examples], dtype=object)
    right = [np.asarray(p.predicted, dtype=object) == gold for p in preds]
    words = np.asarray([sum(len(split_words(t)) for t in ex.texts) for ex in ds.examples])
    masks = {"short": words <= short, "medium": (words > short) & (words <= long), "long": words > long}
    out = {}
    for bucket, mask in masks.items():
        a, b = right[0][mask], right[1][mask]
        only = [int(np.sum(a & ~b)), int(np.sum(~a & b))]
        p = 1.0 if sum(only) == 0 else binomtest(only[0], sum(only), 0.5).pvalue
        out[bucket] = {"n": int(mask.sum()), "accuracy": [float(a.mean()), float(b.mean())], "p": min(1.0, p)}
    return out


def test_lengths_on_sst2_dev_from_the_command_line_against_a_reference(plugin_site, plugin, offline_pair, capsys,
                                                                     monkeypatch):
    """A fresh process with the plugin installed answers `lengths` (its JSON against a reference computed here);
    its text output and a refusal are read from the CLI in this process, the plugin installed here too."""
    import logging

    from app.cli import main

    dev = str(shared("glue", "sst2", "dev.tsv"))
    out = _cli(["lengths", "--pair", "offline", "--dataset", dev, "--limit", "100", "--json"],
               env=_with_plugin(plugin_site))
    assert out.returncode == 0, out.stderr[-2000:]
    record = json.loads(out.stdout)
    want = _lengths_reference(offline_pair, dev, 100)
    assert record["n"] == 100 and [b["bucket"] for b in record["buckets"]] == ["short", "medium", "long"]
    for b in record["buckets"]:
        assert b["n"] == want[b["bucket"]]["n"] and b["n"] > 0
        assert b["accuracy"] == pytest.approx(want[b["bucket"]]["accuracy"])
        assert b["comparison"]["p_value"] == pytest.approx(want[b["bucket"]]["p"])
    monkeypatch.setattr(logging.root, "handlers", [])  # the CLI's logging.basicConfig: this call's stderr
    capsys.readouterr()
    assert main(["lengths", "--pair", "offline", "--dataset", dev, "--limit", "100"]) == 0
    text = capsys.readouterr()
    long = next(b for b in record["buckets"] if b["bucket"] == "long")
    row = next(ln for ln in text.out.splitlines() if ln.startswith("long "))
    assert f"{long['accuracy'][0]:.1%}" in row and f"{long['accuracy'][1]:.1%}" in row and str(long["n"]) in row
    refused = main(["lengths", "--pair", "offline", "--dataset", dev, "--short", "30", "--long", "20"])
    err = capsys.readouterr().err
    assert refused == 2 and "long: 20 words must be above short (30)" in err
    assert "Traceback" not in err


def test_the_command_line_lists_the_plugin_only_when_it_is_installed(plugin_site):
    from app import cli

    env = _with_plugin(plugin_site)
    top, sal, cf = (_cli(args, env) for args in (["--help"], ["saliency", "--help"], ["counterfactual", "--help"]))
    assert "lengths" in top.stdout and "accuracy on short, medium and long inputs" in top.stdout
    assert "word_length" in sal.stdout and "--power" in sal.stdout and "to this power" in sal.stdout
    assert "repeat_word" in cf.stdout and "--times" in cf.stdout
    # this process has no plugin installed: none of it is there
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if getattr(a, "choices", None) and "saliency" in a.choices).choices
    assert "lengths" not in sub and "word_length" not in sub["saliency"].format_help()
    assert "--power" not in sub["saliency"].format_help() and "--times" not in sub["counterfactual"].format_help()


def test_uninstalled_nothing_of_the_plugin_appears_anywhere(tiny_pair):
    """The venv as set up: no method, generator, capability, option, endpoint or LIT component of the plugin."""
    from werkzeug.test import Client

    from app.core.techniques import saliency
    from app.ui import build
    from lit_models.server import make_server

    assert "word_length" not in saliency.METHODS and "repeat_word" not in capabilities.COUNTERFACTUAL_GENERATORS
    assert "lengths" not in {c.name for c in capabilities.declared()}
    assert "power" not in {o.name for o in capabilities.get("saliency").options}
    endpoints = build(tiny_pair).get_api_info()["named_endpoints"]
    assert "/lengths" not in endpoints
    assert "power" not in [p["parameter_name"] for p in endpoints["/saliency"]["parameters"]]
    lit = make_server(tiny_pair, port=None, server_type="external").serve()
    info = json.loads(Client(lit).post("/get_info", json={}).get_data())
    model = info["models"][tiny_pair.models[0].name]
    assert "word length" not in model["interpreters"] and "lengths (albert-lens)" not in info["metrics"]
    assert "repeat_word (albert-lens)" not in model["generators"]


# ------------------------------------------------------------------ LIT
def _lit_get(client, route: str, body: dict) -> object:
    from urllib.parse import quote

    resp = client.post(quote(route, safe="/?&="), json=body)
    assert resp.status_code == 200, resp.get_data(as_text=True)[:500]
    return json.loads(resp.get_data())


def test_lit_lists_the_plugin_and_every_method_scores_as_the_app_does(plugin, tiny_pair):
    """LIT's /get_info lists the plugin's method (with its option), generator and capability; for each saliency
    method, LIT's scores for a sentence are the app's (each model explaining its own prediction, as in LIT)."""
    from lit_nlp.api.dataset import input_hash
    from werkzeug.test import Client

    from app.core.techniques.saliency import METHODS
    from lit_models.salience import lit_name
    from lit_models.server import make_server

    lit = make_server(tiny_pair, port=None, server_type="external").serve()
    client = Client(lit)
    info = _lit_get(client, "/get_info", {})
    model = info["models"][tiny_pair.models[0].name]
    assert "word length" in model["interpreters"] and "repeat_word (albert-lens)" in model["generators"]
    assert "lengths (albert-lens)" in info["metrics"]
    assert info["interpreters"]["word length"]["configSpec"]["power"]["max_val"] == 3
    assert set(info["metrics"]["lengths (albert-lens)"]["configSpec"]) == {"short", "long"}
    assert info["generators"]["repeat_word (albert-lens)"]["configSpec"]["times"]["default"] == 2

    data = {"sentence": SENTENCE}
    data["_id"] = input_hash(data)
    inputs = [{"id": data["_id"], "data": data}]
    for method in METHODS:
        config = {"power": 2} if method == "word_length" else {}
        app = api.saliency(tiny_pair, SENTENCE, method=method, target="own", **config)
        for clf, want in zip(tiny_pair.models, app["maps"]):
            got = _lit_get(client, f"/get_interpretations?model={clf.name}&dataset_name=sentiment_plain"
                                   f"&interpreter={lit_name(method)}", {"inputs": inputs, "config": config})
            assert got[0]["salience"]["tokens"] == want["words"], method
            np.testing.assert_allclose(got[0]["salience"]["salience"], want["scores"], rtol=1e-5, atol=1e-7,
                                       err_msg=method)
    assert lit_name("word_length") == "word length" and lit_name("integrated_gradients") == "integrated gradients"


# ------------------------------------------------------------------ every option at every door, both directions
# what a front end takes besides a capability's options: its inputs and its own controls, each named here
CLI_OWN = {"help", "pair", "models", "task", "device", "precision", "force_precision", "text", "text2", "dataset",
           "limit", "show", "engine", "address", "workers", "out", "colour", "png", "json", "func", "capability",
           "command", "verbose", "save_as"}
APP_OWN = {"text", "text2", "dataset", "limit", "uploaded", "colour"}


def test_every_declared_option_reaches_every_front_end_and_nothing_undeclared_does(plugin, tiny_pair):
    from werkzeug.test import Client

    from app import cli
    from app.ui import build
    from lit_models.declared import metric_name, served
    from lit_models.generators import lit_name as generator_name
    from lit_models.generators import ours
    from lit_models.salience import FIXED, lit_name
    from lit_models.server import make_server

    declared = {c.name: c for c in capabilities.declared()}
    assert "lengths" in declared and "power" in {o.name for o in declared["saliency"].options}
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if getattr(a, "choices", None) and "saliency" in a.choices).choices
    endpoints = build(tiny_pair).get_api_info()["named_endpoints"]
    # 60 labelled rows: every metric answers on them (a slice needs twice its smallest size)
    lit = make_server(tiny_pair, [str(shared("glue", "sst2", "dev.tsv"))], limit=60, port=None,
                      server_type="external").serve()
    info = _lit_get(Client(lit), "/get_info", {})
    for name, capability in declared.items():
        options = {o.name for o in capability.options}
        # the facade: each option by name, and its inputs and the front ends' passed values besides
        params = set(inspect.signature(getattr(api, name)).parameters)
        assert options <= params and params - options <= {"pair", "text", "text2", *api.PASSED}, name
        # the command line: a flag per option, each flag an option or the command line's own
        flags = {a.dest for a in sub[name.replace("_", "-")]._actions}
        assert options <= flags and flags - options <= CLI_OWN, (name, flags - options - CLI_OWN)
        # the app: the capability's endpoint (and the tab's other endpoints of it) takes every option
        mine = [e for e in endpoints if e.strip("/") == name or (e.strip("/").startswith(f"{name}_") and e.strip("/")
                                                                 not in declared and e != "/attack_stop")]
        for endpoint in mine:
            got = {p["parameter_name"] for p in endpoints[endpoint]["parameters"]}
            assert options <= got and got - options <= APP_OWN, (endpoint, options - got, got - options - APP_OWN)
        assert f"/{name}" in endpoints, name
        # LIT: where it is ours, its options are its component's settings; else LIT's counterpart says where
        if name in {c.name for c in served()}:
            assert set(info["metrics"][metric_name(name)]["configSpec"]) == options, name
        elif capability.parts is not None:  # the methods' and generators' own components, below
            pass
        else:
            assert capability.lit_counterpart, f"{name}: in LIT neither as ours nor through a counterpart"
    # LIT's salience and generators: each variant's options, exactly, and every option of the capability in some
    saliency_seen, generator_seen = set(), set()
    for method, part in capabilities.SALIENCY_METHODS.items():
        spec = set(info["interpreters"][lit_name(method)]["configSpec"])
        assert spec == {"output", *(o.name for o in part.options)}, method
        saliency_seen |= spec
    assert saliency_seen | set(FIXED) == {o.name for o in declared["saliency"].options}
    for generator in ours():
        spec = set(info["generators"][generator_name(generator)]["configSpec"])
        assert spec == {o.name for o in capabilities.COUNTERFACTUAL_GENERATORS[generator].options}, generator
        generator_seen |= spec
    assert generator_seen | {"generator"} == {o.name for o in declared["counterfactual"].options}


# ------------------------------------------------------------------ a hosted app answers from its workers
def _wait_for(url: str, process: subprocess.Popen, seconds: float = 600) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if process.poll() is not None:
            raise AssertionError(f"the app exited ({process.returncode}): {process.stderr.read()[-3000:]}")
        try:
            urllib.request.urlopen(url, timeout=5).read()
            return
        except OSError:
            time.sleep(0.5)
    raise AssertionError("the app did not answer")


@pytest.mark.slow
def test_a_hosted_app_offers_the_plugin_and_answers_from_its_workers(plugin_site):
    """`ALBERT_LENS_HOSTED=1`: heavy requests run in worker processes, which load the plugin from its entry
    points themselves; gradio_client sees /lengths and /saliency with power, and both answer."""
    port = free_port()
    env = {**_with_plugin(plugin_site), "ALBERT_LENS_HOSTED": "1", "ALBERT_LENS_WORKERS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "app", "app", "--pair", "offline", "--port", str(port)],
                               cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        _wait_for(url, process)
        client = gradio_client(url)
        info = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
        assert "power" in [p["parameter_name"] for p in info["/saliency"]["parameters"]]
        assert [p["parameter_name"] for p in info["/lengths"]["parameters"]] == ["dataset", "limit", "short", "long"]
        raw, *_ = client.predict(text=SENTENCE, method="word_length", power=3, api_name="/saliency")
        assert [m["scores"] for m in raw["maps"]] == [[float(len(w) ** 3) for w in SENTENCE.split()]] * 2
        record, text, _figure = client.predict(dataset="sst2 dev (released GLUE)", limit=20, api_name="/lengths")
        assert record["n"] == 20 and sum(b["n"] for b in record["buckets"]) == 20
        assert "accuracy by length" in text
        children = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
        assert children, "hosted mode answers from worker processes"
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def test_lit_metrics_of_a_runner_capability_answer_as_the_facade_and_a_small_selection_breaks_nothing(
        plugin, tiny_pair):
    """The plugin's `lengths` as LIT metrics: on a selection its numbers are the facade's on the same rows (each
    model's row the whole answer's, named by bucket); with a selection too small for `slices` (it needs twice its
    smallest slice) the table still answers, that metric without numbers (LIT's page got a 400 for the lot)."""
    from lit_models.declared import metric_name
    from lit_models.server import make_server

    dev = str(shared("glue", "sst2", "dev.tsv"))
    lit = make_server(tiny_pair, [dev], limit=60, port=None, server_type="external").serve()
    named = next(iter(lit._datasets))
    ds = api.resolve_dataset(tiny_pair, dev, 8, visitor=False)
    picked = [{"id": str(i), "data": {"sentence": ex.text, "label": ex.label}, "meta": {}}
              for i, ex in enumerate(ds.examples)]
    want = api.lengths(tiny_pair, ds).to_dict()
    asked = ",".join([metric_name("lengths"), metric_name("slices"), "multiclass"])
    for clf in tiny_pair.models:
        out = lit._get_metrics({"inputs": picked}, model=clf.name, dataset_name=named, metrics=asked)
        [lengths] = out[metric_name("lengths")]
        for bucket in want["buckets"]:
            assert lengths["metrics"][f"buckets.{bucket['bucket']}.n"] == bucket["n"]
            if bucket["n"]:
                assert lengths["metrics"][f"buckets.{bucket['bucket']}.accuracy.1"] == pytest.approx(
                    bucket["accuracy"][1])
        assert out[metric_name("slices")][0]["metrics"] == {}
        assert out["multiclass"][0]["metrics"]


def test_every_count_field_of_the_app_starts_at_a_value_the_core_takes(plugin, tiny_pair):
    """The More tab's "max examples" for a capability over a dataset (the plugin's `lengths`) started at 0 on the
    page, and its first Run was refused ("limit: 0 is too small"): every count field starts at a count the
    declaration accepts, and the section's handler answers with it."""
    import gradio as gr

    from app.core.ground import policy
    from app.ui import build, declared
    from app.ui.common import Ctx

    demo = build(tiny_pair)
    counts = [c for c in demo.blocks.values() if isinstance(c, gr.Number) and "max examples" in str(c.label)]
    assert counts and all(isinstance(c.value, int | float) and c.value >= 1 for c in counts), \
        [(c.label, c.value) for c in counts]
    first = Ctx.of(tiny_pair).default_dataset  # every dataset field's first value (the released dev split here)
    section = next(c for c in counts if c.parent is not None and any(
        getattr(s, "value", None) == first for s in c.parent.children) and any(
        getattr(s, "label", "") == "dataset (shipped name or path)" for s in c.parent.children))
    assert policy.count("limit", section.value, cap=policy.limits()["max_examples"]) == section.value
    record, text, figure = declared.handler("lengths")(Ctx.of(tiny_pair), "sentiment_plain", section.value)
    assert record["n"] == 30 and "accuracy by length" in text and figure is not None
