"""A capability declared once: its options checked as declared, and a toy capability defined here appears in the
facade, the command line (its --help and its answer) and the app's API with no edit anywhere else."""
import json

import pytest

from app.core import capabilities
from app.core.capabilities import Capability, Option
from app.core.errors import InputError


def shout_batch(pair, batch, times=2, mark="!"):
    """Toy job: each model's predicted label of the one input, repeated."""
    from app.core.inference import predict

    return [{"model": clf.name, "said": (predict(clf, batch).predicted[0] + mark) * times} for clf in pair.models]


shout_batch.combine = "whole"
TOY = Capability("toy_shout", "Toy: each model's label, shouted.", shout_batch,
                 options=(Option("times", int, 2, "how many times", low=1, high=5),
                          Option("mark", str, "!", "what follows each label", choices=("!", "?"))))


@pytest.fixture
def toy():
    capabilities.register(TOY)
    yield TOY
    capabilities.unregister(TOY.name)


def test_a_toy_capability_appears_in_the_facade_the_cli_and_the_app(toy, tiny_pair, tiny_dirs, capsys):
    from app import cli
    from app.core import api
    from app.core.data import Example
    from app.core.inference import predict
    from app.ui import build, declared
    from app.ui.common import Ctx

    # the facade: api.NAME, checked against the declaration
    res = api.toy_shout(tiny_pair, "a fine film", times=3, mark="?")
    labels = [predict(m, [Example(("a fine film",))]).predicted[0] for m in tiny_pair.models]
    assert res["result"] == [{"model": m.name, "said": (lab + "?") * 3} for m, lab in zip(tiny_pair.models, labels)]
    assert res["options"] == {"times": 3, "mark": "?"}
    assert api.run("toy_shout", tiny_pair, "a fine film")["options"] == {"times": 2, "mark": "!"}
    with pytest.raises(InputError, match="times: 9 is out of range; give a whole number from 1 to 5"):
        api.toy_shout(tiny_pair, "a fine film", times=9)
    with pytest.raises(InputError, match=r"mark: '\.' is not one of \['!', '\?'\]"):
        api.toy_shout(tiny_pair, "a fine film", mark=".")
    with pytest.raises(InputError, match=r"loud: toy_shout takes no such option; it takes \['mark', 'times'\]"):
        api.toy_shout(tiny_pair, "a fine film", loud=True)

    # the command line: a subcommand with the options as flags, answering as the facade does
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["toy-shout", "--help"])
    helped = capsys.readouterr().out
    assert "Toy: each model's label, shouted." in helped and "how many times (default: 2)" in helped
    assert "--mark {!,?}" in helped
    models = ["--models", str(tiny_dirs["bert"]), str(tiny_dirs["albert"]), "--task", "sst2"]
    assert cli.main(["toy-shout", *models, "--times", "3", "--mark", "?", "--json", "a fine film"]) == 0
    assert json.loads(capsys.readouterr().out)["result"] == res["result"]
    assert cli.main(["toy-shout", *models, "--times", "0", "a fine film"]) == 2
    assert "times: 0 is out of range" in capsys.readouterr().err

    # the app: an endpoint named as the capability, its gradio_client parameters the options, the same answer
    demo = build(tiny_pair)
    endpoint = demo.get_api_info()["named_endpoints"]["/toy_shout"]
    assert [p["parameter_name"] for p in endpoint["parameters"]] == ["text", "text2", "times", "mark"]
    assert [p["parameter_has_default"] for p in endpoint["parameters"]] == [False, True, True, True]
    got, text = declared.handler("toy_shout")(Ctx.of(tiny_pair), "a fine film", None, 3, "?")
    assert got["result"] == res["result"] and all(r["said"] in text for r in res["result"])

    # gone from every front end built after it is withdrawn
    capabilities.unregister("toy_shout")
    assert "/toy_shout" not in build(tiny_pair).get_api_info()["named_endpoints"]
    assert "toy-shout" not in cli.build_parser()._subparsers._group_actions[0].choices
    with pytest.raises(AttributeError):
        api.toy_shout  # noqa: B018


def test_options_are_checked_as_declared_and_capped_for_a_visitor(monkeypatch):
    """A count with a hosted cap is clamped to it for a visitor and not for the operator; an index (a range
    without a cap) is refused outside it; a yes/no takes its words; text is held to the server's length."""
    top = Option("top", int, 10, "how many", cap="max_examples")
    flag = Option("loud", bool, False, "shout")
    layer = Option("layer", int, -1, "which layer", low=-1, high=6)
    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    assert top.check(10**6) == 500 and top.check(10**6, visitor=False) == 10**6 and top.check("") == 10
    with pytest.raises(InputError, match="top: 0 is too small"):
        top.check(0)
    assert [flag.check(v) for v in ("yes", "false", True, None)] == [True, False, True, False]
    with pytest.raises(InputError, match="loud: 'maybe' is not true or false"):
        flag.check("maybe")
    assert layer.check("3") == 3 and layer.check(None) == -1
    with pytest.raises(InputError, match="layer: 7 is out of range; give a whole number from -1 to 6"):
        layer.check(7)
    with pytest.raises(InputError, match="note"):
        Option("note", str, "", "a note").check("x" * 3000)
    with pytest.raises(ValueError, match="take one of"):
        Capability("bad", "clashes", shout_batch, options=(Option("dataset", str, "", "no"),))


def test_the_declared_tokens_capability_reads_each_models_pieces(offline_pair, capsys):
    """The catalogue's `tokens`, through the facade and the CLI: each model's pieces are its tokenizer's own."""
    from app import cli
    from app.core import api

    text = "Unbelievably good"
    res = api.tokens(offline_pair, text, special=True)
    for clf, r in zip(offline_pair.models, res["result"]):
        ids = clf.tokenizer(text)["input_ids"]
        assert r["tokens"] == clf.tokenizer.convert_ids_to_tokens(ids) and r["n_tokens"] == len(ids)
        assert r["split_words"][0]["word"] == "Unbelievably" and "".join(
            p.lstrip("#▁") for p in r["split_words"][0]["pieces"]).lower() == "unbelievably"
    assert cli.main(["tokens", "--pair", "offline", "--special", "true", "--json", text]) == 0
    assert json.loads(capsys.readouterr().out)["result"] == res["result"]
