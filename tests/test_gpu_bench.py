"""benchmarks/gpu.py on the CPU with tiny models: every section answers, and the numbers that are checks rather
than timings hold (our mean-pooled vectors are sentence-transformers' own, the half precision stays close)."""
import json
import subprocess
import sys

from .conftest import ROOT


def test_the_gpu_benchmark_runs_tiny_on_the_cpu(tmp_path):
    out = tmp_path / "gpu.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--tiny", "--device", "cpu",
                          "--json", str(out), "--skip", "deepwordbug"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["device"]["device"] == "cpu" and res["half"] == "bf16" and res["tiny"]
    for section in ("batches", "ig_anatomy", "integrated_gradients", "tokenizers", "graphs", "compare", "checklist",
                    "projection", "embeddings"):
        assert "error" not in res[section], res[section]
    emb = res["embeddings"]
    assert emb["texts"] == 256 and emb["fidelity_sample"]["precision"] == "bf16"
    for name in ("bert", "albert"):
        assert emb[name]["ours_vs_st_fp32_cosine_min"] > 0.9999  # the same pooling as the study's tool
        assert emb[name]["bf16_vs_fp32_cosine_min"] > 0.99
        ig = res["integrated_gradients"][name]
        assert ig["ours_delta_max"] <= 1e-3 and ig["ours_ms"] > 0 and ig["captum_tutorial_ms"] > 0
        for backend in ("math", "efficient", "flash", "cudnn"):  # each preferred in turn: on a CPU the same scores
            assert ig["ours_by_backend"][backend]["delta_max"] <= 1e-3
            assert ig["ours_by_backend"][backend]["max_score_diff"] <= 1e-6
    # the binary tiny pair: the 7 tests whose every case expects "neutral" are left out, 2 cases each of the rest
    assert res["checklist"]["tests"] == 38 and res["checklist"]["left_out"] == 7
    assert res["checklist"]["cases"] == (38 - 7) * 2
    assert res["checklist"]["bf16_max_fail_rate_change"] <= 0.5  # 2 cases a test: one flip moves a rate by 0.5
    for run in ("fp32_large_graphs", "bf16_small_graphs"):  # the other graph settings (a CPU has none: same rates)
        assert res["checklist"][run]["both_models_s"] > 0 and res["checklist"][f"{run}_max_fail_rate_change"] <= 0.5
        assert res["checklist"][run]["graphs"] == {"bert": {"cuda_graphs": False}, "albert": {"cuda_graphs": False}}
    fastest = min(("math", "efficient", "flash", "cudnn"), key=lambda b: sum(  # the probe's fastest backend (the
        v if isinstance(v := res["batches"]["bf16"][m]["sdpa_backends"][f"{b}_unmasked_ms"], float) else 1e9
        for m in ("bert", "albert")))  # CPU's: math, or what it falls back to) reruns both half runs preferred
    assert res["checklist"][f"bf16_{fastest}_max_fail_rate_change"] <= 0.5
    assert res["checklist"][f"bf16_{fastest}"]["both_models_s"] > 0
    assert res["tokenizers"]["albert"]["vocabulary"] == res["tokenizers"]["albert"]["spiece_pieces"]
    for name in ("bert", "albert"):  # on the CPU graphs are off: the same logits both ways
        assert res["graphs"][name]["max_abs_logit_diff"] == 0.0 and res["graphs"][name]["cuda_graphs"] is False
    assert res["compare"]["calls"] == 10 and res["compare"]["p50_ms"] > 0
    assert res["projection"]["n"] == 200
    for precision in ("fp32", "bf16"):  # a batch of the suite's commonest length gives the same logits unmasked
        for name in ("bert", "albert"):
            row = res["batches"][precision][name]
            assert row["rows"] == 8 and row["unmasked_vs_masked_max_diff"] <= (1e-5 if precision == "fp32" else 1e-2)
            assert row["issue_unmasked_ms"] > 0 and "tf32_unmasked_ms" not in row  # TF32 is a CUDA question
            backends = row["sdpa_backends"]  # every backend forced in turn: timed, or why it can't serve
            timed = {f"{b}_{m}_ms": backends[f"{b}_{m}_ms"] for b in ("math", "efficient", "flash", "cudnn")
                     for m in ("unmasked", "masked")}
            assert all(isinstance(v, float) or v.startswith("unavailable: ") for v in timed.values())
            assert timed["math_unmasked_ms"] > 0 and timed["math_masked_ms"] > 0  # the CPU has math
            assert isinstance(timed["cudnn_masked_ms"], str) and "cudnn_first_ms" not in backends  # not on a CPU
            assert backends["math_first_ms"] > 0 and backends["default_first_ms"] > 0
            assert set(backends["priority"]) >= {"math", "flash", "efficient", "cudnn"}
    anatomy = res["ig_anatomy"]
    assert all(anatomy[mode][name]["steps"] == 16 for mode in ("eager", "graphs") for name in ("bert", "albert"))
    for mode in ("eager", "graphs"):  # one call by phase: one round of 16 nodes, the phases inside the whole
        for name in ("bert", "albert"):
            phases = anatomy[mode][name]["phases_ms"]
            assert phases["round_count"] == 1 and min(phases["encode"], phases["prepare"], phases["rounds"]) > 0
            assert phases["encode"] + phases["prepare"] + phases["rounds"] <= phases["total"]
