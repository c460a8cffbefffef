"""Faithfulness and agreement of saliency maps: rank agreement against scipy on the words both models read,
comprehensiveness of a real ranking against a random one, the most supporting words."""
import numpy as np
import pytest

from app.core.ground.data import Example, load_dataset
from app.core.techniques.faithfulness import agreement, faithfulness
from app.core.techniques.saliency import IntegratedGradients, WordSaliency

from .conftest import shared

EX = Example(("a gorgeous , witty , seductive movie .",))


def test_agreement_is_rank_correlation():
    def ws(scores):
        return WordSaliency("m", "x", list("abcd"), [0] * 4, scores, 0, None, None)

    assert agreement(ws([1, 2, 3, 4]), ws([10, 20, 30, 40])) == pytest.approx(1.0)
    assert agreement(ws([1, 2, 3, 4]), ws([4, 3, 2, 1])) == pytest.approx(-1.0)
    assert agreement(ws([1, 1, 1, 1]), ws([1, 2, 3, 4])) is None


def test_agreement_ranks_only_the_words_both_models_read():
    """Words past a cut score 0 in both maps; counted, a long input's thousands of shared zeros would read as
    agreement (here: -1 on the words read, +0.6 over all 40)."""
    from scipy.stats import spearmanr

    from app.core.ground.alignment import Alignment, split_words

    words = split_words(" ".join(f"w{i}" for i in range(40)))

    def ws(scores, read):
        al = Alignment(words, [], [[i] if i < read else [] for i in range(40)], cut=list(range(read, 40)))
        return WordSaliency("m", "x", [w.text for w in words], [0] * 40, scores + [0.0] * (40 - len(scores)),
                            0, None, None, alignment=al)

    a, b = ws([1.0, 2, 3, 4, 5, 6], 6), ws([6.0, 5, 4, 3, 2, 1, 0.5, 0.25], 8)
    assert agreement(a, b) == pytest.approx(-1.0)
    assert spearmanr(a.scores, b.scores)[0] > 0.5  # what counting every word gave


def test_ig_ranking_is_more_comprehensive_than_random_on_the_offline_pair(offline_pair):
    dev = load_dataset(shared("glue", "sst2", "dev.tsv")).examples
    sents = [e for e in dev if 8 <= len(e.text.split()) <= 20][:12]
    rng = np.random.default_rng(0)
    for clf in offline_pair.models:
        ig, rnd = [], []
        for ex in sents:
            sal = IntegratedGradients(clf).attribute(ex)
            ig.append(faithfulness(clf, ex, sal)["comprehensiveness"])
            shuffled = WordSaliency(**{**sal.__dict__, "scores": list(rng.permutation(sal.scores))})
            rnd.append(faithfulness(clf, ex, shuffled)["comprehensiveness"])
        assert np.mean(ig) > np.mean(rnd) + 0.05, (clf.name, np.mean(ig), np.mean(rnd))


def test_top_words_are_the_most_supporting_words_read():
    from app.core.ground.alignment import Alignment, split_words
    from app.core.techniques.faithfulness import top_words

    words = split_words("one two three four five", 0)
    al = Alignment(words, [], [[0], [1], [2], [3], []], cut=[4])
    sal = WordSaliency("m", "x", [w.text for w in words], [0] * 5, [0.1, -0.5, 0.3, 0.2, 9.0], 0, None, None,
                       alignment=al)
    assert top_words(sal) == ["three", "four", "one"]  # "five" was not read; "two" speaks against the class
    assert top_words(WordSaliency(**{**sal.__dict__, "scores": [-1.0] * 5})) == []
    from app.core.techniques.faithfulness import shuffled

    dealt = [shuffled(sal, np.random.default_rng(s)).scores for s in range(20)]
    assert all(d[4] == 9.0 and sorted(d[:4]) == sorted(sal.scores[:4]) for d in dealt)  # the unread word keeps its
    assert len({tuple(d) for d in dealt}) > 5
