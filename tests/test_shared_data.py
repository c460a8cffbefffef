"""scripts/shared-data: the manifest matches the data beside the checkout, a changed or missing file is named,
and a download is installed only when its bytes are the ones the tests were written against."""
import hashlib
import importlib.machinery
import importlib.util
import shutil

from .conftest import ROOT, shared


def _script():
    loader = importlib.machinery.SourceFileLoader("shared_data", str(ROOT / "scripts" / "shared-data"))
    spec = importlib.util.spec_from_loader("shared_data", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_the_manifest_names_every_file_the_tests_read_and_check_finds_changes(tmp_path, capsys):
    sd = _script()
    files = sd.json.loads(sd.MANIFEST.read_text())["files"]
    for rel in ("glue/sst2/dev.tsv", "ag_news/test.csv", "checklist/sentiment_suite.json.gz", "imdb/test_1000.tsv",
                "nltk_data/taggers/averaged_perceptron_tagger_eng.zip", "snli/s1.dev"):
        assert rel in files
    assert sd.check(shared(), files) == 0
    copy = tmp_path / "data"
    shutil.copytree(shared("glue"), copy / "glue")
    with (copy / "glue" / "sst2" / "dev.tsv").open("a") as fh:
        fh.write("one more line\t1\n")
    capsys.readouterr()
    assert sd.check(copy, files) == 1
    out = capsys.readouterr().out
    assert "different  glue/sst2/dev.tsv" in out and "missing  ag_news/test.csv" in out
    assert f"{len([r for r in files if r.startswith('glue/')]) - 1} of {len(files)} files" in out


def test_fetch_installs_only_the_expected_bytes(tmp_path, capsys):
    sd = _script()
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_bytes(b"the expected bytes\n")
    bad.write_bytes(b"other bytes\n")
    entry = lambda src: {"bytes": len(b"the expected bytes\n"), "sha256": hashlib.sha256(b"the expected bytes\n")
                         .hexdigest(), "source": "a test", "url": src.as_uri()}
    files = {"a/one.txt": entry(good), "a/two.txt": entry(bad), "a/three.txt": {"bytes": 1, "sha256": "0",
                                                                                 "source": "made by hand"}}
    base = tmp_path / "data"
    assert sd.fetch(base, files) == 1
    out = capsys.readouterr().out
    assert (base / "a" / "one.txt").read_bytes() == b"the expected bytes\n" and "fetched    a/one.txt" in out
    assert not (base / "a" / "two.txt").exists() and "refused    a/two.txt" in out
    assert "by hand    a/three.txt: made by hand" in out
