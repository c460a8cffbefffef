import json

from .conftest import shared


def test_report_has_every_table_and_figure_and_reuses_its_cache(checkout, capsys, monkeypatch):
    """The README's and docs/cli.md's `report` command, as written (test_docs.py leaves it to this test): every
    section, table and figure; then a second run with one more dataset reuses every section of the first."""
    import logging
    import re

    from app.cli import build_parser, main

    from .test_docs import ALL, RUN_ELSEWHERE

    assert "test_report.py::test_report_has_every_table" in RUN_ELSEWHERE["report"]
    (args,) = [c for c in ALL if c[0] == "report"]
    said = build_parser().parse_args(list(args))
    assert said.suites is None  # the pair's own suite: sentiment's, for the offline pair
    monkeypatch.setattr(logging.root, "handlers", [])  # the CLI's logging.basicConfig: this command's stderr
    assert main(list(args)) == 0, capsys.readouterr().err[-2000:]
    first = re.search(r"\((\d+) of (\d+) sections reused from the cache\)", capsys.readouterr().out)
    assert first and first.group(1) == "0"
    out, n, umap_n = checkout / said.out, said.limit, said.umap_n
    md = (out / "report.md").read_text()
    for heading in ("Benchmark: dev.tsv", "Where they differ: dev.tsv", "CheckList: sentiment_suite.json.gz",
                    "Attack: deepwordbug", "Attack: textfooler-offline", "UMAP",
                    "Inside: layer similarity and attention", "Saliency: integrated gradients", "Parameters and speed"):
        assert f"## {heading}" in md
    inside = md.split("## Inside: layer similarity and attention")[1].split("## ")[0]
    # seven layers each (embeddings + 6): every layer of the first model gets its best match but the constant
    # [CLS] input embedding, and every layer of both models its attention row
    assert inside.count("→") == 6 and f"[CLS] vectors of {umap_n} examples" in inside
    assert sum(line.startswith("| ") for line in inside.splitlines()) == 1 + 12  # its header and 6 + 6 layers
    sal = md.split("## Saliency: integrated gradients")[1].split("## ")[0]
    assert "| BERT | " in sal and "(paired permutation" in sal and "Rank agreement" in sal
    for fig in ("umap.png", "checklist_sentiment.png", "layer_transitions.png", "benchmark.png", "saliency.png",
                "similarity.png", "attention_stats.png"):
        assert (out / fig).stat().st_size > 5000
        assert f"]({fig})" in md
    # the benchmark says whether the gap between the models is more than chance (the paired test)
    bench = md.split("## Benchmark: dev.tsv")[1].split("## ")[0]
    assert "accuracy: " in bench and "(McNemar, exact)" in bench and f"on these {n} examples." in bench
    assert "Right: both " in bench
    # where they differ: the slice table of the same sentences, and its figure
    diff = md.split("## Where they differ: dev.tsv")[1].split("## ")[0]
    assert f"{n} labelled examples" in diff and "candidate slices" in diff and "| gold label: " in diff
    assert any(f.name.startswith("slices_") and f.stat().st_size > 5000 for f in out.glob("*.png"))
    html = (out / "report.html").read_text()
    assert "<table>" in html and "<img" in html
    cached = {p.stem for p in (out / "cache").glob("*.json")}
    assert len(cached) == int(first.group(2))  # every section computed and kept
    # the same command again with one more dataset (60 rows of SST-2 train, enough for its slices), as a user reruns
    # it: every earlier section reused, the new dataset's benchmark and slices computed and kept beside them
    more = checkout / "more.tsv"
    more.write_text("".join(shared("glue", "sst2", "train.tsv").read_text().splitlines(keepends=True)[:61]))
    at = args.index("--datasets") + 1
    assert main([*args[:at], *said.datasets, str(more), *args[at + len(said.datasets):]]) == 0, \
        capsys.readouterr().err[-2000:]
    again = re.search(r"\((\d+) of (\d+) sections reused from the cache\)", capsys.readouterr().out)
    assert again and (int(again.group(1)), int(again.group(2))) == (len(cached), len(cached) + 2)
    assert cached < {p.stem for p in (out / "cache").glob("*.json")}
    assert "## Benchmark: more.tsv" in (out / "report.md").read_text()
    assert "60 labelled examples" in (out / "report.md").read_text().split("## Where they differ: more.tsv")[1]
    assert all(json.loads(p.read_text()) for p in (out / "cache").glob("*.json"))


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
