"""The offline pair shipped in assets/: structure, size, speed of loading, accuracy bars, default-pair choice,
and the train-offline command (seeded, resumable)."""
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.core.execution.inference import predict
from app.core.ground.data import Example, load_dataset
from app.core.techniques.facts import count_parameters

from .conftest import shared

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = ROOT / "assets" / "offline"


def test_assets_are_small_safetensors_with_model_cards():
    total = sum(p.stat().st_size for p in (ROOT / "assets").rglob("*") if p.is_file())
    assert total < 50 * 2**20, total
    for name in ("bert-sst2", "albert-sst2"):
        assert (OFFLINE / name / "model.safetensors").is_file()
        assert not list((OFFLINE / name).glob("*.bin"))
        card = (OFFLINE / name / "README.md").read_text()
        assert "SST-2 dev" in card and "parameters" in card and "plain_reviews_and_tweets" in card
    frozen = json.loads((OFFLINE / "bert-sst2" / "config.json").read_text())["albert_lens_frozen_from_minilm"]
    assert frozen == {"bert.embeddings.word_embeddings.weight": "embeddings.word_embeddings.weight"}


def test_albert_has_both_parameter_reductions_and_is_small(offline_pair):
    bert, albert = offline_pair.models
    cfg = albert.model.config
    assert cfg.model_type == "albert" and cfg.embedding_size == 128 and cfg.num_hidden_groups == 1
    assert cfg.num_hidden_layers == bert.model.config.num_hidden_layers
    assert count_parameters(albert.model) <= 0.40 * count_parameters(bert.model)


def test_offline_pair_loads_from_a_fresh_cache(tmp_path):
    """Materialising from assets + loading both models in a new process with an empty cache (its time, about
    a second here, is benchmarks/offline_pair.py's to report: a busy machine would make a bound flaky)."""
    code = ("import time, app.core.models.loading, transformers; "
            "from transformers import AutoModelForSequenceClassification, "
            "AutoTokenizer, AutoConfig; from app.core.execution.pair import Pair; t=time.perf_counter(); "
            "m=Pair.resolve('offline').models; print(time.perf_counter()-t)")
    env = dict(os.environ, ALBERT_LENS_CACHE=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-1500:]
    assert float(out.stdout.split()[-1]) > 0 and any((tmp_path).rglob("*.safetensors"))


def test_an_export_folder_given_by_path_loads_as_the_offline_pair(offline_pair, tmp_path):
    """`--models assets/offline/bert-sst2 ...` (or a `train-offline --export` folder elsewhere) lacks the word
    embeddings and tokenizer the package supplies: it is completed like `offline:<name>`, not refused as a model
    with missing weights; an export whose frozen table can't be found is refused naming the folder."""
    import shutil

    import pytest

    from app.core.models.loading import ModelLoadError, load
    from app.core.models.registry import TASKS, ModelSpec

    texts = [Example(("an awful, tedious film",)), Example(("a warm and generous movie",))]
    for clf in offline_pair.models:
        folder = OFFLINE / clf.spec.source.split(":", 1)[1]
        moved = shutil.copytree(folder, tmp_path / folder.name)  # a folder outside the assets, as an export is
        for where in (folder, moved):
            back = load(ModelSpec(clf.name, str(where), clf.family, TASKS["sst2"]))
            assert "offline export" in back.origin and str(where.resolve()) in back.origin
            np.testing.assert_allclose(predict(back, texts).probs, predict(clf, texts).probs, atol=1e-6)
    config = json.loads((moved / "config.json").read_text())
    config["albert_lens_frozen_from_minilm"] = {"albert.embeddings.word_embeddings.weight": "no.such.tensor"}
    (moved / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="offline export that can't be completed") as err:
        load(ModelSpec("ALBERT", str(moved), "albert", TASKS["sst2"]))
    assert str(moved) in str(err.value)


def test_accuracy_bars_on_sst2_dev(offline_sst2_dev):
    dev, predictions = offline_sst2_dev  # each model's fp32 predictions of all 872
    gold = [e.label for e in dev]
    bert, albert = (np.mean([p == g for p, g in zip(pred.predicted, gold)]) for pred in predictions)
    assert bert >= 0.86, bert
    assert albert >= 0.80, albert


def test_plain_text_is_predicted_sensibly(offline_pair):
    ds = load_dataset(ROOT / "assets" / "examples" / "sentiment_plain.jsonl")
    for m in offline_pair.models:
        acc = np.mean([p == e.label for p, e in zip(predict(m, ds.examples).predicted, ds.examples)])
        assert acc >= 0.8, (m.name, acc)


def test_default_pair_is_offline_here_and_says_why():
    from app.core.execution.pair import default_pair_spec

    spec, reason = default_pair_spec()
    assert spec.name == "offline"
    assert "hub can't be reached" in reason


