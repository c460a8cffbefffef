import json

from .conftest import shared


def test_report_has_every_table_and_figure_and_reuses_its_cache(offline_pair, tmp_path):
    from app.report import generate

    ds = str(shared("glue", "sst2", "dev.tsv"))
    suite = str(shared("checklist", "sentiment_suite.json.gz"))
    res = generate(offline_pair, tmp_path, datasets=[ds], suites=[suite], limit=60, sample=4, attack_n=2,
                   umap_n=40, saliency_n=4, progress_bar=False)
    md = (tmp_path / "report.md").read_text()
    for heading in ("Benchmark: dev.tsv", "Where they differ: dev.tsv", "CheckList: sentiment_suite.json.gz",
                    "Attack: deepwordbug", "Attack: textfooler-offline", "UMAP",
                    "Inside: layer similarity and attention", "Saliency: integrated gradients", "Parameters and speed"):
        assert f"## {heading}" in md
    inside = md.split("## Inside: layer similarity and attention")[1].split("## ")[0]
    # seven layers each (embeddings + 6): every layer of the first model gets its best match but the constant
    # [CLS] input embedding, and every layer of both models its attention row
    assert inside.count("→") == 6 and "[CLS] vectors of 40 examples" in inside
    assert sum(line.startswith("| ") for line in inside.splitlines()) == 1 + 12  # its header and 6 + 6 layers
    sal = md.split("## Saliency: integrated gradients")[1].split("## ")[0]
    assert "| BERT | " in sal and "(paired permutation" in sal and "Rank agreement" in sal
    for fig in ("umap.png", "checklist_sentiment.png", "layer_transitions.png", "benchmark.png", "saliency.png",
                "similarity.png", "attention_stats.png"):
        assert (tmp_path / fig).stat().st_size > 5000
        assert f"]({fig})" in md
    # the benchmark says whether the gap between the models is more than chance (60 sentences: the paired test)
    bench = md.split("## Benchmark: dev.tsv")[1].split("## ")[0]
    assert "accuracy: " in bench and "(McNemar, exact)" in bench and "on these 60 examples." in bench
    assert "Right: both " in bench
    # where they differ: the slice table of the same 60 sentences, and its figure
    diff = md.split("## Where they differ: dev.tsv")[1].split("## ")[0]
    assert "60 labelled examples" in diff and "candidate slices" in diff and "| gold label: " in diff
    assert any(f.name.startswith("slices_") and f.stat().st_size > 5000 for f in tmp_path.glob("*.png"))
    html = (tmp_path / "report.html").read_text()
    assert "<table>" in html and "<img" in html
    assert res["reused"] == []
    # a second run with one more dataset reuses every earlier section
    res2 = generate(offline_pair, tmp_path, datasets=[ds, str(shared("imdb", "test_1000.tsv"))], suites=[suite],
                    limit=60, sample=4, attack_n=2, umap_n=40, saliency_n=4, progress_bar=False)
    assert set(res["sections"]) <= set(res2["reused"])
    assert len(res2["sections"]) == len(res["sections"]) + 2  # its benchmark and its slices
    assert "## Benchmark: test_1000.tsv" in (tmp_path / "report.md").read_text()
    cached = list((tmp_path / "cache").glob("*.json"))
    assert all(json.loads(p.read_text()) for p in cached)


def test_a_section_failing_on_its_input_is_written_not_fatal_and_retried(tiny_dirs, tmp_path, capsys):
    """A pair whose configs name no labels can't score SST-2's gold labels: the benchmark section says why, the
    other sections are written, the CLI exits 1 naming the section, and a re-run tries it again."""
    from app.cli import main

    args = ["report", "--models", str(tiny_dirs["bert"]), str(tiny_dirs["albert"]), "--out", str(tmp_path),
            "--datasets", str(shared("glue", "sst2", "dev.tsv")), "--limit", "20", "--sample", "2",
            "--attack-n", "1", "--umap-n", "20", "--suites"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "section benchmark-" in err and "its config names no labels" in err
    md = (tmp_path / "report.md").read_text()
    assert "## Benchmark: dev.tsv\n\nNot computed: dataset: gold labels ['negative', 'positive']" in md
    assert "## UMAP of sentence embeddings" in md and (tmp_path / "umap.png").is_file()
    assert not any(p.name.startswith("benchmark-") for p in (tmp_path / "cache").glob("*.json"))


def test_the_default_suite_is_chosen_by_what_the_models_answer(offline_pair, tiny_nli_pair):
    """Sentiment for one text answering negative/positive, none for RTE. A pair given by path has its task from
    its configs: `report --models <RTE folders>` ran the sentiment suite on it (the spec's placeholder task
    named no task) and exited 1 for a section that could never run."""
    from app.report import default_suites

    assert default_suites(offline_pair) == [str(shared("checklist", "sentiment_suite.json.gz"))]
    assert tiny_nli_pair.spec.task.name == "rte" and default_suites(tiny_nli_pair) == []


def test_a_report_without_a_fitting_suite_says_so(tiny_nli_pair, tmp_path):
    """No CheckList section at all would read as forgotten; the report says why there is none."""
    from app.report import generate

    res = generate(tiny_nli_pair, tmp_path, datasets=[], attack_n=1, umap_n=20, saliency_n=2, progress_bar=False)
    md = (tmp_path / "report.md").read_text()
    assert res["failed"] == {} and not any(k.startswith("checklist") for k in res["sections"])
    assert "## CheckList\n\nNo released CheckList suite fits these models (rte, answering " in md


def test_a_section_is_computed_again_after_the_pairs_weights_change(tiny_dirs, tmp_path):
    """The report's cache keyed its sections by the models' sources alone: after a pair was retrained in place
    (same folders, new weights) the report reused every stale section. Now a section's key holds the weights'
    stamp, as the embedding cache's does: the same settings give the same key, new weights another."""
    import os
    import shutil

    from app.core.execution.pair import Pair
    from app.core.models import loading
    from app.report import build_sections

    bert, albert = tmp_path / "bert", tmp_path / "albert"
    shutil.copytree(tiny_dirs["bert"], bert)
    shutil.copytree(tiny_dirs["albert"], albert)
    data = str(shared("glue", "sst2", "dev.tsv"))

    def keys():  # as a new `albert-lens report` process sees the pair: nothing loaded yet
        loading.clear_cache()
        pair = Pair.resolve(models=[str(bert), str(albert)], task="sst2")
        return [s.key for s in build_sections(pair, [data], [], limit=20, sample=2, attack_n=1, umap_n=20)]

    before = keys()
    assert keys() == before  # nothing changed: every section reused
    weights = next(albert.glob("*.safetensors"))
    st = weights.stat()
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # retrained in place: new weights, same folder
    after = keys()
    assert len(after) == len(before) >= 3 and not set(after) & set(before)
