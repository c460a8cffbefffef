import json
import subprocess
import sys
from pathlib import Path

from app.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_predict_json_for_both_models(tiny_dirs, capsys):
    rc = main(["predict", "--models", str(tiny_dirs["bert"]), str(tiny_dirs["albert"]), "--task", "sst2", "--json",
               "a fine film"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["task"] == "sst2" and out["input"] == ["a fine film"]
    assert len(out["predictions"]) == 2
    for p in out["predictions"]:
        assert abs(sum(p["probabilities"].values()) - 1) < 1e-5
        assert p["label"] == max(p["probabilities"], key=p["probabilities"].get)


def test_pair_task_missing_second_text_is_a_clear_error(tiny_dirs, capsys):
    rc = main(["predict", "--models", str(tiny_dirs["bert"]), str(tiny_dirs["albert"]), "--task", "rte", "premise"])
    assert rc == 2
    assert "field 'hypothesis' is missing" in capsys.readouterr().err


def test_unknown_pair_exit_code_and_message(capsys):
    assert main(["predict", "--pair", "nope", "x"]) == 2
    assert "unknown preset 'nope'" in capsys.readouterr().err


def test_unreachable_hub_pair_fails_fast_via_module_entry():
    out = subprocess.run([sys.executable, "-m", "app", "predict", "--pair", "rte", "a", "b"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "textattack/bert-base-uncased-RTE" in out.stderr and "can't be reached" in out.stderr
