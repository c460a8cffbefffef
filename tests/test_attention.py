"""Word-level attention against the models' own `output_attentions`, summed to words by a loop written here."""
import json

import numpy as np
import pytest
import torch

from app.core import api
from app.core.execution.pair import Pair
from app.core.ground.data import Example
from app.core.ground.errors import InputError
from app.core.models.loading import eager_attention
from app.core.techniques.attention import pick, units, word_attention

EX = Example(("The townships weren't beautiful, but unbelievably affordable.",))  # words split into pieces


@pytest.mark.parametrize("k", [0, 1])
def test_word_maps_are_the_models_attention_summed_to_words(offline_pair, k):
    clf = offline_pair.models[k]
    names, unit_of, enc = units(clf, EX)
    with torch.no_grad():
        with eager_attention(clf.model):  # transformers 5's SDPA returns no weights; 4.x switched by itself
            raw = clf.model(**{n: v for n, v in enc.items() if n != "offset_mapping"}, output_attentions=True)
    att = torch.stack(raw.attentions)[:, 0].numpy()  # (layers, heads, tokens, tokens)
    assert len(unit_of) > len(names)  # some word is several tokens: the case in question
    ref = np.zeros(att.shape[:2] + (len(names), len(names)))
    for u in range(len(names)):
        rows = [t for t, x in enumerate(unit_of) if x == u]
        for v in range(len(names)):
            cols = [t for t, x in enumerate(unit_of) if x == v]
            ref[:, :, u, v] = att[:, :, rows][:, :, :, cols].sum(-1).mean(-1)
    got = word_attention(clf, EX)["maps"]
    np.testing.assert_allclose(got, ref, atol=1e-6)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)  # each unit's attention still sums to one
    assert names[0] == "[CLS]" and names[-1] == "[SEP]" and "unbelievably" in names


def test_both_models_compare_on_the_same_words_and_the_json_holds_them(offline_pair):
    res = api.attention(offline_pair, EX.texts[0], layer=2, head=3)
    a, b = res.models
    assert a["units"] == b["units"] and a["layer"] == b["layer"] == 2
    full = word_attention(offline_pair.models[1], EX)["maps"]
    np.testing.assert_allclose(np.array(b["map"]), full[1, 3], atol=1e-9)
    np.testing.assert_allclose(np.array(b["heads"]), full[1], atol=1e-9)
    mean = api.attention(offline_pair, EX.texts[0], layer=-1)
    np.testing.assert_allclose(np.array(mean.models[0]["map"]),
                               word_attention(offline_pair.models[0], EX)["maps"][-1].mean(0), atol=1e-9)
    json.dumps(res.to_dict())


def test_a_layer_or_head_out_of_range_names_the_range():
    maps = np.zeros((6, 12, 3, 3))
    with pytest.raises(InputError, match=r"layer: 0 is out of range \(1..6"):
        pick(maps, 0, None)
    with pytest.raises(InputError, match=r"head: 12 is out of range \(0..11"):
        pick(maps, 1, 12)
    assert pick(maps, -1, None)[0] == 6


