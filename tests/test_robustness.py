"""Bad input through the core API, the CLI and LIT; a property test that alignment and saliency keep every word."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core import api
from app.core.execution.inference import encode_one
from app.core.ground.alignment import split_words
from app.core.ground.data import Example, blank_reason, load_dataset
from app.core.ground.errors import LensError
from app.core.techniques.saliency import method

ODD = [
    "👩‍👩‍👧‍👦 family emoji with joiners 👍🏽",
    "שלום עולם مرحبا hello",  # right-to-left scripts
    "tab\tand\x07bell\x1b[31m escape \x00 nul",
    "<script>alert('x')</script> <b>bold</b> &amp;",
    "\u200b\u200d\ufeff zero widths",
    "Zalgo: Ḩ̷̡e̸͉̓l̶̠̈́l̴̘͝o̷̧͐",
]


@pytest.mark.parametrize("text", ODD)
def test_odd_unicode_gets_a_result(tiny_pair, text):
    res = api.predict(tiny_pair, text)
    assert len(res["models"]) == 2
    sal = api.saliency(tiny_pair, text, None, method="gradient_x_input")
    words = [w.text for w in split_words(text.replace("\x00", " "))]
    for m in sal["maps"]:
        assert m["words"] == words


@pytest.mark.parametrize("text,msg", [("", "field 'sentence' is empty"), ("   \n\t", "field 'sentence' is empty"),
                                      ("\u200b\u200d \ufeff", r"field 'sentence' has only invisible characters "
                                                               r"\(U\+200B, U\+200D, U\+FEFF\)"),
                                      ("\x07\x1b", "field 'sentence' has only invisible characters"),
                                      ("x" * 100_001, "limit here is 100,000")])
def test_bad_text_has_a_clear_message(tiny_pair, text, msg):
    with pytest.raises(LensError, match=msg):
        api.predict(tiny_pair, text)


@pytest.mark.parametrize("value,msg", [("abc", "tolerance: 'abc' is not a number"),
                                       ("-1", "tolerance: '-1' must be a positive, finite number"),
                                       ("nan", "must be a positive, finite number"),
                                       ("1e-9", "tolerance: 1e-09 is below this server's smallest, 1e-07")])
def test_bad_ig_tolerance_is_named(tiny_pair, value, msg):
    with pytest.raises(LensError, match=msg):
        api.saliency(tiny_pair, "a fine film", None, method="integrated_gradients", target=None, tolerance=value)


def test_ig_tolerance_is_used(tiny_pair):
    """A tighter tolerance buys more steps and a delta within it (on this tiny model the loose one's is already at
    float32 rounding, ~1e-9, so the tight one is no larger beyond rounding); other methods ignore it."""
    loose = api.saliency(tiny_pair, "a gorgeous , witty , seductive movie .", None, method="integrated_gradients",
                         target=None, tolerance="1e-2")
    tight = api.saliency(tiny_pair, "a gorgeous , witty , seductive movie .", None, method="integrated_gradients",
                         target=None, tolerance=1e-6)
    for lo, ti in zip(loose["maps"], tight["maps"]):
        assert lo["delta"] <= 1e-2 and (ti["delta"] <= 1e-6 or "exceeds 1e-06" in ti["note"])
        assert ti["n_steps"] > lo["n_steps"] and ti["delta"] <= lo["delta"] + 1e-8
    gxi = api.saliency(tiny_pair, "a fine film", None, method="gradient_x_input", target=None, tolerance="1e-6")
    assert all(m["delta"] is None for m in gxi["maps"])


def test_100k_characters_are_predicted(tiny_pair):
    res = api.predict(tiny_pair, "word " * 20_000)
    assert len(res["models"]) == 2


def test_missing_second_field_for_pair_tasks(tiny_nli_pair):
    with pytest.raises(LensError, match="field 'hypothesis' is empty"):
        api.predict(tiny_nli_pair, "A premise only.", None)


def test_malformed_and_binary_dataset_files(tiny_pair, tmp_path):
    p = tmp_path / "bin.csv"
    p.write_bytes(b"text,label\n\xff\xfe\x00\x01,1\n")
    with pytest.raises(LensError, match="bin.csv, line 2: not valid UTF-8"):
        api.project(tiny_pair, str(p), projection="pca")
    blank = tmp_path / "blank.csv"
    blank.write_text("text,label\ngood,positive\n\"  \",negative\n")
    with pytest.raises(LensError, match="blank.csv, line 3: column 'text' is empty; remove the row"):
        api.project(tiny_pair, str(blank), projection="pca")
    blank.write_text('{"text": "good"}\n{"text": "\\u200b"}\n')
    blank = blank.rename(tmp_path / "blank.jsonl")
    with pytest.raises(
        LensError, match=r"blank.jsonl, line 2: column 'text' has only invisible characters \(U\+200B\)"
    ):
        load_dataset(blank)
    q = tmp_path / "ragged.tsv"
    q.write_text("sentence\tlabel\nok\t1\nextra\t1\t2\n")
    with pytest.raises(LensError, match="ragged.tsv, line 3: expected 2 columns, found 3"):
        load_dataset(q)


def test_cli_bad_input_exit_codes(tiny_dirs, capsys):
    from app.cli import main

    assert main(["predict", "--models", str(tiny_dirs["bert"]), str(tiny_dirs["albert"]), "--task", "sst2", ""]) == 2
    assert "field 'sentence' is empty" in capsys.readouterr().err
    assert main(["benchmark", "--pair", "offline", "--dataset", "/nonexistent/x.tsv"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_lit_wrapper_handles_odd_input(tiny_pair):
    from lit_models.models import models_for

    model = next(iter(models_for(tiny_pair.models).values()))
    outs = list(model.predict([{"sentence": t} for t in ODD]))
    assert len(outs) == len(ODD) and all(abs(sum(o["probas"]) - 1) < 1e-5 for o in outs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60))
def test_alignment_and_saliency_keep_every_word(tiny_pair, text):
    words = [w.text for w in split_words(text)]
    if blank_reason(text) is not None or not words:
        with pytest.raises(LensError, match="field 'sentence' (is empty|has only invisible)"):
            encode_one(tiny_pair.models[0], Example((text,)))
        return
    for clf in tiny_pair.models:
        _, al = encode_one(clf, Example((text,)))
        assert [w.text for w in al.words] == words
        assert all(al.word_tokens[i] or i in al.unseen or i in al.cut for i in range(len(words)))
    sal = method("gradient_x_input", tiny_pair.models[1]).attribute(Example((text,)))
    assert sal.words == words and len(sal.scores) == len(words)


def test_uploads_are_limited_in_size_and_type(tmp_path, monkeypatch):
    from app.ui import common as ui

    big = tmp_path / "big.csv"
    big.write_bytes(b"text,label\n" + b"x,1\n" * 100)
    monkeypatch.setattr(ui, "MAX_UPLOAD_MB", 0.0001)
    with pytest.raises(LensError, match=r"upload: big.csv is .* MB; the limit is"):
        ui.upload_path(str(big))
    monkeypatch.setattr(ui, "MAX_UPLOAD_MB", 20)
    exe = tmp_path / "model.pkl"
    exe.write_bytes(b"\x80\x04")
    with pytest.raises(LensError, match="upload: model.pkl is not a .csv, .tsv or .jsonl file"):
        ui.upload_path(str(exe))
    assert ui.upload_path(str(big)) == str(big)


def test_servers_bind_loopback_unless_told_otherwise():
    from app.cli import build_parser

    parser = build_parser()
    for cmd, port in (("app", 7860), ("lit", 5432)):
        args = parser.parse_args([cmd])
        assert args.host == "127.0.0.1" and args.port == port


LONE = "good \ud800 film"  # what JSON's "good \ud800 film" decodes to: no Unicode text, and no tokenizer takes it


@pytest.mark.parametrize("call", ["predict", "saliency", "attention", "counterfactual", "replacements", "facts",
                                  "attack"])
def test_a_lone_surrogate_is_refused_with_its_place_on_every_text_endpoint(tiny_pair, call):
    """It reached the tokenizer, whose TypeError came back as "something went wrong"; now the core's one check of
    a text refuses it, naming the field, the code point and where it is."""
    from app.core import api
    from app.core.ground.errors import InputError

    run = {
        "predict": lambda: api.predict(tiny_pair, LONE),
        "saliency": lambda: api.saliency(tiny_pair, LONE, None, method="gradient_x_input"),
        "attention": lambda: api.attention(tiny_pair, LONE),
        "counterfactual": lambda: api.counterfactual(tiny_pair, LONE, replacements="good -> fine"),
        "replacements": lambda: api.counterfactual(tiny_pair, "a good film", replacements="good -> \udfff"),
        "facts": lambda: api.facts(tiny_pair, [LONE]),
        "attack": lambda: api.attack(tiny_pair, LONE, recipe="deepwordbug", label="positive"),
    }[call]
    where = r"U\+DFFF\) at character 9" if call == "replacements" else r"U\+D800\) at character 6"
    field = "replacements" if call == "replacements" else "'sentence'"
    with pytest.raises(InputError, match=rf"{field}.*unpaired surrogate \({where}, which is not Unicode text"):
        run()


def test_a_lone_surrogate_in_a_jsonl_file_names_its_line(tmp_path):
    from app.core.ground.data import DataError

    path = tmp_path / "rows.jsonl"
    path.write_text('{"text": "a fine film", "label": 1}\n{"text": "good \\ud800 film", "label": 0}\n')
    with pytest.raises(DataError, match=r"line 2: column 'text' has an unpaired surrogate \(U\+D800\)"):
        load_dataset(path)
