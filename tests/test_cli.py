import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main

from .conftest import tiny_models

ROOT = Path(__file__).resolve().parents[1]


def test_predict_json_for_both_models(tiny_dirs, capsys):
    rc = main(["predict", *tiny_models(tiny_dirs), "--json", "a fine film"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["task"] == "sst2" and out["input"] == ["a fine film"]
    assert len(out["models"]) == 2
    for p in out["models"]:
        assert abs(sum(p["probabilities"].values()) - 1) < 1e-5
        assert p["label"] == max(p["probabilities"], key=p["probabilities"].get)


def test_pair_task_missing_second_text_is_a_clear_error(tiny_dirs, capsys):
    rc = main(["predict", "--models", str(tiny_dirs["bert"]), str(tiny_dirs["albert"]), "--task", "rte", "premise"])
    assert rc == 2
    assert "field 'hypothesis' is empty" in capsys.readouterr().err  # the app's words: one facade


def test_unknown_pair_exit_code_and_message(capsys):
    assert main(["predict", "--pair", "nope", "x"]) == 2
    assert "unknown preset 'nope'" in capsys.readouterr().err


def test_unreachable_hub_pair_fails_fast_via_module_entry():
    out = subprocess.run([sys.executable, "-m", "app", "predict", "--pair", "rte", "a", "b"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "textattack/bert-base-uncased-RTE" in out.stderr and "can't be reached" in out.stderr


def test_saliency_command_prints_the_cores_maps(tiny_dirs, tiny_pair, capsys, tmp_path):
    """The CLI is a view of `api.saliency`: the same words and scores, a row per word, and the figure saved."""
    from app.core import api

    text = "the cities were lovely but the hotel was dreadful"
    assert main(["saliency", *tiny_models(tiny_dirs), "--method", "gradient_x_input", "--json", text]) == 0
    got = json.loads(capsys.readouterr().out)
    ref = api.saliency(tiny_pair, text, None, method="gradient_x_input")
    for g, r in zip(got["maps"], ref["maps"]):
        assert g["words"] == r["words"] and abs(max(g["scores"]) - max(r["scores"])) < 1e-6
    png = tmp_path / "s.png"
    assert main(["saliency", *tiny_models(tiny_dirs), "--method", "gradient_x_input", "--json", "--png", str(png),
                 text]) == 0
    assert json.loads(capsys.readouterr().out)["maps"][0]["words"] == text.split()  # still JSON with --png
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    png.unlink()
    assert main(["saliency", *tiny_models(tiny_dirs), "--method", "gradient_x_input", "--png", str(png), text]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [ln for ln in lines if ln[:3].strip().isdigit()]
    assert [ln.split()[1] for ln in rows] == text.split()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    long = " ".join(["the hotel was dreadful"] * 400)  # past every model's cut: its rest is one line, not 1,600
    ref = api.saliency(tiny_pair, long, None, method="gradient_norm")
    unread = set.intersection(*(set(m["unread"]) for m in ref["maps"]))
    assert unread and main(["saliency", *tiny_models(tiny_dirs), "--method", "gradient_norm", long]) == 0
    out = capsys.readouterr().out
    assert len([ln for ln in out.splitlines() if ln[:3].strip().isdigit()]) == 1600 - len(unread)
    assert f"... and {len(unread)} words past the cut, which neither model read" in out
    assert main(["saliency", *tiny_models(tiny_dirs), "--tolerance", "abc", text]) == 2
    assert "tolerance: 'abc' is not a number" in capsys.readouterr().err
    assert main(["saliency", *tiny_models(tiny_dirs), "--method", "occlusion", "--output", "logit", "--target",
                 "positive", text]) == 0
    out = capsys.readouterr().out
    ref = api.saliency(tiny_pair, text, None, method="occlusion", target="positive", output="logit")
    head = [ln for ln in out.splitlines() if ln.startswith("word")][0]
    assert head.count("(logit of positive)") == 2
    first = [ln for ln in out.splitlines() if ln[:3].strip() == "1"][0].split()
    assert float(first[2]) == pytest.approx(ref["maps"][0]["scores"][0], abs=1e-4)


def test_counterfactual_command_shows_flips_and_names_missing_dataset(tiny_dirs, capsys):
    text = "the cities were lovely"
    assert main(["counterfactual", *tiny_models(tiny_dirs), "--json", text]) == 0
    res = json.loads(capsys.readouterr().out)
    (change,) = res["changes"]
    assert change["edited"] == ["the townships were lovely"]
    assert main(["counterfactual", *tiny_models(tiny_dirs), text]) == 0
    out = capsys.readouterr().out
    assert "cities→townships" in out and out.count("FLIPPED") == sum(change["flipped"])
    assert main(["counterfactual", *tiny_models(tiny_dirs), "--generator", "dataset_flip_rate"]) == 2
    assert "dataset: dataset_flip_rate needs a dataset" in capsys.readouterr().err


def test_project_command_writes_csv_png_and_summary(tiny_dirs, capsys, tmp_path):
    import csv

    out = tmp_path / "proj"
    assert main(["project", *tiny_models(tiny_dirs), "--projection", "pca", "--limit", "12", "--out", str(out)]) == 0
    summary = json.loads((out / "projection.json").read_text())
    rows = list(csv.DictReader((out / "projection.csv").open()))
    models = [r["model"] for r in rows]
    assert summary["n"] == 12 and len(set(models)) == 2 and all(models.count(m) == 12 for m in models)
    assert f"{summary['knn_overlap']:.3f}" in capsys.readouterr().out
    assert (out / "projection.png").read_bytes()[:4] == b"\x89PNG"


def test_facts_command_counts_parameters_and_names_a_bad_line(tiny_dirs, tiny_pair, capsys, tmp_path):
    from app.core.techniques.facts import count_parameters

    assert main(["facts", *tiny_models(tiny_dirs), "--json", "a fine film", "a dull film"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [m["parameters"] for m in res["models"]] == [count_parameters(c.model) for c in tiny_pair.models]
    assert res["n_inputs"] == 2
    f = tmp_path / "inputs.txt"
    f.write_text("a fine film\n\u200b\n")
    assert main(["facts", *tiny_models(tiny_dirs), "--file", str(f)]) == 2
    assert "texts, line 2: field 'sentence' has only invisible characters" in capsys.readouterr().err


def test_saliency_command_over_a_dataset(tiny_dirs, tiny_pair, capsys, tmp_path):
    from app.core import api

    args = ["saliency", *tiny_models(tiny_dirs), "--method", "gradient_x_input", "--dataset", "sentiment_plain",
            "--limit", "5"]
    assert main([*args, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    ref = api.saliency(tiny_pair, dataset="sentiment_plain", method="gradient_x_input", limit=5)
    assert got["n"] == 5 and got["comprehensiveness"] == ref["comprehensiveness"]
    png = tmp_path / "d.png"
    assert main([*args, "--png", str(png), "--show", "2"]) == 0
    out = capsys.readouterr().out
    assert "over 5 examples of sentiment_plain" in out and "random ranking" in out
    cmp = ref["comprehensiveness_comparison"]
    assert f"p = {cmp['p_value']:.3g} ({cmp['test']})" in out
    assert len([ln for ln in out.splitlines() if ln.startswith("  ") and "(" in ln]) == 2
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["saliency", *tiny_models(tiny_dirs), "--dataset", "sentiment_plain", "a text"]) == 2
    assert "text: give either an input or a dataset, not both" in capsys.readouterr().err
    assert main(["saliency", *tiny_models(tiny_dirs)]) == 2
    assert "field 'sentence' is empty" in capsys.readouterr().err


def test_saliency_command_names_the_field_of_each_word_for_pairs(tiny_nli_pair, capsys):
    paths = [m.path for m in tiny_nli_pair.models]
    assert main(["saliency", "--models", *paths, "--task", "rte", "--method", "gradient_x_input",
                 "A man sleeps.", "A person rests."]) == 0
    rows = [ln.split() for ln in capsys.readouterr().out.splitlines() if ln[:3].strip().isdigit()]
    assert [r[1] for r in rows] == ["A", "man", "sleeps", ".", "A", "person", "rests", "."]
    assert [r[2] for r in rows] == ["[premise]"] * 4 + ["[hypothesis]"] * 4


def test_a_cache_folder_that_is_a_file_is_one_line_naming_the_variable(tmp_path):
    """ALBERT_LENS_CACHE naming a regular file (or a path through one): one line that names the variable and the
    fix, exit 2, no traceback, from a fresh process (the set-up runs when the core is imported)."""
    import os

    afile = tmp_path / "a-file"
    afile.write_text("not a folder")
    for cache in (afile, afile / "below"):
        env = {**os.environ, "ALBERT_LENS_CACHE": str(cache)}
        out = subprocess.run([sys.executable, "-m", "app", "predict", "--pair", "offline", "a fine film"], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=300)
        assert out.returncode == 2, out.stderr[-2000:]
        assert out.stderr.strip() == ("albert-lens: error: ALBERT_LENS_CACHE names a file, not a folder: name a "
                                      "folder this user can write (ALBERT_LENS_CACHE=...)"), out.stderr[-2000:]


def test_a_png_into_a_missing_folder_is_refused_before_any_work(tiny_dirs, capsys, tmp_path):
    """One line naming the folder, before the models run (nothing printed first), not matplotlib's traceback."""
    missing = tmp_path / "nope" / "att.png"
    assert main(["attention", *tiny_models(tiny_dirs), "--png", str(missing), "a fine film"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and f"png: the folder {str(missing.parent)!r} does not exist" in out.err
    assert not missing.parent.exists()
