import numpy as np
import pytest

from app.core.execution.inference import predict
from app.core.ground.data import Example, load_dataset
from app.core.techniques import attacks

from .conftest import shared


def _sample(pair, n=10, seed=0):
    """Seeded sample of SST-2 dev sentences both models classify correctly (so both can be attacked)."""
    dev = [e for e in load_dataset(shared("glue", "sst2", "dev.tsv")).examples if 6 <= len(e.text.split()) <= 18]
    rng = np.random.default_rng(seed)
    pick = [dev[i] for i in rng.choice(len(dev), size=60, replace=False)]
    preds = [predict(m, pick).predicted for m in pair.models]
    ok = [e for i, e in enumerate(pick) if all(p[i] == e.label for p in preds)]
    return ok[:n]


@pytest.fixture(scope="module")
def deepwordbug_rows(offline_pair):
    return attacks.attack_pair(offline_pair.models, "deepwordbug", _sample(offline_pair, 8), query_budget=300)


@pytest.fixture(scope="module")
def textfooler_rows(offline_pair):
    return attacks.attack_pair(offline_pair.models, "textfooler-offline", _sample(offline_pair, 8, seed=1),
                               query_budget=300)


@pytest.mark.parametrize("rows_name", ["deepwordbug_rows", "textfooler_rows"])
def test_successful_attacks_really_flip_the_attacked_model(request, offline_pair, rows_name):
    rows = request.getfixturevalue(rows_name)
    successes = 0
    for row in rows:
        for clf, res in zip(offline_pair.models, row["results"]):
            assert res["outcome"] in ("success", "failed", "timeout")  # sampled so neither is skipped
            if res["outcome"] == "success":
                successes += 1
                now = predict(clf, [Example(tuple(res["adversarial"]))], validate=False).predicted[0]
                assert now != row["gold"] and now == res["adversarial_label"]
                assert [c for c, ch in res["marked"] if ch], res["marked"]
                assert "".join(c for c, _ in res["marked"]) == res["adversarial"][0]
                # what the panel shows: the original with the words changed, each swap, and both confidences
                assert "".join(c for c, _ in res["marked_original"]) == row["texts"][0]
                old = [c for c, ch in res["marked_original"] if ch]
                assert [a for a, _ in res["swaps"]] == old and all(a != b for a, b in res["swaps"])
                p_before = predict(clf, [Example(tuple(row["texts"]))]).probs[0].max()
                p_after = predict(clf, [Example(tuple(res["adversarial"]))], validate=False).probs[0].max()
                assert res["original_confidence"] == pytest.approx(float(p_before), abs=1e-5)
                assert res["adversarial_confidence"] == pytest.approx(float(p_after), abs=1e-5)
    # enough successes that the checks above mean something: a quarter of the 2 x n attacks (with TextFooler's
    # part-of-speech constraint, textfooler-offline flipped BERT on 47% and ALBERT on 70% of 30 SST-2 dev
    # sentences; these 8 give 5 of 16)
    assert successes >= len(rows) // 2


def test_similarity_constraint_is_respected(textfooler_rows):
    pairs = [(row["texts"][0], r["adversarial"][0]) for row in textfooler_rows for r in row["results"]
             if r["outcome"] == "success"]
    assert pairs
    sims = attacks.MiniLMSentenceEncoder.similarity([a for a, _ in pairs], [b for _, b in pairs])
    assert (sims >= attacks.SIMILARITY_THRESHOLD - 1e-4).all(), sims


def test_transfer_matches_re_prediction(offline_pair, deepwordbug_rows):
    names = [m.name for m in offline_pair.models]
    for row in deepwordbug_rows:
        for t in row["transfer"]:
            src = row["results"][names.index(t["from"])]
            other = offline_pair.models[names.index(t["to"])]
            after = predict(other, [Example(tuple(src["adversarial"]))], validate=False).predicted[0]
            assert after == t["label_after"]
            assert t["fooled"] == (t["other_was_correct"] and after != row["gold"])
    summary = attacks.summarize(deepwordbug_rows, offline_pair.models)
    checked = 0
    for _k, name in enumerate(names):
        tr = [t for r in deepwordbug_rows for t in r["transfer"] if t["from"] == name and t["other_was_correct"]]
        if tr:
            assert summary[name]["transfer_rate"] == pytest.approx(np.mean([t["fooled"] for t in tr]))
            checked += 1
        else:
            assert summary[name]["transfer_rate"] is None
    assert checked >= 1  # the sample gives at least one model's adversarial texts to transfer


