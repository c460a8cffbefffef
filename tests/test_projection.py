from pathlib import Path

import numpy as np
import pytest

from app.core.ground.data import Example
from app.core.ground.errors import InputError
from app.core.present.plots import plot_png, projection_figure
from app.core.techniques.projection import (
    cached_embeddings,
    knn_overlap,
    neighbours_k,
    procrustes_align,
    project,
    project_pair,
    projection_table,
)

from .conftest import SENTENCES


def test_procrustes_recovers_a_rotated_reflected_copy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 2))
    theta = 1.1
    rot = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]]) @ np.diag([1, -1])
    moved = 3.0 * x @ rot + np.array([5.0, -2.0])
    aligned, disparity = procrustes_align(x, moved)
    np.testing.assert_allclose(aligned, x, atol=1e-5)
    assert disparity < 1e-10


def test_procrustes_disparity_is_scipys_and_reads_1_for_unrelated_shapes():
    """The disparity shown is scipy.spatial.procrustes's (it was the residual without the best scale, 1.8 for
    two unrelated clouds where the docs promised 1)."""
    from scipy.spatial import procrustes

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(300, 2)), rng.normal(size=(300, 2))
    d_unrelated = procrustes_align(a, b)[1]
    assert d_unrelated == pytest.approx(procrustes(a, b)[2], abs=1e-9) and 0.95 < d_unrelated <= 1.0
    rot = np.array([[0.6, -0.8], [0.8, 0.6]])
    noisy = a @ rot * 3 + 5 + 0.1 * rng.normal(size=a.shape)
    assert procrustes_align(a, noisy)[1] == pytest.approx(procrustes(a, noisy)[2], abs=1e-9)


def test_knn_overlap_is_not_trivially_perfect_on_few_points():
    """With k >= n - 1 every point's neighbours are all the others, so any two spaces would score 1.0."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 8)), rng.standard_normal((5, 8))
    assert neighbours_k(5, 10) == 3 and neighbours_k(2, 10) == 0
    assert knn_overlap(a, b, k=10) < 1.0
    assert np.isnan(knn_overlap(a[:2], b[:2], k=10))


def test_project_api_reports_the_k_it_used(tiny_pair):
    from app.core import api

    res = api.project(tiny_pair, "sentiment_plain", projection="pca", limit=4)  # 4 is the fewest a projection takes
    assert res["n"] == 4 and res["k"] == 2 and 0 <= res["knn_overlap"] <= 1
    assert res["knn_chance"] == pytest.approx(2 / 3)


def test_unrelated_spaces_overlap_at_the_chance_level():
    """Two independent random embeddings of the same 300 points share k / (n - 1) of their neighbours."""
    from app.core.techniques.projection import knn_chance

    rng = np.random.default_rng(3)
    got = [knn_overlap(rng.standard_normal((300, 32)), rng.standard_normal((300, 32)), k=10) for _ in range(5)]
    assert knn_chance(300, 10) == pytest.approx(10 / 299)
    assert np.mean(got) == pytest.approx(knn_chance(300, 10), abs=0.006)
    assert np.isnan(knn_chance(2, 10)) and knn_chance(5, 10) == pytest.approx(3 / 4)


def test_knn_overlap_extremes():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((60, 8))
    assert knn_overlap(a, a * 2.0, k=5) == 1.0
    assert knn_overlap(a, rng.standard_normal((60, 8)), k=5) < 0.3


def test_projections_and_errors():
    x = np.random.default_rng(2).standard_normal((30, 16)).astype(np.float32)
    assert project(x, "pca").shape == (30, 2)
    u = project(x, "umap")
    assert u.shape == (30, 2)
    np.testing.assert_allclose(u, project(x, "umap"))  # seeded: reproducible
    with pytest.raises(InputError, match=r"projection: 'tsne' is not one of \['umap', 'pca'\]"):
        project(x, "tsne")
    with pytest.raises(InputError, match="too few"):
        project(x[:3], "pca")


def test_a_umap_fit_leaves_pytorchs_thread_count_as_it_was():
    """numba's OpenMP loops share PyTorch's libgomp, and UMAP's set the calling thread's team to every core: a
    worker given one core's share ran its products on two threads from its first projection on."""
    import torch

    x = np.random.default_rng(3).standard_normal((60, 16)).astype(np.float32)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        project(x, "umap")
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_embeddings_are_cached(tiny_pair):
    exs = [Example((s,)) for s in SENTENCES]
    a, cached_a = cached_embeddings(tiny_pair.models[0], exs, layer=1, pooling="mean")
    b, cached_b = cached_embeddings(tiny_pair.models[0], exs, layer=1, pooling="mean")
    assert not cached_a and cached_b
    np.testing.assert_array_equal(a, b)


