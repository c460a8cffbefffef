import pytest

from app.core.execution.inference import predict
from app.core.ground.data import Example, load_dataset
from app.core.ground.errors import InputError
from app.core.techniques.counterfactuals import (
    ablation_flip,
    flip_rate,
    hotflip,
    parse_pairs,
    replace_words,
    word_replacement,
    wordnet_alternatives,
    wordnet_swaps,
)

from .conftest import shared


def test_parse_pairs_and_errors():
    assert parse_pairs("cities -> townships, good=>bad; film: movie") == {
        "cities": "townships", "good": "bad", "film": "movie"}
    with pytest.raises(InputError, match="can't read 'nonsense'"):
        parse_pairs("nonsense")
    with pytest.raises(InputError, match="replacements: empty"):
        parse_pairs("  ")


def test_replace_words_whole_word_and_case():
    ex = Example(("Cities grow; the CITIES and citiesque cities.",))
    new, edits = replace_words(ex, {"cities": "townships"})
    assert new.text == "Townships grow; the TOWNSHIPS and citiesque townships."
    assert len(edits) == 3


def test_word_replacement_deltas(tiny_pair):
    ch = word_replacement(tiny_pair.models, Example(("the cities were lovely",)), {"cities": "townships"})
    assert ch.edited == ("the townships were lovely",)
    for b, a, d in zip(ch.before, ch.after, ch.deltas):
        for k in d:
            assert d[k] == pytest.approx(a["probabilities"][k] - b["probabilities"][k])


def test_wordnet_antonyms_and_swaps(tiny_pair):
    assert "bad" in wordnet_alternatives("good", "antonym")
    changes = wordnet_swaps(tiny_pair.models, Example(("a good and happy film",)), "antonym")
    assert any(c.edited == ("a bad and happy film",) for c in changes)
    assert all(len(c.before) == 2 for c in changes)


def test_wordnet_swaps_reach_both_fields_of_a_pair():
    """A long premise's swaps alone used up the limit: the hypothesis, what an NLI probe most needs to vary,
    got none. The fields take turns; one field keeps its text order."""
    from app.core.techniques.counterfactuals import wordnet_candidates

    premise = " ".join(["the happy children played in the large green garden near the old house"] * 5)
    found = wordnet_candidates(Example((premise, "the children were happy")), "synonym", limit=20)
    assert len(found) == 20
    swapped_hypothesis = [ex for ex, _ in found if ex.texts[0] == premise]
    # all the hypothesis has ("children" is inflected, "were" a function word), in turns with the premise
    assert [ex.texts[1] for ex in swapped_hypothesis] == ["the children were felicitous", "the children were glad"]
    assert found[0][0].texts[1] == "the children were happy" and found[1][0].texts[0] == premise
    single = wordnet_candidates(Example((premise,)), "synonym", limit=6)
    assert [w for _, ((w, _),) in single] == ["happy", "happy", "large", "large", "large", "green"]


def test_wordnet_swaps_leave_function_words_and_inflected_words_and_match_the_part_of_speech():
    """SST-2 dev swaps that tested grammar, not meaning: "will" -> "disinherit" (a modal read as the verb),
    "had" -> "lack", "takes" -> "give" (a base form for an inflected word), "plain" -> "cheer" (the verb's
    antonym for an adjective)."""
    from app.core.techniques.counterfactuals import wordnet_candidates

    swaps = lambda text: [e for _, ((e),) in wordnet_candidates(Example((text,)), "antonym", limit=20)]
    assert swaps("the emotions are raw and will strike a nerve with anyone who 's ever had family trauma .") == \
        [("raw", "cooked"), ("strike", "miss")]
    assert swaps("pumpkin takes an admirable look at the hypocrisy of political correctness") == \
        [("political", "nonpolitical"), ("correctness", "incorrectness"), ("correctness", "wrongness")]
    assert all(new not in ("cheer", "complain") for _, new in swaps("... the movie is just a plain old monster ."))


def test_ablation_flip_really_flips(offline_pair):
    for clf in offline_pair.models:
        ex = Example(("not a bad film at all , quite enjoyable .",))
        res = ablation_flip(clf, ex)
        assert res["removed"], res
        assert predict(clf, [Example(res["edited"])], validate=False).predicted[0] == res["after"] != res["before"]
        assert res["size"] == len(res["removed"])
    sure = ablation_flip(offline_pair.models[0], Example(("a gorgeous , witty , seductive movie .",)), max_size=1)
    assert sure["removed"] is None and "no set of up to 1" in sure["note"]