@pytest.mark.parametrize("recipe", ["textfooler", "bae", "iga", "faster-alzantot", "checklist", "hotflip"])
def test_recipes_needing_downloads_are_refused_fast(offline_pair, recipe, monkeypatch):
    """Refused before anything is built or fetched (which is what made it slow, or hang offline)."""
    monkeypatch.setattr(attacks, "build_attack", lambda *a, **k: pytest.fail("built the attack"))
    monkeypatch.setattr(attacks, "make_wrapper", lambda *a, **k: pytest.fail("wrapped the model"))
    with pytest.raises(attacks.AttackUnavailable) as err:
        attacks.attack_pair(offline_pair.models, recipe, [Example(("good",), "positive")])
    msg = str(err.value)
    assert msg.startswith(recipe)
    assert "get it" in msg or "LSTM" in msg


def test_time_limit_and_cancellation(offline_pair):
    import threading

    ex = _sample(offline_pair, 1, seed=3)[0]
    res = attacks.attack_one(offline_pair.models[0], "deepwordbug", ex, time_limit=1e-9)
    assert res["outcome"] == "timeout"
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(attacks.AttackCancelled):
        attacks.attack_pair(offline_pair.models, "deepwordbug", [ex], cancel=cancel)


def test_a_huge_input_is_attacked_where_the_model_reads_it(offline_pair):
    """TextAttack built a copy of a 100,000-character review per word before its first query, out of reach
    of the time limit (minutes). The window the model reads is attacked, the rest put back unchanged: the
    adversarial text is the whole input, it fools the model, and the marked view spells it out."""
    clf = offline_pair.models[1]
    rest = " The plot was a bit thin, but the acting was superb." * 2000
    ex = Example(("a gorgeous , witty , seductive movie ." + rest, ), "positive")
    res = attacks.attack_one(clf, "deepwordbug", ex, query_budget=300, time_limit=60)
    # a search over the whole text would spend its 60 s before its first query and end as a timeout
    assert res["outcome"] == "success" and "the rest of the input is left as it was" in res["note"]
    assert res["steps"] < 100  # the window's words, not 18,000
    (adv,) = res["adversarial"]
    assert len(adv) > len(rest) and adv.endswith(ex.text[-len(rest) // 2:])
    assert predict(clf, [Example((adv,))]).predicted[0] == res["adversarial_label"] != "positive"
    assert "".join(chunk for chunk, _ in res["marked"]) == adv
    assert any(changed for _, changed in res["marked"])


def test_marked_chunks_get_each_fields_rest_back():
    marked = [["a", False], [" ", False], ["bd", True], ["\n", False], ["c", False], [" d", False]]
    out = attacks._with_rests(marked, ["a bd", "c d"], [" e f", " g"])
    assert "".join(c for c, _ in out) == "a bd e f\nc d g"
    assert out[2:4] == [["bd", True], [" e f", False]] and out[-1] == [" g", False]


def test_offline_recipes_are_listed_as_offline():
    listed = {r["name"]: r for r in attacks.list_recipes()}
    for name in ("deepwordbug", "pruthi", "input-reduction", "pwws", "leap", "textfooler-offline"):
        assert listed[name]["offline"] and listed[name]["available"], listed[name]
    assert not listed["textfooler"]["available"]


def test_cli_attack_is_resumable(offline_pair, tmp_path, capsys):
    import json

    from app.cli import main

    out = tmp_path / "run.jsonl"
    dev = str(shared("glue", "sst2", "dev.tsv"))
    assert main(["attack", "--pair", "offline", "--recipe", "deepwordbug", "--dataset", dev, "--n", "2",
                 "--out", str(out)]) == 0
    first = out.read_text().splitlines()
    assert len(first) == 2
    assert main(["attack", "--pair", "offline", "--recipe", "deepwordbug", "--dataset", dev, "--n", "3",
                 "--out", str(out), "--json"]) == 0
    lines = out.read_text().splitlines()
    assert lines[:2] == first and len(lines) == 3  # two reused, one new
    printed = capsys.readouterr().out
    res = json.loads(printed[printed.index('{\n  "recipe"'):])  # the result's to_dict(), as every --json
    assert [r["index"] for r in res["examples"]] == [0, 1, 2]


def test_success_rates_are_compared_on_the_examples_both_models_were_attacked_on(tiny_pair):
    from app.core.ground.significance import mcnemar_exact
    from app.core.techniques.attacks import compare_success

    def row(a, b):
        return {"results": [{"outcome": a}, {"outcome": b}], "transfer": []}

    rows = [row("success", "failed"), row("success", "success"), row("skipped", "success"),
            row("timeout", "success"), row("success", "failed"), row("failed", "skipped"), row("success", "timeout")]
    cmp = compare_success(rows, tiny_pair.models)
    # paired: rows 0, 1, 3, 4, 6 (a skip leaves the example out for both); a timeout is an attack that failed
    assert cmp["n"] == 5 and cmp["values"] == pytest.approx([4 / 5, 2 / 5])
    assert cmp["only"] == [3, 1] and cmp["both"] == 1 and cmp["p_value"] == pytest.approx(mcnemar_exact(3, 1))
    assert cmp["metric"] == "success rate"
    assert compare_success([row("skipped", "success")], tiny_pair.models) is None


@pytest.mark.parametrize("task,premise_kept", [("snli", True), ("rte", False)])
def test_textfooler_leaves_an_nli_premise_alone_as_textattack_does(tiny_dirs, monkeypatch, task, premise_kept):
    """TextFooler's recipe never edits an SNLI/MNLI premise (keyed by TextAttack's column names); GLUE's RTE
    columns are sentence1/sentence2, so TextAttack edits both texts there, and so do we. Every query the search
    makes is recorded."""
    attacks._textattack()  # on transformers 5, through its one shim
    from textattack.constraints.grammaticality import PartOfSpeech

    from app.core.execution.pair import Pair
    from app.core.ground.runtime import pos_tagger_available

    clf = Pair.resolve(models=[str(tiny_dirs["albert3" if task == "snli" else "albert"])] * 2, task=task).models[0]
    premise, hypothesis = "The old man walked his small dog in the park.", "A man is walking a dog outside."
    gold = predict(clf, [Example((premise, hypothesis))]).predicted[0]
    wrapper = attacks.make_wrapper(clf, None)
    seen = []
    call = type(wrapper).__call__

    def recording(self, text_input_list, **kw):
        seen.extend(text_input_list)
        return call(self, text_input_list, **kw)

    monkeypatch.setattr(type(wrapper), "__call__", recording)
    attack = attacks.build_attack("textfooler-offline", wrapper, 300)
    assert any(isinstance(c, PartOfSpeech) for c in attack.constraints) == pos_tagger_available() is True
    res = attacks.attack_one(clf, "textfooler-offline", Example((premise, hypothesis), gold), wrapper=wrapper,
                             attack=attack, query_budget=300)
    assert res["outcome"] in ("success", "failed") and len(seen) > 5
    assert all(len(q) == 2 for q in seen)
    assert all(q[0] == premise for q in seen) is premise_kept
    assert any(q[1] != hypothesis for q in seen)


@pytest.mark.parametrize("recipe", ["deepwordbug", "textfooler-offline"])
def test_the_wrapper_finds_what_textattacks_own_wrapper_finds(offline_pair, recipe):
    """The same seeded recipe through TextAttack's stock `HuggingFaceModelWrapper` (every query padded to the
    tokenizer's maximum) and through the project's wrapper (dynamic padding, the [CLS]-only last layer): the same
    outcome and the same adversarial input (as the model reads it) for every example, and the same number of
    queries."""
    import copy

    attacks._textattack()
    from textattack.models.wrappers import HuggingFaceModelWrapper

    clf = offline_pair.models[0]
    examples = _sample(offline_pair, 4, seed=2)
    # the stock wrapper's tokenizer with a maximum of 128, not the MiniLM's 512: still every query padded to one
    # fixed length, far past any of these sentences' (6-18 words), at a quarter of the work per query (the stock
    # side was most of this test's 20 CPU s); a query it cut short would differ from ours and fail the test
    fixed = copy.deepcopy(clf.tokenizer)
    fixed.model_max_length = 128
    stock = attacks.build_attack(recipe, HuggingFaceModelWrapper(clf.model, fixed), query_budget=200)
    ours = attacks.build_attack(recipe, attacks.make_wrapper(clf), query_budget=200)
    outcomes = []
    for ex in examples:
        results = []
        for attack in (stock, ours):
            attacks._seed(ex, 0, 0)
            results.append(attack.attack(ex.text, clf.labels.index(ex.label)))
        a, b = results
        assert type(a).__name__ == type(b).__name__
        texts = [r.perturbed_result.attacked_text.text for r in (a, b)]
        # the same input as the model reads it: WordNet offers "land" and "Land", which an uncased model can't
        # tell apart, so the tie between them falls to float rounding (padding to 128 or not)
        assert clf.tokenizer(texts[0])["input_ids"] == clf.tokenizer(texts[1])["input_ids"], texts
        assert a.perturbed_result.num_queries == b.perturbed_result.num_queries
        outcomes.append(type(a).__name__)
    assert "SuccessfulAttackResult" in outcomes  # the comparison covers adversarial texts, not only failures


LOGGING_PROBE = """
import logging, os, sys, tempfile
sys.path.insert(0, {root!r})
from app.core.ground import runtime
os.environ.pop("ALBERT_LENS_CACHE", None)  # the default cache folder, under XDG's
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp()
runtime.prepare()
before = (os.environ.get("HF_HOME"), os.environ["XDG_CACHE_HOME"], runtime.cache_dir())
path = tempfile.mktemp()
log_file = logging.FileHandler(path)  # an operator's log file (it closes its stream when closed, as absl's does)
logging.getLogger().addHandler(log_file)
if {through_core}:
    from app.core.techniques import attacks
    attacks._textattack()
else:  # the bare import (through the one shim transformers 5 needs, which leaves logging alone)
    from app.core.ground import compat
    compat._flair_on_transformers_5()
    import textattack
closed = log_file.stream is None or log_file.stream.closed
print(closed, log_file in logging.getLogger().handlers,
      logging.getLogger("textattack.shared.utils.install").level,
      bool(logging.getLogger("flair").handlers),
      before == (os.environ.get("HF_HOME"), os.environ["XDG_CACHE_HOME"], runtime.cache_dir()))
"""

def through_the_core():
    """A fresh process that imports TextAttack through the core after an operator's log handler is set
    (`LOGGING_PROBE`), then the rest of today's stack beside it (gradio, LIT): its exit code, and its output, the
    probe's line then numpy's, transformers' and gradio's versions. Run once a run, whichever test asks first (this
    module's logging test, test_stack's imports test): each started a process of its own (~7 CPU s)."""
    import subprocess
    import sys

    from .conftest import ROOT, run_shared

    code = LOGGING_PROBE.format(root=str(ROOT), through_core=True) + (
        "import gradio, lit_nlp.app, numpy, textattack, transformers\n"
        "print(numpy.__version__, transformers.__version__, gradio.__version__)\n")
    return run_shared("stack-through-the-core", lambda: subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300))


def test_importing_textattack_leaves_the_processs_logging_alone():
    """TextAttack's and flair's imports configure logging with dictConfig, which closes every handler the process
    had (under pytest-xdist: the worker's capture file, failing every later test), and TextAttack's sets the
    process's cache folders to its own. Through the core their loggers are set and the process's handlers and
    cache settings are left as they were; the bare import, the control, closes them and moves the caches."""
    import subprocess
    import sys

    from .conftest import ROOT

    def probe(through_core: bool) -> str:
        if through_core:  # the process that imports the whole stack through the core, shared with test_stack
            out = through_the_core()
            assert out.returncode == 0, out.stderr[-2000:]
            return out.stdout.strip().splitlines()[-2]
        code = LOGGING_PROBE.format(root=str(ROOT), through_core=through_core)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip().splitlines()[-1]

    # the operator's file is still open; TextAttack's logger set, at WARNING through the core (its INFO lines,
    # one per attack built, broke the progress bar), at its own INFO by the bare import
    # ...and the process's cache settings: the bare import points the Hugging Face cache and XDG's (so this
    # project's own cache folder) at TextAttack's for the rest of the process
    assert probe(True) == "False True 30 True True"
    assert probe(False) == "True True 20 True False"


def test_textattacks_info_lines_stay_out_of_the_progress_bar_unless_verbose():
    """TextAttack logs "Goal function ... compatible with model ..." at INFO for every attack it builds, between
    the CLI's progress bar updates; it is quiet unless the CLI runs with --verbose (the root logger at DEBUG)."""
    import logging

    from app.core.techniques import attacks

    ta = attacks._textattack()
    log, root = ta.shared.utils.logger, logging.getLogger()
    assert not log.isEnabledFor(logging.INFO)
    kept = root.level
    try:
        log.setLevel(logging.INFO)  # as TextAttack sets it on import
        root.setLevel(logging.DEBUG)  # --verbose
        attacks._textattack()
        assert log.isEnabledFor(logging.INFO)
    finally:
        root.setLevel(kept)
        log.setLevel(logging.WARNING)