def test_the_cli_prints_the_facades_maps(offline_pair, capsys):
    from app import cli

    assert cli.main(["attention", "--pair", "offline", "--layer", "2", "--head", "3", "--json", EX.texts[0]]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed.pop("hardware") == offline_pair.hardware()  # every --json says which device answered
    # the facade on the models the command used: the session's fixture may have been loaded before another test
    # cleared the loading cache, and a fresh load may take other kernels (a last-bit difference, 1e-7)
    used = Pair.resolve("offline")
    assert printed == json.loads(json.dumps(api.attention(used, EX.texts[0], layer=2, head=3).to_dict()))
    assert cli.main(["attention", "--pair", "offline", EX.texts[0]]) == 0
    text = capsys.readouterr().out
    assert "layer 6, mean of the heads" in text and "unbelievably" in text


def test_dataset_statistics_are_the_attention_rows_summarised(offline_pair):
    """Per layer and head: entropy, shares on [CLS]/[SEP]/punctuation and the change from the layer before,
    against the rows of `output_attentions` summarised here, averaged over two sentences."""
    from app.core.techniques.attention import attention_stats

    clf = offline_pair.models[1]
    exs = [EX, Example(("A warm, funny film.",))]
    got = attention_stats(clf, exs)
    want = {k: [] for k in ("entropy", "cls", "sep", "punct", "neighbour_js")}
    for ex in exs:
        _, _, enc = units(clf, ex)
        toks = clf.tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
        with torch.no_grad(), eager_attention(clf.model):
            att = torch.stack(clf.model(**{n: v for n, v in enc.items() if n != "offset_mapping"},
                                        output_attentions=True).attentions)[:, 0].double().numpy()
        L, H, T, _ = att.shape
        e = np.zeros((L, H))
        c, s, p = np.zeros((L, H)), np.zeros((L, H)), np.zeros((L, H))
        js = np.zeros((L - 1, H))
        for layer in range(L):
            for h in range(H):
                for t in range(T):
                    row = att[layer, h, t]
                    e[layer, h] += -sum(x * np.log(x) for x in row if x > 0) / T
                    c[layer, h] += row[toks.index("[CLS]")] / T
                    s[layer, h] += sum(row[i] for i, tk in enumerate(toks) if tk == "[SEP]") / T
                    p[layer, h] += sum(row[i] for i, tk in enumerate(toks) if tk.strip("▁") in {",", ".", "'"}) / T
                    if layer:
                        q = att[layer - 1, h, t]
                        m = (row + q) / 2
                        js[layer - 1, h] += (sum(a * np.log(a / b) for a, b in zip(row, m) if a > 0)
                                             + sum(a * np.log(a / b) for a, b in zip(q, m) if a > 0)) / 2 / T
        for k, v in zip(want, (e, c, s, p, js)):
            want[k].append(v)
    for k, v in want.items():
        np.testing.assert_allclose(np.array(got[k]), np.mean(v, 0), atol=1e-5, err_msg=k)
    assert got["n"] == 2 and (np.array(got["cls"]) + np.array(got["sep"]) + np.array(got["punct"]) <= 1 + 1e-9).all()


def test_dataset_statistics_through_the_facade_and_the_cli(offline_pair, capsys):
    from app import cli
    from app.core.techniques.attention import attention_stats

    res = api.attention(offline_pair, dataset="sentiment_plain", limit=6)
    exs = api.resolve_dataset(offline_pair, "sentiment_plain", 6).examples
    assert res.n == 6 and res.models[1] == attention_stats(offline_pair.models[1], exs)
    assert cli.main(["attention", "--pair", "offline", "--dataset", "sentiment_plain", "--limit", "6", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed.pop("hardware")["device"] == "cpu"
    used = Pair.resolve("offline")  # the models the command used (see test_the_cli_prints_the_facades_maps)
    assert printed == json.loads(json.dumps(api.attention(used, dataset="sentiment_plain", limit=6).to_dict()))
    assert cli.main(["attention", "--pair", "offline", "--dataset", "sentiment_plain", "a text"]) == 2
    assert "text: give either an input or a dataset, not both" in capsys.readouterr().err


def test_attention_over_a_dataset_prints_no_warning_per_example(offline_pair, capfd):
    """transformers 4 cannot switch BERT's or ALBERT's attention implementation after loading (their layers
    fall back to eager by themselves) and warned on every attempt: `attention --dataset` wrote a line per example
    and model to stderr. The same answer now, and stderr says nothing of it."""
    from app import cli

    assert cli.main(["attention", "--pair", "offline", "--dataset", "sentiment_plain", "--limit", "4", "--json"]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["n"] == 4
    assert "does not support setting its attention implementation" not in err, err[-500:]


def test_dataset_statistics_batch_within_their_budget_and_read_either_padding_side(offline_pair, monkeypatch):
    """Inputs go in length-sorted batches whose attention weights fit the budget (one long input alone); the
    statistics are the same however the inputs are batched; each padded cell finds its token's flags on either
    padding side (a left-padding tokenizer shifts every input to the right of its row)."""
    from types import SimpleNamespace

    from app.core.execution.inference import Ragged, cells
    from app.core.techniques import attention
    from app.core.techniques.attention import _stat_batches, attention_stats

    lengths = np.array([5, 40, 12, 12, 3, 40, 7])
    batches = _stat_batches(lengths, 2, budget=2 * 40 * 40 * 2)  # two rows of 40 tokens fit, or more shorter ones
    assert sorted(np.concatenate(batches).tolist()) == list(range(7))
    assert all(len(b) * 2 * int(lengths[b].max()) ** 2 <= 2 * 40 * 40 * 2 or len(b) == 1 for b in batches)
    assert [lengths[b].tolist() for b in batches][0] == [40, 40]
    assert [len(b) for b in _stat_batches(np.array([50, 50]), 1, budget=10)] == [1, 1]  # one input at the least

    enc = Ragged({"input_ids": np.arange(8)}, np.array([3, 5]))  # tokens 0-2, then 3-7
    right, right_valid = cells(SimpleNamespace(padding_side="right"), enc, np.array([1, 0]))
    left, left_valid = cells(SimpleNamespace(padding_side="left"), enc, np.array([1, 0]))
    assert right.tolist() == [[3, 4, 5, 6, 7], [0, 1, 2, 3, 4]]  # the shorter row's last two cells are padding
    assert right_valid.tolist() == [[True] * 5, [True] * 3 + [False] * 2]
    assert left.tolist() == [[3, 4, 5, 6, 7], [0, 0, 0, 1, 2]]  # its first two are
    assert left_valid.tolist() == [[True] * 5, [False] * 2 + [True] * 3]

    clf = offline_pair.models[0]
    exs = [EX, Example(("A warm, funny film.",)), Example(("Dull.",)),
           Example(("It is what it is, no more; no less!",))]
    want = attention_stats(clf, exs)
    monkeypatch.setitem(attention.ATT_CELLS, "cpu", 1)  # one input a batch: no padding at all
    alone = attention_stats(clf, exs)
    for key in ("entropy", "cls", "sep", "punct", "neighbour_js"):
        np.testing.assert_allclose(alone[key], want[key], atol=1e-6, err_msg=key)
