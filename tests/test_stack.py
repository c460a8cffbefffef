"""Today's stack, held in seconds: numpy 2, transformers 5 and gradio 6 import beside LIT and TextAttack (through
the one shim flair needs, app/core/ground/compat.py), and what the recipes list says runs is what `attack` runs."""
import subprocess
import sys

import pytest

from app.core.techniques import attacks

from .conftest import ROOT, shared


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_todays_stack_imports_together():
    """numpy 2, transformers 5 and gradio 6 in one process with LIT and TextAttack imported (through the core's
    shim: the process test_attacks' logging test reads too): an upgrade that breaks either import fails here
    first, with the import's own error."""
    from .test_attacks import through_the_core

    out = through_the_core()
    assert out.returncode == 0, out.stderr[-3000:]
    numpy, transformers, gradio = (int(v.split(".")[0]) for v in out.stdout.split()[-3:])
    assert (numpy, transformers, gradio) == (2, 5, 6)


def test_without_the_shim_flair_does_not_import_on_transformers_5():
    """The shim answers exactly one name: without it `import textattack` fails on that name (when a flair release
    no longer imports it, this fails and the shim can go)."""
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r})\nfrom app.core.ground import runtime\n" \
           "runtime.prepare()\nimport textattack"
    out = _python(code)
    assert out.returncode != 0 and "LayoutLMv2FeatureExtractor" in out.stderr, out.stderr[-2000:]


@pytest.fixture
def textattack_broken(monkeypatch):
    """TextAttack made unimportable in this process (as an upgrade that breaks it would), the import checks asked
    afresh, and put back afterwards."""
    attacks.textattack_problem.cache_clear()
    attacks._recipe_problem.cache_clear()
    monkeypatch.setitem(sys.modules, "textattack", None)  # `import textattack` now raises ImportError
    yield
    attacks.textattack_problem.cache_clear()
    attacks._recipe_problem.cache_clear()


def test_recipes_and_attack_agree_when_textattack_does_not_import(textattack_broken, capsys):
    """`albert-lens recipes` says deepwordbug does not run, naming the import's error, and `attack` refuses it with
    the same reason in one line, no traceback, before reading a model."""
    from app import cli

    (row,) = [r for r in attacks.list_recipes() if r["name"] == "deepwordbug"]
    assert not row["available"] and "TextAttack does not import here (ModuleNotFoundError" in row["why"]
    assert cli.main(["recipes"]) == 0
    listed = capsys.readouterr().out
    line = next(ln for ln in listed.splitlines() if ln.lstrip().startswith("deepwordbug"))
    assert "runs here" not in line and "TextAttack does not import here" in listed
    dev = str(shared("glue", "sst2", "dev.tsv"))
    assert cli.main(["attack", "--pair", "offline", "--recipe", "deepwordbug", "--dataset", dev, "--n", "1"]) == 2
    err = capsys.readouterr().err
    said = [ln for ln in err.splitlines() if ln.startswith("albert-lens:")]  # (the progress bar's line aside)
    assert said == [f"albert-lens: error: {row['why']}"] and "Traceback" not in err, err


def test_recipes_say_a_recipe_runs_where_it_does():
    """The control: on this stack TextAttack imports, and the offline recipes are listed as running."""
    attacks.textattack_problem.cache_clear()
    rows = {r["name"]: r for r in attacks.list_recipes()}
    assert rows["deepwordbug"]["available"] and rows["deepwordbug"]["why"] == ""
    assert attacks.textattack_problem() == ""


def test_wordnet_loads_without_mapping_itself_onto_itself(tmp_path, monkeypatch):
    """NLTK's WordNet reader mapped the multilingual WordNet's ids from the corpus named "wordnet" onto the loaded
    WordNet at every load, the same corpus here: ~4 of a load's ~7 CPU s for the identity. `quick_wordnet` gives
    that map NLTK's own word for the identity (None) and no other: a WordNet read from elsewhere is mapped as
    NLTK maps it, and the map's one reader in NLTK is still the multilingual tab files' (an upgrade that reads it
    elsewhere fails here)."""
    import inspect
    from types import SimpleNamespace

    from nltk.corpus.reader import wordnet as reader
    from nltk.data import FileSystemPathPointer

    from app.core.ground import compat, runtime

    runtime.prepare_nltk()
    cls = reader.WordNetCorpusReader
    mapped = []
    monkeypatch.setattr(cls, "map_wn", lambda self, version="wordnet": mapped.append(version) or {"mapped": 1})
    compat.quick_wordnet()
    loaded = compat._corpus_root("wordnet")
    assert cls.map_wn(SimpleNamespace(root=loaded)) is None and mapped == []
    assert cls.map_wn(SimpleNamespace(root=FileSystemPathPointer(str(tmp_path)))) == {"mapped": 1}
    assert mapped == ["wordnet"]
    users = sorted(name for name, f in vars(cls).items() if inspect.isfunction(f) and "map30" in inspect.getsource(f))
    assert users == ["__init__", "custom_lemmas"]
    mapped.clear()
    with pytest.warns(UserWarning, match="multilingual functions are not available"):  # no multilingual reader
        fresh = cls(loaded, None)  # a reader of the loaded WordNet, as NLTK's loader makes it: English as ever
    assert fresh.map30 is None and mapped == []
    from nltk.corpus import wordnet

    for word in ("film", "good", "run"):
        assert [s.name() for s in fresh.synsets(word)] == [s.name() for s in wordnet.synsets(word)]