def test_hotflip_prediction_is_verified(offline_pair):
    for clf in offline_pair.models:
        res = hotflip(clf, Example(("the acting is wonderful and moving .",)))
        assert res["edited"] is not None
        assert predict(clf, [Example(res["edited"])]).predicted[0] == res["after"]
        assert res["target_prob_after"] < res["target_prob_before"]


def test_hotflip_swaps_in_word_starting_pieces_of_any_tokenizer(tiny_dirs, family_dirs):
    """WordPiece: entries without "##"; SentencePiece: "▁film" as "film"; byte-level BPE (RoBERTa): "Ġfilm" as
    "film", never a continuation piece such as "ous" nor the marker itself in the edited text."""
    from app.core.models.loading import load
    from app.core.models.registry import TASKS, ModelSpec
    from app.core.techniques.counterfactuals import _whole_word_vocab

    for path, marker in ((tiny_dirs["bert"], ""), (tiny_dirs["albert"], "▁"), (family_dirs["roberta"], "Ġ")):
        clf = load(ModelSpec("M", str(path), "model", TASKS["sst2"]))
        vocab = clf.tokenizer.get_vocab()
        ids, words = _whole_word_vocab(clf)
        inverse = {i: p for p, i in vocab.items()}
        assert len(words) > 50 and all(w.isalpha() for w in words)
        assert all(inverse[int(i)] == marker + w for i, w in zip(ids, words))
        res = hotflip(clf, Example(("the acting is wonderful and moving .",)))
        assert res["edited"] is not None and "Ġ" not in res["edited"][0] and "▁" not in res["edited"][0]


def test_flip_rate_over_a_dataset(offline_pair):
    dev = load_dataset(shared("glue", "sst2", "dev.tsv")).examples[:300]
    seen = []
    res = flip_rate(offline_pair.models, dev, {"good": "bad", "great": "terrible"},
                    progress=lambda d, n: seen.append((d, n)))
    # progress runs through editing and scoring to the end, never back (the stages: the test below)
    assert seen[-1][0] == seen[-1][1] and [d / n for d, n in seen] == sorted(d / n for d, n in seen)
    assert res["changed"] == sum(1 for e in dev if any(w in e.text.split() for w in ("good", "great")))
    assert res["changed"] > 10
    for k, rate in enumerate(res["flip_rate"]):
        assert rate == pytest.approx(sum(e["flipped"][k] for e in res["examples"]) / res["changed"])
        assert all(e["flipped"][k] and not e["flipped"][1 - k] for e in res["only"][k])
    # one edit per example: the paired test is McNemar's on the edits that flip one model only
    from app.core.ground.significance import mcnemar_exact

    cmp = res["comparison"]
    assert cmp["test"] == "McNemar, exact" and cmp["only"] == [len(o) for o in res["only"]]
    assert cmp["values"] == pytest.approx(res["flip_rate"]) and cmp["both"] == res["both"]
    assert cmp["p_value"] == pytest.approx(mcnemar_exact(*cmp["only"]))


def test_flip_rate_with_nothing_to_replace_is_undefined_and_the_api_says_why(tiny_pair):
    from app.core import api

    exs = [Example(("a fine film",)), Example(("dull and long",))]
    res = flip_rate(tiny_pair.models, exs, {"cities": "townships"})
    assert res["changed"] == 0 and res["flip_rate"] == [None, None]
    with pytest.raises(InputError, match=r"replacements: none of \['cities'\] occurs in the \d+ examples of "
                                         r"sentiment_plain"):
        api.counterfactual(tiny_pair, "", None, generator="dataset_flip_rate", replacements="cities -> townships",
                           dataset="sentiment_plain")


def test_replacements_apply_at_once_so_pairs_can_swap():
    """'film -> movie, movie -> film' swaps the words; applied one after the other it undid its own edits."""
    ex = Example(("A film, not a movie: Movie night at the FILM club.",))
    new, edits = replace_words(ex, parse_pairs("film -> movie, movie -> film"))
    assert new.text == "A movie, not a film: Film night at the MOVIE club."
    assert edits == [("film", "movie"), ("movie", "film"), ("Movie", "Film"), ("FILM", "MOVIE")]
    new, _ = replace_words(Example(("New York and York",)), {"york": "Leeds", "new york": "Boston"})
    assert new.text == "Boston and Leeds"  # the longer key wins where both match