def test_predictions_are_cached_beside_the_embeddings_and_progress_runs_to_the_end(tiny_pair, tmp_path):
    """A projection re-run predicts nothing again: the logits come from the cache, equal to a fresh predict;
    the progress the app shows covers predictions then embeddings and ends at 1."""
    import json

    from app.core import api
    from app.core.execution.inference import predict
    from app.core.techniques.projection import cached_predictions

    texts = [f"{s} ({tmp_path.name})" for s in SENTENCES]  # sentences no other test embedded or predicted
    exs = [Example((t,)) for t in texts[:5]]
    first, hit_first = cached_predictions(tiny_pair.models[1], exs)
    again, hit_again = cached_predictions(tiny_pair.models[1], exs)
    assert not hit_first and hit_again
    fresh = predict(tiny_pair.models[1], exs)
    np.testing.assert_allclose(again.probs, fresh.probs, atol=1e-6)
    assert again.predicted == fresh.predicted
    seen = []
    fresh_data = tmp_path / "fresh.jsonl"
    fresh_data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    # on a cold cache one pass per model predicts and embeds: neither `predict` nor `embed` runs apart
    from app.core.techniques import projection

    def apart(*a, **k):
        raise AssertionError("a second pass over the encoder")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(projection, "predict", apart)
        mp.setattr(projection, "embed", apart)
        res = api.project(tiny_pair, str(fresh_data), projection="pca", limit=12,
                          progress=lambda d, n: seen.append(d / n))
    assert seen == sorted(seen) and seen[-1] == pytest.approx(1.0) and min(seen) <= 1 / 3
    preds = {r["prediction"] for r in res["points"] if r["model"] == tiny_pair.models[0].name}
    assert preds <= set(tiny_pair.models[0].labels)


def test_embedding_cache_notices_retrained_weights_and_stays_under_its_cap(tiny_dirs, tmp_path, monkeypatch):
    """A model retrained into the same directory is embedded again (its old vectors were served); the cache
    drops its least recently used files past ALBERT_LENS_EMBEDDING_CACHE_MB."""
    import os
    import shutil
    import time

    from app.core.models.loading import load
    from app.core.models.registry import TASKS, ModelSpec
    from app.core.techniques.embeddings import embed

    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path / "cache"))
    d = tmp_path / "m"
    shutil.copytree(tiny_dirs["bert"], d)
    exs = [Example((s,)) for s in SENTENCES]
    first = load(ModelSpec("M", str(d), "bert", TASKS["sst2"]))
    a, _ = cached_embeddings(first, exs, layer=1)
    weights = next(d.glob("*.safetensors"))
    import torch
    from safetensors.torch import load_file, save_file

    state = load_file(weights)
    noise = torch.Generator().manual_seed(0)  # "retrained": every weight moved
    state = {k: v + 0.1 * torch.randn(v.shape, generator=noise) for k, v in state.items()}
    save_file(state, weights, metadata={"format": "pt"})
    os.utime(weights, ns=(1, 10**18))  # a distinct mtime even on a coarse clock
    second = load(ModelSpec("M", str(d), "bert", TASKS["sst2"]))
    b, cached = cached_embeddings(second, exs, layer=1)
    assert not cached and not np.allclose(a, b)
    np.testing.assert_allclose(b, embed(second, exs, layer=1), atol=1e-6)

    assert cached_embeddings(first, exs, layer=1)[1]  # the model loaded before keeps its own vectors

    folder = tmp_path / "cache" / "embeddings"
    one = max(f.stat().st_size for f in folder.glob("*.npy"))
    monkeypatch.setenv("ALBERT_LENS_EMBEDDING_CACHE_MB", str(2.5 * one / 2**20))  # room for two files
    time.sleep(0.01)
    cached_embeddings(second, exs, layer=1)  # used again: now the first model's file is the oldest
    time.sleep(0.01)
    cached_embeddings(second, exs, layer=0)  # a third file: the least recently used goes
    assert len(list(folder.glob("*.npy"))) == 2
    assert not cached_embeddings(first, exs, layer=1)[1]


def test_project_pair_table_and_png(tiny_pair, tmp_path):
    exs = [Example((s + f" {i}",), "positive" if i % 2 else "negative") for i in range(3) for s in SENTENCES]
    proj = project_pair(tiny_pair.models, exs, projection="pca")
    preds = tiny_pair.predict(exs)
    rows = projection_table(proj, tiny_pair.models, exs, preds)
    assert len(rows) == 2 * len(exs)
    assert {r["model"] for r in rows} == {m.name for m in tiny_pair.models}
    assert 0 <= proj.knn_overlap <= 1
    for r in rows:  # each point carries both models' predictions of its example (hover text, disagreement)
        both = [str(p.predicted[r["index"]]) for p in preds]
        assert [r[f"{m.name} prediction"] for m in tiny_pair.models] == both
        assert r["models"] == ("agree" if both[0] == both[1] else "disagree")
    plot_png(rows, tmp_path / "p.png", color="correct")
    assert (tmp_path / "p.png").stat().st_size > 10_000
    fig = projection_figure(rows, "correct")
    legends = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes]
    correct = {str(p == e.label) for p, e in zip(preds[0].predicted, exs)}
    assert set(legends[0]) == correct and legends[2] == [m.name for m in tiny_pair.models]
    unlabelled = [r | {"gold": "", "correct": ""} for r in rows]
    assert [t.get_text() for t in projection_figure(unlabelled, "gold").axes[0].get_legend().get_texts()] == [
        "no gold label"]


