"""Hugging Face Space image steps (scripts/space_build.sh, run here in a fresh venv) and hosted-mode caps."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.core import api
from app.core.execution.pair import Pair
from app.core.ground import policy
from app.core.ground.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def hosted(monkeypatch):
    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    monkeypatch.setenv("ALBERT_LENS_ALLOWED_PAIRS", "offline")


def test_hosted_mode_caps(hosted, tiny_pair):
    with pytest.raises(InputError, match="hosted mode serves only its configured pairs"):
        Pair.resolve(models=["a", "b"])
    with pytest.raises(InputError, match="'rte' is not served here"):
        Pair.resolve("rte")
    with pytest.raises(InputError, match="field 'sentence' is 3,000 characters long; the limit here is 2,000"):
        api.predict(tiny_pair, "x" * 3000)
    assert api.limits()["max_examples"] == 500
    with pytest.raises(InputError, match="limit: 10,000 is more than this server takes; give a whole number from 1 "
                                         "to 500"):
        api.resolve_dataset(tiny_pair, "sentiment_plain", 10_000)
    assert len(api.resolve_dataset(tiny_pair, "sentiment_plain", 500)) <= 500
    with pytest.raises(InputError, match="field 'replacements' is 3,000 characters long; the limit here is 2,000"):
        api.counterfactual(tiny_pair, "a fine film", None, generator="word_replacement",
                           replacements="film -> movie, " * 200)
    with pytest.raises(InputError, match="texts: 501 inputs; the limit here is 500"):
        api.facts(tiny_pair, ["a fine film"] * 501)
    with pytest.raises(InputError, match="tolerance: 1e-05 is below this server's smallest, 0.0001"):
        api.saliency(tiny_pair, "a fine film", None, method="integrated_gradients", target=None, tolerance="1e-5")


def test_not_hosted_by_default():
    assert api.limits()["hosted"] is False
    assert api.limits()["max_chars"] == 100_000


def test_dockerfile_runs_the_tested_script_as_uid_1000_on_7860():
    text = (ROOT / "Dockerfile").read_text()
    assert "scripts/space_build.sh" in text and "useradd -m -u 1000" in text and "USER user" in text
    assert "--port 7860" in text and "ALBERT_LENS_HOSTED=1" in text
    # behind the Space's proxy every request comes from it: without this, all visitors would share one address's
    # share of /predict (app/core/execution/shares.py)
    assert "ALBERT_LENS_PROXIES=1" in text
    front = (ROOT / "README.md").read_text().split("---")[1]
    assert "sdk: docker" in front and "app_port: 7860" in front


@pytest.mark.slow
def test_space_build_script_in_a_fresh_venv(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("VIRTUAL_ENV") and k not in ("TA_CACHE_DIR", "NLTK_DATA")}
    env["ALBERT_LENS_CACHE"] = str(tmp_path / "cache")
    env["ALBERT_LENS_PAIR"] = "offline"
    # the image's requirements install and import; the .pyc files the image compiles at build (~30 s here) are
    # not what this checks: skipped, by uv and, where uv can't install and pip does, by pip
    env["ALBERT_LENS_BYTECODE"] = "0"
    env["PIP_NO_COMPILE"] = "1"
    # ...and Python writes them as the first process imports (where PYTHONDONTWRITEBYTECODE is set, as on this
    # project's machines, each of the build's three processes compiled torch and transformers again)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run(["bash", "scripts/space_build.sh", str(tmp_path / "venv")], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "space_build: ok" in out.stdout
    assert (tmp_path / "venv" / "bin" / "albert-lens").is_file()
    assert (tmp_path / "cache" / "textattack" / "post_install_check_3").is_file()
    assert (tmp_path / "venv" / "bin" / "uv").is_file()  # installed by uv (from pip's index settings), not pip


def test_uv_is_handed_pips_index_settings(tmp_path):
    """uv reads no pip configuration: the index settings pip would use (a machine's own wheel folder, its mirrors,
    constraints) are passed to it, from pip's config files and its environment alike."""
    (tmp_path / "pip.conf").write_text("[global]\nfind-links = /w1\nextra-index-url = file:///a file:///b\n"
                                       "constraint = /c.txt\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=str(tmp_path / "pip.conf"), PIP_INDEX_URL="http://mirror/simple",
               PIP_FIND_LINKS="/w2")
    venv = Path(sys.prefix)  # the venv running the suite: .venv, or .venv-py3.13 where PYTHON= chose another
    out = subprocess.run(["bash", "scripts/install_pinned.sh", "--uv-options", str(venv)], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    opts = out.stdout.split("\n")
    pairs = sorted(zip(opts[0::2], opts[1::2]))
    assert ("--index-url", "http://mirror/simple") in pairs and ("--constraint", "/c.txt") in pairs
    assert {v for k, v in pairs if k == "--find-links"} >= {"/w1", "/w2"}
    assert [v for k, v in pairs if k == "--extra-index-url"] == ["file:///a", "file:///b"]


def test_shipped_pairs_on_a_three_way_nli_pair_keep_texts_and_drop_foreign_labels(tmp_path):
    """rte_pairs carries RTE's labels; an MNLI pair (3 classes) still gets the texts, without wrong gold labels."""
    from app.core import api
    from app.core.execution.pair import Pair

    from .conftest import _tiny_bert

    a = _tiny_bert(tmp_path / "a", num_labels=3)
    b = _tiny_bert(tmp_path / "b", num_labels=3)
    pair = Pair.resolve(models=[str(a), str(b)], task="mnli")
    ds = api.resolve_dataset(pair, None)
    assert ds.name and len(ds) >= 3 and all(len(e.texts) == 2 for e in ds.examples)
    assert all(e.label is None for e in ds.examples)
    assert "cities" in ds.examples[0].texts[0]


@pytest.mark.parametrize("is_hosted", [False, True])
def test_hosted_lit_cannot_write_or_read_server_files(monkeypatch, tmp_path, tiny_pair, is_hosted):
    """LIT's /save_datapoints writes wherever the page says; hosted, the server runs in LIT's demo mode, which
    refuses (and no model can be loaded by path). Locally (127.0.0.1) saving stays available."""
    from werkzeug.test import Client

    from lit_models.server import make_server

    if is_hosted:
        monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    app = make_server(tiny_pair, None, port=None, server_type="external").serve()
    client = Client(app)
    info = client.post("/get_info", json={}).get_json()
    target = tmp_path / "saved.lit.jsonl"  # LIT's own format, written as named
    from lit_nlp.api.dataset import input_hash

    row = {"sentence": "a fine film", "label": "positive"}
    key = input_hash(row)  # a datapoint's id is its content's (a request's are checked)
    inputs = [{"id": key, "data": {**row, "_id": key}, "meta": {}}]
    client.post(f"/save_datapoints?dataset_name=sentiment_plain&path={target}", json={"inputs": inputs})
    assert target.exists() is (not is_hosted)
    assert info["demoMode"] is is_hosted and bool(info["initSpecs"]["models"]) is (not is_hosted)


def test_hosted_lit_caps_a_visitors_text_but_serves_the_operators_long_rows(hosted, tiny_pair, tmp_path):
    """LIT's datapoint editor takes any text, and its LIME multiplies it; hosted, a field longer than the app's
    cap is refused with the app's message, unless the operator's own datasets hold texts that long."""
    from werkzeug.test import Client

    from lit_models.server import make_server

    long_row = "a long private review that goes on " * 80  # 2,800 characters, longer than the 2,000 cap
    data = tmp_path / "long.tsv"
    data.write_text(f"sentence\tlabel\n{long_row}\t1\na short one\t0\n")
    client = Client(make_server(tiny_pair, [str(data)], port=None, server_type="external").serve())
    name = tiny_pair.models[0].name

    def preds(text):  # LIT caches predictions by id, which must be the example's content hash
        from lit_nlp.api.dataset import input_hash

        data = {"sentence": text, "label": "positive"}
        key = data["_id"] = input_hash(data)
        inputs = [{"id": key, "data": data, "meta": {}}]
        return client.post(f"/get_preds?model={name}&dataset_name=long&requested_types=MulticlassPreds",
                           json={"inputs": inputs})

    assert preds(long_row).status_code == 200
    refused = preds("x" * 5000)
    assert refused.status_code == 400
    assert "field 'sentence' is 5,000 characters long; the limit here is 3,080" in refused.get_data(as_text=True)
    # and the number of texts one request asks for (LIT's LIME takes its sample count from the page)
    from lit_nlp.components.lime_explainer import LIME, NUM_SAMPLES_KEY

    from lit_models.models import models_for

    model = next(iter(make_server(tiny_pair, [str(data)], port=None, server_type="external").serve()
                      ._models.values()))
    row = {"sentence": " ".join(f"word{i}" for i in range(24)), "label": "positive"}  # 2^24 distinct samples
    assert len(LIME().run([row], model, None, config={NUM_SAMPLES_KEY: 256})) == 1
    too_many = r"inputs: 5,001 texts in one request \(LIME.s samples count\); the limit here is 2,000"
    with pytest.raises(InputError, match=too_many):
        LIME().run([row], model, None, config={NUM_SAMPLES_KEY: 5000})
    assert models_for(tiny_pair.models)[name].max_inputs is None  # only the hosted server sets caps


def _tsv(path: Path, n: int = 2) -> Path:
    rows = [
        "a private review nobody shipped\t1",
        *(f"another private review, number {i}\t{i % 2}" for i in range(n - 1)),
    ]
    path.write_text("sentence\tlabel\n" + "\n".join(rows) + "\n")
    return path


def test_hosted_mode_reads_no_server_paths(hosted, tiny_pair, tmp_path, monkeypatch):
    """A visitor must not make a hosted server read any file it can (another app's .csv, a config .json) by
    typing a path into a dataset or suite field; the message is the same whether or not the file exists."""
    monkeypatch.setattr(policy, "_READABLE", [])
    private = _tsv(tmp_path / "private.tsv")
    refused = "this hosted server reads only its shipped examples, released data and uploaded files"
    for spec in (str(private), str(tmp_path / "missing.tsv"), str(api.ASSETS_DIR / ".." / ".." / private),
                 "glue:sst2"):
        with pytest.raises(InputError, match=f"dataset: {refused}"):
            api.resolve_dataset(tiny_pair, spec)
    with pytest.raises(InputError, match=f"suite: {refused}"):
        api.checklist(tiny_pair, suite=str(tmp_path / "x_suite.json"))
    link_dir = tmp_path / "uploads"
    link_dir.mkdir()
    (link_dir / "link.tsv").symlink_to(private)  # a link inside an allowed folder leads out of it
    api.allow_reads_under(link_dir)
    with pytest.raises(InputError, match=refused):
        api.resolve_dataset(tiny_pair, str(link_dir / "link.tsv"))
    ok = _tsv(link_dir / "upload.tsv")
    assert [e.texts[0] for e in api.resolve_dataset(tiny_pair, str(ok)).examples][
        0
    ] == "a private review nobody shipped"
    assert len(api.resolve_dataset(tiny_pair, "sentiment_plain", 5)) == 5  # shipped names still work


def test_hosted_benchmark_scores_the_released_dev_set_within_the_cap(hosted, tiny_pair, tmp_path):
    """The Benchmark tab offers the task's released GLUE dev split, which a hosted server may read, at most
    `max_examples` of it; a typed server path is refused like everywhere else."""
    dev = api.released_dev_set(tiny_pair)
    assert dev is not None and dev.endswith("glue/sst2/dev.tsv")
    res = api.benchmark(tiny_pair, dev)  # its default, 1,000 rows, lowered to the cap; a typed 10,000 refused
    assert res["n"] == api.limits()["max_examples"] == 500
    with pytest.raises(InputError, match="limit: 10,000 is more than this server takes"):
        api.benchmark(tiny_pair, dev, 10_000)
    with pytest.raises(InputError, match="dataset: this hosted server reads only"):
        api.benchmark(tiny_pair, str(_tsv(tmp_path / "private.tsv")))


def test_hosted_lit_reads_the_files_its_operator_named(hosted, tiny_pair, tmp_path):
    from lit_models.server import datasets_for

    private = _tsv(tmp_path / "private.tsv")
    assert [len(d.examples) for d in datasets_for(tiny_pair, [str(private)]).values()] == [2]


def test_local_mode_reads_any_path(tiny_pair, tmp_path):
    private = _tsv(tmp_path / "private.tsv")
    assert len(api.resolve_dataset(tiny_pair, str(private))) == 2


def test_hosted_app_reads_uploads_but_not_typed_paths(client, monkeypatch, tmp_path):
    """Through the app: the upload folder is registered at build, so an uploaded file projects; the same
    file's server path typed into the attack tab's dataset field is refused."""
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    private = _tsv(tmp_path / "private.tsv", 6)
    res = client.predict("sentiment_plain", handle_file(str(private)), "pca", "cls", -1, "gold", 30,
                         api_name="/project")[0]
    assert res["n"] == 6
    with pytest.raises(AppError, match="dataset: this hosted server reads only"):
        client.predict("", "", "deepwordbug", None, str(private), 2, 50, 10, api_name="/attack")


@pytest.mark.parametrize("is_hosted", [False, True])
def test_hosted_app_offers_no_path_fields(monkeypatch, tiny_pair, is_hosted, tmp_path):
    """Hosted, the dataset dropdowns take shipped names only and the suite path is read-only (uploads remain)."""
    import gradio as gr

    from app.core.ground import saved

    monkeypatch.setattr(saved, "root", lambda: tmp_path / "saved")  # no set saved by another test offered

    from app.ui import build

    if is_hosted:
        monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    demo = build(tiny_pair)
    dropdowns = [b for b in demo.blocks.values() if isinstance(b, gr.Dropdown) and "dataset" in (b.label or "")]
    suite = [b for b in demo.blocks.values() if isinstance(b, gr.Dropdown) and "CheckList suite" in (b.label or "")]
    # benchmark, projection, saliency, flip rate, inside, attacks, CheckList's perturbations
    assert len(dropdowns) == 7 and len(suite) == 1
    assert {b.allow_custom_value for b in dropdowns + suite} == {not is_hosted}
    assert any("path" in b.label for b in dropdowns + suite) is (not is_hosted)
    # released data and suites are offered by name, label and value alike: no server path reaches the page
    offered = [c for b in dropdowns + suite for c in b.choices]
    assert ("sst2 dev (released GLUE)", "sst2 dev (released GLUE)") in offered
    assert ("sentiment (released CheckList)", "sentiment (released CheckList)") in offered
    assert all(label == value and "/" not in value for label, value in offered if value)  # "" : the attack's none
    # a dropdown that can't be typed in can't be emptied either: the attack's offers going back to the text
    attack = [b for b in dropdowns if b.label.startswith("or a dataset")]
    assert len(attack) == 1 and attack[0].value == "" and ("none: attack the text above", "") in attack[0].choices


@pytest.mark.parametrize("is_hosted", [False, True])
def test_lit_answers_a_failed_request_in_one_line_and_hosted_has_no_loaders(monkeypatch, tiny_pair, is_hosted, caplog):
    """LIT's own error page sent a visitor the full Python traceback, naming server paths; now one line, the
    traceback in the log. Hosted, /create_dataset and /create_model have no loaders to pass keywords to."""
    from werkzeug.test import Client

    from lit_models.server import make_server

    if is_hosted:
        monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    client = Client(make_server(tiny_pair, None, port=None, server_type="external").serve())
    info = client.post("/get_info", json={}).get_json()
    assert bool(info["initSpecs"]["datasets"]) is (not is_hosted)
    for path, body in (("/create_dataset?dataset_name=sentiment_plain", {"config": {"new_name": "x", "bad": 1}}),
                       ("/create_dataset?dataset_name=nosuch", {"config": {"new_name": "y"}}),
                       ("/create_model?model_name=LensModel", {"config": {"new_name": "m", "model": "/etc"}}),
                       ("/get_preds?model=nosuch&dataset_name=sentiment_plain&requested_types=MulticlassPreds",
                        {"inputs": []})):
        res = client.post(path, json=body)
        text = res.get_data(as_text=True)
        # a name this server doesn't have is the visitor's mistake, named (400); LIT's own failures: 500
        named = "nosuch" in path
        assert res.status_code == (400 if named else 500), (path, text)
        assert "Traceback" not in text and 'File "' not in text and "\n" not in text.strip(), (path, text)
        assert len(text) < 300 and ("failed (" in text or "model directory /etc" in text
                                    or (named and "'nosuch' is not one of" in text)), (path, text)


def test_a_hosted_servers_operator_runs_a_suite_of_their_own(hosted, tiny_pair, tmp_path, monkeypatch, capsys):
    """Issue 59: `api.run("checklist", ..., visitor=False)` dropped the flag (the runner took no such argument),
    so a hosted server's operator, on the command line, was refused their own suite as a visitor is."""
    import json

    from app.cli import main

    monkeypatch.setattr(policy, "_READABLE", [])
    suite = tmp_path / "mine_suite.json"
    suite.write_text(json.dumps({"suite": "mine", "tests": [{"name": "fine is positive", "type": "MFT",
                                                             "capability": "Vocab", "labels": 2,
                                                             "data": ["a fine film", "a fine cast", "fine"]}]}))
    with pytest.raises(InputError, match="suite: this hosted server reads only"):
        api.checklist(tiny_pair, suite=str(suite))  # a visitor
    res = api.run("checklist", tiny_pair, suite=str(suite), sample=3, visitor=False)
    assert res.tests[0]["name"] == "fine is positive" and [r["n"] for r in res.tests[0]["results"]] == [3, 3]
    assert main(["checklist", "--pair", "offline", "--suite", str(suite), "--sample", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tests"][0]["name"] == "fine is positive"
