import json

from .conftest import shared


def test_report_has_every_table_and_figure_and_reuses_its_cache(offline_pair, tmp_path):
    from app.core.report import generate

    ds = str(shared("glue", "sst2", "dev.tsv"))
    suite = str(shared("checklist", "sentiment_suite.json.gz"))
    res = generate(offline_pair, tmp_path, datasets=[ds], suites=[suite], limit=60, sample=4, attack_n=2,
                   umap_n=40, progress_bar=False)
    md = (tmp_path / "report.md").read_text()
    for heading in ("Benchmark: dev.tsv", "CheckList: sentiment_suite.json.gz", "Attack: deepwordbug",
                    "Attack: textfooler-offline", "UMAP", "Parameters and speed"):
        assert f"## {heading}" in md
    for fig in ("umap.png", "checklist_sentiment.png", "layer_transitions.png", "benchmark.png"):
        assert (tmp_path / fig).stat().st_size > 5000
        assert f"]({fig})" in md
    html = (tmp_path / "report.html").read_text()
    assert "<table>" in html and "<img" in html
    assert res["reused"] == []
    # a second run with one more dataset reuses every earlier section
    res2 = generate(offline_pair, tmp_path, datasets=[ds, str(shared("imdb", "test_1000.tsv"))], suites=[suite],
                    limit=60, sample=4, attack_n=2, umap_n=40, progress_bar=False)
    assert set(res["sections"]) <= set(res2["reused"])
    assert len(res2["sections"]) == len(res["sections"]) + 1
    assert "## Benchmark: test_1000.tsv" in (tmp_path / "report.md").read_text()
    cached = list((tmp_path / "cache").glob("*.json"))
    assert all(json.loads(p.read_text()) for p in cached)