def test_benchmark_cli_reports_both_models(capsys):
    from app.cli import main

    assert main(["benchmark", "--pair", "offline", "--dataset", str(shared("glue", "sst2", "dev.tsv")),
                 "--limit", "64", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    a, b = res["models"]
    assert a["n"] == b["n"] == 64
    for r in (a, b):
        assert 0 <= r["accuracy"] <= 1 and r["throughput_per_s"] > 0 and r["latency_ms_median"] > 0
    assert res["ratios"]["parameters_b_over_a"] < 0.4


def _train_offline(args: list[str], capsys, monkeypatch):
    """`albert-lens train-offline ARGS` through the CLI's own entry point, in this process (a process of its own
    paid ~5 CPU s of imports a run; what the command writes and reads back is its work dir either way): its exit
    code, stdout and stderr, its logging set up as `python -m app` sets it."""
    from app.cli import main

    monkeypatch.setattr(logging.root, "handlers", [])  # the CLI's logging.basicConfig binds this test's stderr
    capsys.readouterr()
    code = main(["train-offline", *args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


def test_train_offline_is_seeded_and_resumable(tmp_path, capsys, monkeypatch):
    dev = tmp_path / "dev.tsv"  # the first 128 rows of SST-2 dev: what is checked is the stages, not the accuracy
    dev.write_text("".join(shared("glue", "sst2", "dev.tsv").read_text().splitlines(keepends=True)[:129]))
    cmd = ["--train", str(shared("glue", "sst2", "train.tsv")),
           "--dev", str(dev), "--out", str(tmp_path / "run"), "--limit", "96",
           "--bert-epochs", "1", "--albert-epochs", "1"]
    first = _train_offline(cmd, capsys, monkeypatch)
    assert first.returncode == 0, first.stderr[-2000:]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert {"bert", "albert", "albert_init", "final"} <= set(results)
    settings = json.loads((tmp_path / "run" / "settings.json").read_text())
    assert settings["seed"] == 13 and settings["train_limit"] == 96 and settings["max_len"] == 64  # one sentence's
    second = _train_offline(cmd, capsys, monkeypatch)
    assert second.returncode == 0
    assert json.loads(second.stdout[second.stdout.index("{"):]) == results["final"]  # nothing retrained
    import re

    assert not re.search(r"\bbert:\s+\d+%|albert:\s+\d+%", second.stderr)  # no training: stages reused
    assert re.search(r"\bbert:\s+\d+%", first.stderr) and re.search(r"albert:\s+\d+%", first.stderr)


def test_train_offline_for_a_pair_task_gives_a_pair_that_loads_by_path_and_by_name(tmp_path, monkeypatch, capsys):
    """`train-offline --task rte` trains on (premise, hypothesis), logs each epoch's dev accuracy, and exports
    bert-rte/albert-rte that load as an RTE pair by path (no --task: the config names it) or as `offline-rte`;
    the core's accuracy on dev from the fp16 export is the one training measured. A resumed run of another task
    is refused, and an unshipped offline pair names the command that trains it."""
    from app.core.execution.pair import Pair
    from app.core.models import offline

    run, export = tmp_path / "run", tmp_path / "export"
    # the first 96 rows of RTE dev (277): training evaluates on dev at each stage, and the test predicts it again;
    # what is checked (the card names dev and its size, the export's accuracy is training's) is the same
    dev_path = tmp_path / "dev.tsv"
    dev_path.write_text("".join(shared("glue", "rte", "dev.tsv").read_text().splitlines(keepends=True)[:97]))
    cmd = ["--task", "rte", "--train",
           str(shared("glue", "rte", "train.tsv")), "--dev", str(dev_path), "--out", str(run), "--limit", "64",
           "--bert-epochs", "1", "--albert-epochs", "1", "--export", str(export), "--max-len", "48"]
    done = _train_offline(cmd, capsys, monkeypatch)
    assert done.returncode == 0, done.stderr[-2000:]
    final = json.loads(done.stdout[done.stdout.index("{"):])
    log = (run / "log.txt").read_text()
    assert "bert: {'step': 2, 'epoch': 1.0" in log and "'dev_accuracy'" in log and "rte, labels" in log
    # the flag reaches the run (48 tokens: a third less work than a pair's default of 128, which
    # test_training_keeps_the_tasks_default_tokens checks)
    assert json.loads((run / "settings.json").read_text())["max_len"] == 48
    card = (export / "bert-rte" / "README.md").read_text()
    assert "RTE, a pair of texts: `premise` and `hypothesis`" in card and "RTE train, 64 examples" in card
    assert f"| RTE dev (`{dev_path}`) | 96 | {final['bert_dev_accuracy']:.4f} |" in card
    assert json.loads((export / "summary-rte.json").read_text())["albert-rte"]["dev_accuracy"] == \
        final["albert_dev_accuracy"]

    dev = load_dataset(dev_path, task="rte").examples
    by_path = Pair.resolve(models=[str(export / "bert-rte"), str(export / "albert-rte")])
    assert by_path.task.name == "rte" and by_path.task.fields == ("premise", "hypothesis")
    assert "tokenizer and word embeddings from the MiniLM" in by_path.models[0].describe()
    assert "tokenizer from the MiniLM" in by_path.models[1].describe()  # the ALBERT's table is its own
    from app.report import default_suites

    assert by_path.spec.task.name == "custom" and default_suites(by_path) == []  # no CheckList suite for RTE
    for clf, key in zip(by_path.models, ("bert_dev_accuracy", "albert_dev_accuracy")):
        pred = predict(clf, dev)
        acc = float(np.mean([p == e.label for p, e in zip(pred.predicted, dev)]))
        assert abs(acc - final[key]) <= 2 / len(dev)  # fp16 export: a prediction at 0.5 may tip

    monkeypatch.setattr(offline, "OFFLINE_ASSETS", export)
    named = Pair.resolve(pair="offline-rte")
    assert named.name == "offline-rte" and [m.source for m in named.spec.models] == ["offline:bert-rte",
                                                                                       "offline:albert-rte"]
    np.testing.assert_allclose(predict(named.models[1], dev[:8]).probs, predict(by_path.models[1], dev[:8]).probs,
                               atol=1e-6)

    # the CLI's own entry point, here (a process of its own for each cost ~3 s of start-up): same exit codes, same
    # messages on stderr as `python -m app` prints
    from app.cli import main

    refused = _train_offline(cmd[:1] + ["sst2"] + cmd[2:], capsys, monkeypatch)
    assert refused.returncode != 0
    assert f"out: {run} holds a rte run; give another --out for sst2" in refused.stderr
    assert main(["predict", "--pair", "offline-mrpc", "a", "b"]) != 0
    assert "train-offline --task mrpc" in capsys.readouterr().err


def test_training_keeps_the_tasks_default_tokens():
    from app.core.techniques.training import resolve_max_len, training_task

    assert resolve_max_len(None, training_task("rte")) == 128  # a pair: RTE's premise is long
    assert resolve_max_len(None, training_task("mrpc")) == 128
    assert resolve_max_len(None, training_task("sst2")) == 64
    assert resolve_max_len(48, training_task("rte")) == 48


@pytest.mark.parametrize("max_len", [4, 513, 64.5, True])
def test_train_offline_refuses_a_max_len_outside_the_models_positions(tmp_path, max_len):
    from app.core.ground.errors import InputError
    from app.core.techniques.training import TrainSettings, train_offline

    with pytest.raises(InputError, match=r"max_len: .* is out of range; give a whole number of tokens from 8 to 512"):
        train_offline(shared("glue", "rte", "train.tsv"), tmp_path / "run", task="rte",
                      settings=TrainSettings(max_len=max_len))
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_processes_materialising_at_once_each_get_a_whole_copy(tmp_path):
    """Two Ray workers on a fresh cache both built the offline model into one folder, and one deleted it under
    the other. Now each builds its own and the first puts it in place; every caller gets a loadable folder."""
    import threading

    from safetensors.torch import load_file

    from app.core.ground.runtime import ASSETS_DIR
    from app.core.models.offline import materialise_dir

    src, dest = ASSETS_DIR / "offline" / "bert-sst2", tmp_path / "cache" / "bert-sst2"
    start, out, errors = threading.Barrier(4), [], []

    def build():
        start.wait()
        try:
            out.append(materialise_dir(src, dest))
        except Exception as exc:  # noqa: BLE001 - the test reports any
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and out == [dest] * 4
    assert load_file(str(dest / "model.safetensors")) and (dest / ".stamp").is_file()
    assert sorted(p.name for p in dest.parent.iterdir()) == ["bert-sst2"]  # no build folder left behind


def test_the_embedding_basis_is_the_svds_computed_once_per_table_and_again_when_it_changes(monkeypatch):
    import torch

    from app.core.models import offline

    calls = []
    svd = torch.linalg.svd
    monkeypatch.setattr(torch.linalg, "svd", lambda *a, **k: calls.append(1) or svd(*a, **k))
    w = torch.nn.Parameter(torch.randn(50, 8, generator=torch.Generator().manual_seed(0)))
    first = offline.embedding_basis(w)
    assert torch.allclose(first, svd(w.detach(), full_matrices=False)[2])
    assert offline.embedding_basis(w) is first and len(calls) == 1  # the second ALBERT reuses it
    with torch.no_grad():
        w.mul_(-2).add_(1)  # a table changed in place (a training step) gets its own basis
    again = offline.embedding_basis(w)
    assert len(calls) == 2 and torch.allclose(again, svd(w.detach(), full_matrices=False)[2])