@pytest.mark.parametrize("kind", ["wordnet_antonym", "wordnet_synonym"])
def test_flip_rate_of_wordnet_swaps_over_a_dataset(offline_pair, kind):
    """Over a dataset, every example gets its WordNet swaps (up to per_example); the rates count edits, and each
    edit is the one the single-input generator makes for that example."""
    from app.core.techniques.counterfactuals import wordnet_swaps

    dev = load_dataset(shared("glue", "sst2", "dev.tsv")).examples[:12]
    res = flip_rate(offline_pair.models, dev, edits=kind, per_example=4)
    assert res["edits"] == kind and 12 >= res["examples_changed"] > 5 and res["changed"] > res["examples_changed"]
    # synonym swaps count only where they keep the meaning (`meaning.validity`, every edit says), antonyms all
    counted = [e for e in res["examples"] if e["validity"] is None or e["validity"]["valid"]]
    if kind == "wordnet_synonym":
        assert all(e["validity"] is not None for e in res["examples"]) and res["valid_edits"] == len(counted)
        assert 0 < len(counted) < res["changed"]  # some swaps are dropped, some kept
        for k, rate in enumerate(res["flip_rate_all_edits"]):
            assert rate == pytest.approx(sum(e["flipped"][k] for e in res["examples"]) / res["changed"])
    else:
        assert len(counted) == res["changed"] and "valid_edits" not in res
    for k, rate in enumerate(res["flip_rate"]):
        assert rate == pytest.approx(sum(e["flipped"][k] for e in counted) / len(counted))
    assert all(e in counted for k in range(2) for e in res["only"][k])
    # several swaps of one sentence are not independent: the test resamples sentences, not edits
    cmp = res["comparison"]
    sources = {tuple(e["original"]) for e in counted}
    assert cmp["test"] == f"bootstrap over {len(sources)} examples" and cmp["n"] == len(counted)
    assert cmp["values"] == pytest.approx(res["flip_rate"]) and 0 <= cmp["p_value"] <= 1
    first = dev[0]
    single = wordnet_swaps(offline_pair.models, first, kind.split("_")[1], limit=4)
    mine = [e for e in res["examples"] if e["original"] == first.texts]
    assert [(c.edited, c.flipped) for c in single] == [(e["edited"], e["flipped"]) for e in mine]


def test_dataset_generators_through_the_api(tiny_pair, monkeypatch):
    from app.core import api

    res = api.counterfactual(tiny_pair, "", None, generator="dataset_wordnet_synonym", replacements="",
                             dataset="sentiment_plain", limit=10)
    assert res["generator"] == "dataset_wordnet_synonym" and res["edits"] == "wordnet_synonym" and res["changed"]
    per_example = lambda r: max(sum(e["original"] == o["original"] for e in r["examples"]) for o in r["examples"])
    assert per_example(res) > 3
    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")  # hosted: fewer swaps per example bound a request's cost
    hosted = api.counterfactual(tiny_pair, "", None, generator="dataset_wordnet_synonym", replacements="",
                                dataset="sentiment_plain", limit=10)
    assert per_example(hosted) == 3
    with pytest.raises(InputError, match=r"edits: 'shuffle' is not one of"):
        flip_rate(tiny_pair.models, [Example(("a fine film",))], edits="shuffle")
    # every dataset generator the app offers is an edit kind flip_rate knows, and every kind is offered
    from app.core.techniques.counterfactuals import DATASET_EDITS

    assert sorted(api.DATASET_GENERATORS.values()) == sorted(DATASET_EDITS)


def test_wordnet_swaps_without_a_tagger_offer_every_part_of_speech(monkeypatch):
    """Where NLTK's tagger is not installed (a Space without the shared data), swaps are not matched by part
    of speech, but function words and inflected words are still left alone."""
    import nltk

    from app.core.techniques.counterfactuals import wordnet_candidates

    def missing(*a, **k):
        raise LookupError("averaged_perceptron_tagger_eng not found")

    monkeypatch.setattr(nltk, "pos_tag", missing)
    swaps = [e for _, (e,) in wordnet_candidates(Example(("he will strike and takes a good look",)), "antonym",
                                                 limit=20)]
    assert ("strike", "miss") in swaps and ("good", "bad") in swaps
    assert not {w for w, _ in swaps} & {"will", "takes", "and", "he"}


def test_an_input_without_wordnet_swaps_says_so(tiny_pair):
    from app.core import api

    with pytest.raises(InputError, match="text: WordNet offers no antonym for its words"):
        api.counterfactual(tiny_pair, "the cities were lovely", None, generator="wordnet_antonym")
    res = api.counterfactual(tiny_pair, "a good film", None, generator="wordnet_antonym")
    assert [c["edits"] for c in res["changes"]] == [[("good", "bad")], [("good", "evil")]]


