"""Choices timed on the real work: kept per machine (the instruction-set caps included) and model, the same in every
process, and checked under another CPU's instruction sets from this one."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.ground import precision, tuning

ROOT = Path(__file__).resolve().parents[1]
AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


@pytest.fixture(autouse=True)
def _timing_in_the_cache(monkeypatch):
    """These tests give each machine its own cache (ALBERT_LENS_CACHE) and read its timing there: the suite's
    shared folder of timing decisions (ALBERT_LENS_TIMING, tests/conftest.py) left out."""
    monkeypatch.delenv("ALBERT_LENS_TIMING", raising=False)


def _python(code: str, env: dict, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_processes_started_together_measure_once_and_choose_the_same(tmp_path):
    """Two processes deciding at once: one measures (slowly), the other waits on the lock and takes its answer,
    even though its own measurement would have said otherwise."""
    code = ("import os, time; from app.core.ground import tuning\n"
            "def measure():\n    time.sleep(1.0); return {'pid': os.getpid()}\n"
            "hit, cached = tuning.decided('race', 'model', measure, lambda h: 'pid' in h)\n"
            "print(hit['pid'], cached)")
    env = {**os.environ, "ALBERT_LENS_CACHE": str(tmp_path)}
    procs = [_python(code, env) for _ in range(2)]
    outs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0][0] == outs[1][0]  # one pid: one measurement, both took it
    assert sorted(o[1] for o in outs) == ["False", "True"]
    assert len(json.loads((tmp_path / "race.json").read_text())) == 1


def test_the_machine_key_names_the_caps_in_effect(monkeypatch):
    from app.core.ground.device import cpu_name

    for k in tuning.CAPS:
        monkeypatch.delenv(k, raising=False)
    plain = tuning.machine_key()
    assert plain.startswith(f"{cpu_name()} | aten ") and "| onednn all | mkl all |" in plain
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx2")
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "AVX2")
    assert "| onednn AVX2 | mkl AVX2 |" in tuning.machine_key() and tuning.machine_key() != plain


def test_alternated_takes_turns_and_stops_early_on_a_clear_loser():
    order = []
    import time

    times = tuning.alternated({"a": lambda: (order.append("a"), time.sleep(0.01)),
                               "b": lambda: (order.append("b"), time.sleep(0.01))}, reps=3)
    assert order == ["a", "b"] * 4 and set(times) == {"a", "b"}  # one untimed call each, then in turns

    order.clear()
    tuning.alternated({"fast": lambda: order.append("f"), "slow": lambda: (order.append("s"), time.sleep(0.05))},
                      reps=9)
    assert order.count("s") == 2  # the untimed call and one round: 0.05 s against nothing is clear at once
    order.clear()
    got = tuning.alternated({"fast": lambda: (order.append("f"), time.sleep(0.01)),
                             "slow": lambda: (order.append("s"), time.sleep(0.01 + 2 * tuning.WARM_UP_S))}, reps=9)
    assert order == ["f", "s"] and got["slow"] > 2 * 2.0 * got["fast"]  # lost on its first call by seconds: decided
    order.clear()
    tuning.alternated({"a": lambda: (order.append("a"), time.sleep(0.05)),
                       "b": lambda: (order.append("b"), time.sleep(0.05))}, reps=9, budget_s=0.12)
    assert order == ["a", "b"] * 2  # the untimed calls took 0.1 s, the first round passed the budget


def test_alternated_stops_after_the_round_that_settles_the_callers_choice():
    """Given `settled`, asked from the second round on (one round's times alone decide nothing), the timing stops
    at the first round it accepts instead of running all `reps`."""
    order, seen = [], []

    def settled(times):
        seen.append({k: len(v) for k, v in times.items()})
        return len(times["a"]) == 3

    got = tuning.alternated({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, reps=9, clear=1e9,
                            settled=settled)
    assert order == ["a", "b"] * 4 and seen == [{"a": 2, "b": 2}, {"a": 3, "b": 3}] and set(got) == {"a", "b"}
    # apart: every time of one at least `margin` times every time of the other
    assert tuning.apart([2.0, 3.0], [1.0, 1.5], 1.25) and not tuning.apart([2.0, 3.0], [1.0, 1.7], 1.25)
    assert tuning.apart([1.0, 1.1], [0.9, 1.0]) and not tuning.apart([1.0, 1.1], [0.9, 1.05])


def test_under_another_cpus_instruction_sets_the_choice_follows_that_cpus_timing(tmp_path, tiny_dirs):
    """The product run as on an AVX2-only CPU (AMD Zen 3: no AVX-512, no bf16 or VNNI instructions), from whatever
    CPU runs the suite: PyTorch dispatches to AVX2, the choice is kept under that key, and bf16 and int8 are refused
    with their timing as the reason where they lose, or kept where they win. On the tiny pair: what is checked is
    the plumbing from the caps to the kept choice (the offline pair's timing under AVX2 took ~50 CPU s; its choice
    on the real work is benchmarks/cpus.py's)."""
    models = [str(tiny_dirs["bert"]), str(tiny_dirs["albert"])]
    code = ("import json, torch; from app.core.execution.pair import Pair; from app.core.ground import tuning\n"
            f"p = Pair.resolve(models={models!r}, task='sst2', device='cpu')\n"
            "out = {'aten': torch.backends.cpu.get_cpu_capability(), 'key': tuning.machine_key()}\n"
            "for asked in ('bf16', 'int8'):\n"
            "    q = p.with_precision(asked)\n"
            "    out[asked] = {**q.precision_asked, 'answers': q.precision, 'emulated': q.spec.models[0].emulated}\n"
            "print(json.dumps(out))")
    env = {**{k: v for k, v in os.environ.items() if k not in ("ALBERT_LENS_FORCE_PRECISION", "ALBERT_LENS_INT8")},
           **AVX2, "ALBERT_LENS_CACHE": str(tmp_path)}
    proc = _python(code, env)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    got = json.loads(out.splitlines()[-1])
    assert got["aten"] == "AVX2" and "| aten AVX2 | onednn AVX2 | mkl AVX2 |" in got["key"]
    for asked in ("bf16", "int8"):
        said = got[asked]
        t = said["timing"]
        ratio = t[f"{asked}_s"] / t["fp32_s"]
        assert said["asked"] == asked and not said["forced"]
        assert f"{asked} took {ratio:.2f}x fp32's time on this CPU" in said["why"]
        if tuning.wins(t[f"{asked}_s"], t["fp32_s"], precision.MARGIN):
            assert said["used"] == said["answers"] == asked
        else:
            assert said["used"] == said["answers"] == "fp32" and "so fp32 answered" in said["why"]
        assert not said["emulated"]
    kept = json.loads((tmp_path / "precision-bf16.json").read_text())
    assert all("| aten AVX2 | onednn AVX2 | mkl AVX2 |" in k for k in kept)
    assert all({"fp32_s", "asked_s", "emulated_s"} <= set(v) for v in kept.values())


@pytest.mark.parametrize("bad", ["{not json", "[1, 2]", '{"k": 3}'])
def test_a_damaged_file_is_measured_over(tmp_path, monkeypatch, bad):
    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path))
    (tmp_path / "d.json").write_text(bad)
    hit, cached = tuning.decided("d", "k", lambda: {"v": 1}, lambda h: "v" in h)
    assert hit == {"v": 1} and not cached
    assert tuning.decided("d", "k", lambda: {"v": 2}, lambda h: "v" in h) == ({"v": 1}, True)