def test_warm_up_compiles_umap_kernels_in_a_fresh_process():
    """The app warms UMAP at launch: numba compiles on a process's first fit, so after warm_up() the layout
    kernel the real projection uses already has a compiled signature."""
    import subprocess
    import sys

    code = ("import umap.layouts as L; before = len(L._nb_optimize_layout_euclidean_single_epoch.signatures); "
            "from app.core.techniques.projection import warm_up; warm_up(); "
            "print(before, len(L._nb_optimize_layout_euclidean_single_epoch.signatures))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr[-2000:]
    before, after = map(int, out.stdout.split()[-2:])
    assert before == 0 and after >= 1


def test_umaps_compiled_kernels_are_kept_for_the_next_process():
    """umap-learn compiles most of its kernels without numba's cache, so each process paid 9-16 s of CPU on its
    first fit; the core turns the cache on. Two processes fit in turn, with numba's cache where a user's is (beside
    umap-learn's sources, else the user's cache folder): the first compiles and keeps its kernels, or loads those
    an earlier process of this run kept (a cache folder of its own compiled them all again, ~25 CPU s of the
    suite's, while the run's first fit paid the same); the second compiles nothing. Without the cache turned on,
    both compile."""
    import os
    import subprocess
    import sys

    code = ("import numpy as np, umap.umap_ as U; from app.core.techniques.projection import project; "
            "x = np.random.default_rng(0).normal(size=(80, 16)).astype(np.float32); y = project(x); "
            "s = U.smooth_knn_dist.stats; print(len(s.cache_hits), len(s.cache_misses), "
            "getattr(U.smooth_knn_dist._cache, '_cache_path', 'no-cache'), repr(y[:2].tolist()))")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                           cwd=Path(__file__).resolve().parents[1]) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr[-2000:] + runs[1].stderr[-2000:]
    (hits1, misses1, where1, layout1), (hits2, misses2, where2, layout2) = (r.stdout.split(maxsplit=3) for r in runs)
    assert (hits1, misses1) in {("0", "1"), ("1", "0")}  # compiled (and kept), or loaded what was kept before
    assert (hits2, misses2) == ("1", "0")  # the second process loaded the first's (or the earlier one's) kernels
    assert layout1 == layout2 and where1 == where2
    assert any(f.suffix == ".nbi" for f in Path(where1).glob("*smooth_knn_dist*"))  # the index numba reads


@pytest.mark.parametrize("broken", ["a file", "a link to itself"])
def test_a_broken_embedding_cache_degrades_to_uncached_work_with_one_warning(tiny_pair, tmp_path, monkeypatch,
                                                                              caplog, broken):
    """/project failed when its cache folder was replaced by a file or a link to nowhere; now the same answer is
    computed without the cache, and the operator is warned once."""
    import json
    import logging

    from app.core import api
    from app.core.techniques import projection

    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"text": f"{s} ({broken})"}) + "\n" for s in SENTENCES), encoding="utf-8")
    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path / "good"))
    reference = api.project(tiny_pair, str(data), projection="pca", limit=7)
    monkeypatch.setenv("ALBERT_LENS_CACHE", str(tmp_path / "broken"))
    folder = tmp_path / "broken" / "embeddings"
    folder.parent.mkdir()
    if broken == "a file":
        folder.write_text("not a folder")
    else:
        folder.symlink_to(folder)
    monkeypatch.setattr(projection, "_WARNED", set(), raising=False)
    with caplog.at_level(logging.WARNING, logger="albert_lens.projection"):
        first = api.project(tiny_pair, str(data), projection="pca", limit=7)
        again = api.project(tiny_pair, str(data), projection="pca", limit=7)
    for res in (first, again):
        assert res["embeddings_cached"] == [False, False]
        np.testing.assert_allclose([p["x"] for p in res["points"]], [p["x"] for p in reference["points"]],
                                   atol=1e-5)
    warned = [r.getMessage() for r in caplog.records if "unusable" in r.getMessage()]
    assert len(warned) == 1 and str(folder) in warned[0] and "computing without it" in warned[0], warned