@pytest.mark.parametrize("edits", ["wordnet_synonym", "word_replacement"])
def test_a_datasets_flip_rate_reports_its_progress_through_every_stage_and_never_back(tiny_pair, edits):
    """The app's bar sat at 10% for the 107 s of WordNet swaps over a dataset: now editing, scoring and (for
    synonyms) the meaning checks each move it, from 0 to the end, never back."""
    from app.core.techniques import counterfactuals as cf

    exs = [Example((t,)) for t in ("the cities were beautiful", "a fine and happy film", "the hotel was dreadful",
                                   "an awful , boring movie")]
    seen, stages = [], []
    real = cf.phased

    def spy(progress, shares):
        stage = real(progress, shares)
        return lambda i, d, n: stages.append(i) or stage(i, d, n)

    import unittest.mock as mock

    with mock.patch.object(cf, "phased", spy):
        res = flip_rate(tiny_pair.models, exs, {"cities": "towns", "film": "movie"}, lambda d, n: seen.append((d, n)),
                        edits=edits)
    assert res["changed"] > 0
    assert sorted(set(stages)) == ([0, 1, 2] if edits == "wordnet_synonym" else [0, 1])
    fractions = [d / n for d, n in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and fractions[0] < 0.35
    assert any(0 < f < 0.35 for f in fractions)  # the editing moved it before any prediction
    assert cf.phased(None, (1.0,))(0, 1, 2) is None  # no callback: nothing to report


def test_a_datasets_swaps_predict_each_distinct_input_once_and_answer_as_one_by_one(tiny_pair, monkeypatch):
    """The originals repeat once per swap of them: each distinct input is predicted once per model, and every
    swap's before and after are what predicting it alone gives."""
    from app.core.techniques import counterfactuals as cf

    exs = [Example((t,)) for t in ("a fine film and a fine cast", "the film was a fine one", "no film here",
                                   "a fine film and a fine cast")]  # a dataset's repeated row, as a swap's original
    sizes = []
    real = cf.predict
    monkeypatch.setattr(cf, "predict", lambda clf, batch, **kw: sizes.append(len(batch)) or real(clf, batch, **kw))
    res = flip_rate(tiny_pair.models, exs, {"film": "movie", "fine": "good"})
    originals = {tuple(c["original"]) for c in res["examples"]}
    edits = {tuple(c["edited"]) for c in res["examples"]}
    assert res["changed"] == 4 and sizes == [len(originals | edits)] * 2 == [6, 6]  # not 8: 2 x 4 swaps
    for c in res["examples"]:
        for k, clf in enumerate(tiny_pair.models):
            alone = real(clf, [Example(tuple(c["edited"]))]).record(0)["probabilities"]
            assert c["after"][k]["probabilities"] == pytest.approx(alone, abs=1e-5)


def test_word_swaps_that_do_not_occur_say_what_to_do_instead(tiny_pair):
    """The app's default swaps (film -> movie, ...) errored on any typed sentence without those words, saying only
    that: the message now names the input's own first content word as a pair to write, and the generator that
    needs none."""
    from app.core import api
    from app.core.ground.errors import InputError

    with pytest.raises(InputError, match=r"replacements: none of \['film', 'food'\] occurs in the input; write old "
                                         r"-> new pairs for its own words \('plot -> \.\.\.'\), or choose WordNet "
                                         r"synonym swaps, which need none"):
        api.counterfactual(tiny_pair, "the plot was thin", generator="word_replacement",
                           replacements="film -> movie, food -> meal")


def test_an_edit_that_grows_a_text_past_the_cap_is_refused_before_the_models_run(tiny_pair, monkeypatch):
    """'a -> x' * 1,990 on a long text sent a ~2-million-character text to both models (22 s, a 5.9 MB answer);
    an edited text is held to the cap a typed one is (hosted: 2,000), and the refusal says how long it would be."""
    from app.core import api
    from app.core.ground import policy
    from app.core.techniques import counterfactuals

    monkeypatch.setenv("ALBERT_LENS_HOSTED", "1")
    cap = policy.limits()["max_chars"]
    text = ("a " * (cap // 2))[: cap - 1]
    n = text.count("a")
    ran = []
    real = counterfactuals.compare
    monkeypatch.setattr(counterfactuals, "compare", lambda *a, **k: ran.append(1) or real(*a, **k))
    with pytest.raises(InputError) as err:
        api.counterfactual(tiny_pair, text, generator="word_replacement", replacements="a -> " + "x" * 1990)
    grown = len(text) + n * 1989
    assert str(err.value) == (f"replacements: the edited text would be {grown:,} characters long; the limit here is "
                              f"{cap:,} (give shorter replacements)")
    assert not ran  # refused before either model saw the text
    ok = api.counterfactual(tiny_pair, "a fine film", generator="word_replacement", replacements="fine -> dull")
    assert ran and [tuple(e) for e in ok.to_dict()["changes"][0]["edits"]] == [("fine", "dull")]