def test_a_file_nested_past_the_parser_or_with_ill_typed_times_is_measured_over_with_one_warning(
        tmp_path, monkeypatch, caplog):
    """A kept file nested 200,000 deep (json raises RecursionError, not ValueError) or whose timings are text,
    null or a list: the choice is timed again and the file written over, with one warning line, instead of every
    `--precision int8` command failing until someone deletes the file."""
    import logging

    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path))
    (tmp_path / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    with caplog.at_level(logging.WARNING, logger="albert_lens.tuning"):
        assert tuning.decided("deep", "k", lambda: {"v": 1}, lambda h: "v" in h) == ({"v": 1}, False)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "deep.json is damaged (RecursionError)" in said[0], said
    full = f"{tuning.machine_key()} | k"
    for bad in ("1.5", None, [1, 2], float("nan"), True):
        entry = {"fp32_s": 0.1, "asked_s": bad, "fp32_one_s": 0.1, "asked_one_s": 0.1}
        (tmp_path / "times.json").write_text(json.dumps({full: entry}))
        valid = lambda h: tuning.seconds(h, "fp32_s", "asked_s", "fp32_one_s", "asked_one_s")  # noqa: E731
        fresh = {"fp32_s": 0.2, "asked_s": 0.1, "fp32_one_s": 0.2, "asked_one_s": 0.1}
        assert tuning.decided("times", "k", lambda: fresh, valid) == (fresh, False), bad
        assert json.loads((tmp_path / "times.json").read_text())[full] == fresh  # written over


def test_a_lock_held_by_a_live_process_is_waited_for_a_bounded_time_and_said(tmp_path, monkeypatch, caplog):
    """Another process holding the timing's lock (here: this one, through a second open file) is waited for at
    most `LOCK_WAIT_S`, said in one line when the wait starts, then this process times for itself."""
    import fcntl
    import logging

    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path))
    monkeypatch.setattr(tuning, "LOCK_WAIT_S", 0.5)
    with open(tmp_path / "held.lock", "a+") as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        with caplog.at_level(logging.WARNING, logger="albert_lens.tuning"):
            assert tuning.decided("held", "k", lambda: {"v": 3}, lambda h: "v" in h) == ({"v": 3}, False)
    said = [r.getMessage() for r in caplog.records]
    assert "waiting up to 0 s for another process's timing of held" in said[0], said
    assert "still holds" in said[1] and "timing here instead" in said[1], said
    assert json.loads((tmp_path / "held.json").read_text())  # still kept for the next process


def test_caches_that_share_a_timing_folder_time_once(tmp_path, monkeypatch):
    """ALBERT_LENS_TIMING names where the decisions are kept: two caches on one machine take one timing; a timing
    folder that can't be made (a file there) times each time and keeps nothing, as a read-only cache does."""
    monkeypatch.setenv("ALBERT_LENS_TIMING", str(tmp_path / "timing"))
    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path / "one"))
    assert tuning.decided("shared", "k", lambda: {"v": 1}, lambda h: "v" in h) == ({"v": 1}, False)
    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path / "two"))
    assert tuning.decided("shared", "k", lambda: {"v": 2}, lambda h: "v" in h) == ({"v": 1}, True)
    assert (tmp_path / "timing" / "shared.json").is_file() and not (tmp_path / "two" / "shared.json").exists()
    monkeypatch.delenv("ALBERT_LENS_TIMING")
    assert tuning.decided("shared", "k", lambda: {"v": 3}, lambda h: "v" in h) == ({"v": 3}, False)  # its own
    (tmp_path / "a file").write_text("")
    monkeypatch.setenv("ALBERT_LENS_TIMING", str(tmp_path / "a file" / "timing"))
    for v in (4, 5):
        assert tuning.decided("shared", "k", lambda v=v: {"v": v}, lambda h: "v" in h) == ({"v": v}, False)
