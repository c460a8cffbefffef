"""The built-in catalogue: the capabilities, saliency methods and counterfactual generators albert-lens offers,
each declared once (`declare/capabilities.py` is the vocabulary: `Capability`, `Option`, `Part`). The package
imports it first (`app/core/__init__.py`), so every reader of the registry, a worker process's too, finds it whole.

It sits above the techniques and names each one's function as an object (`Later(lambda: _explanation().run_saliency)`:
go-to-definition and renames follow it), imported when the capability first runs: reading the catalogue (the CLI's
`--help`) loads no technique and no PyTorch.
"""
from __future__ import annotations

from .declare import results
from .declare.capabilities import (
    COUNTERFACTUAL_GENERATORS,
    FACETS,
    LAYER_POOLINGS,
    OUTPUTS,
    POOLINGS,
    PROJECTIONS,
    SALIENCY_METHODS,
    SLICE_METRICS,
    Capability,
    Later,
    Option,
    Part,
    register,
)
from .ground.errors import InputError
from .ground.policy import check_length, integer, limits, tolerance, whole


# The technique modules, each imported when a capability first runs
def _tokens():
    from .techniques import tokens
    return tokens


def _saliency():
    from .techniques import saliency
    return saliency


def _explanation():
    from .techniques import explanation
    return explanation


def _counterfactuals():
    from .techniques import counterfactuals
    return counterfactuals


def _projection():
    from .techniques import projection
    return projection


def _locate():
    from .techniques import locate
    return locate


def _similarity():
    from .techniques import similarity
    return similarity


def _attention():
    from .techniques import attention
    return attention


def _attacks():
    from .techniques import attacks
    return attacks


def _checklist():
    from .techniques import checklist
    return checklist


def _slices():
    from .techniques import slices
    return slices


def _confusion():
    from .techniques import confusion
    return confusion


register(Capability(
    "tokens", "How each model's tokenizer reads the input: its tokens, the words it splits into pieces and the "
    "ones it reads as [UNK].", Later(lambda: _tokens().tokens_batch),
    lit_counterpart="each model's tokens in LIT's datapoint views (the models' Tokens outputs)",
    options=(Option("special", bool, False, "show the tokens the tokenizer adds ([CLS], [SEP]) too"),)))

TOLERANCE = Option("tolerance", float, 1e-3, "integrated gradients' convergence-delta tolerance (from this server's "
                   "smallest to 1)", validator=tolerance)
# Saliency methods: a method is its class (a `saliency.Method`) plus its line here, which declares the options it
# reads; `saliency.METHODS` and every front end's list are read from this dict (a plugin adds its class to it)
SALIENCY_METHODS.update({
    "gradient_norm": Part(Later(lambda: _saliency().GradientNorm)),
    "gradient_x_input": Part(Later(lambda: _saliency().GradientXInput)),
    "integrated_gradients": Part(Later(lambda: _saliency().IntegratedGradients), (TOLERANCE,)),
    "lime": Part(Later(lambda: _saliency().Lime)),
    "occlusion": Part(Later(lambda: _saliency().Occlusion)),
})

_REPLACEMENTS = Option("replacements", str, "cities -> townships", "old -> new pairs, comma-separated (the "
                       "generators that swap the words you give)")
# texts, checked as every text option is (`Option.check`: text, within this server's length)
_EDITED = (Option("edited", str, "", "your edit of the text, scored beside the original (the generator "
                  "your_edit)"),
           Option("edited2", str, "", "your edit of the second text of a pair (empty: unchanged)"))
# one input's generators: `fn(models, example, **the options it reads)` returning a `CounterfactualResult`
COUNTERFACTUAL_GENERATORS.update({
    "your_edit": Part(Later(lambda: _counterfactuals().your_edit), _EDITED),
    "word_replacement": Part(Later(lambda: _counterfactuals().replaced), (_REPLACEMENTS,)),
    "wordnet_synonym": Part(Later(lambda: _counterfactuals().synonym_swaps)),
    "wordnet_antonym": Part(Later(lambda: _counterfactuals().antonym_swaps)),
    "ablation_flip": Part(Later(lambda: _counterfactuals().ablation_search)),
    "hotflip": Part(Later(lambda: _counterfactuals().hotflip_search)),
    "dataset_flip_rate": Part(options=(_REPLACEMENTS,), edits="word_replacement"),
    "dataset_wordnet_synonym": Part(edits="wordnet_synonym"),
    "dataset_wordnet_antonym": Part(edits="wordnet_antonym"),
})
GENERATORS = tuple(COUNTERFACTUAL_GENERATORS)  # the built-in ones (a plugin's are in the dict, registered later)
DATASET_GENERATORS = {name: g.edits for name, g in COUNTERFACTUAL_GENERATORS.items() if g.edits}


def class_name_or_index(name: str, value) -> str | int:
    """A class to explain: its label's name (text, held to the server's length) or its index (a whole number, as
    scripts pass it; `inference.class_index` checks it against the model's classes)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        raise InputError(f"{name}: expected a label's name or a class index, got {type(value).__name__}")
    check_length(name, value, limits()["max_chars"])
    return value


def layer_number(name: str, value) -> int:
    """A layer, by its number: whole here; past the model's layers it is refused by the technique, which names the
    model's real range (a form's 2.5 was once refused as "not from -1000 to 1000", a range no model has)."""
    return whole(name, value, "-1 = the top layer; the models' range is said for a number past it")


def head_or_mean(name: str, value) -> int | None:
    """An attention head from 0, or none ("", "mean", nothing): the mean of the layer's heads."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "mean")):
        return None
    return integer(name, value, low=0, high=1000)


_TARGET = Option("target", str, "", "the class both models explain (empty or 'predicted': the first model's "
                 "prediction; 'own': each model its own prediction)", validator=class_name_or_index)
_OUTPUT = Option("output", str, "prob", "what is explained: the class's probability, or its logit, which a "
                 "confident prediction does not flatten", choices=OUTPUTS)

register(Capability(
    "saliency", "Per-word saliency of both models, aligned, with faithfulness and agreement.",
    runner=Later(lambda: _explanation().run_saliency),
    result=results.SaliencyResult, inputs="either", needs_gradients=True,
    lit_counterpart="LIT's salience interpreters (albert-lens's methods, one per method)",
    # `method`'s choices are the methods registered now; each method's own options (tolerance, ...) are merged in
    parts=SALIENCY_METHODS, chooses="method", options=(
        Option("method", str, "integrated_gradients", "the attribution method", choices=tuple(SALIENCY_METHODS)),
        _TARGET, _OUTPUT)))
register(Capability(
    "saliency_methods", "Every saliency method on one input, each map with its faithfulness: where the methods "
    "agree on a model's reasons, and which to trust.", runner=Later(lambda: _explanation().run_saliency_methods),
    result=results.SaliencyMethodsResult, needs_gradients=True, parts=SALIENCY_METHODS,
    lit_counterpart="LIT's salience interpreters, one per method", options=(_TARGET, _OUTPUT)))
register(Capability(
    "counterfactual", "Edit an input (or every example of a dataset) and compare both models before and after.",
    runner=Later(lambda: _counterfactuals().run_counterfactual),
    result=results.CounterfactualResult, inputs="either",
    needs_gradients=True, lit_counterpart="LIT's generators (albert-lens's, one per generator)",
    # `generator`'s choices are the generators registered now; each generator's own options are merged in
    parts=COUNTERFACTUAL_GENERATORS, chooses="generator", options=(
        Option("generator", str, "word_replacement", "the edit: your own (your_edit), word swaps you give, WordNet "
               "synonyms or antonyms, words removed until the label flips, a gradient-guided swap; dataset_*: over a "
               "dataset", choices=GENERATORS),),
    saves="keep every edited input as the saved set NAME (with its originals), which any --dataset then reads as "
          "saved:NAME"))
# a projection's options, as `project` and `locate` (which places an input in the same projection) both take them
_PROJECTED = (
    Option("projection", str, "umap", "the 2-D projection: UMAP or PCA", choices=PROJECTIONS),
    Option("layer", int, -1, "-1 = the top layer, 0 = the embeddings", low=-1000, high=1000, validator=layer_number),
    Option("pooling", str, "cls", "a sentence's vector: [CLS] or the tokens' mean", choices=POOLINGS))
register(Capability(
    "project", "UMAP or PCA of both models' sentence embeddings, aligned, with how far their neighbourhoods agree.",
    runner=Later(lambda: _projection().run_project), lit_counterpart="LIT's embedding projector (UMAP, PCA)",
    result=results.ProjectionResult, inputs="dataset",
    writes="a folder for projection.csv (every point), projection.png and projection.json", options=_PROJECTED))
register(Capability(
    "locate", "Where is my sentence: the input among a dataset's examples, for each model: its nearest examples in "
    "the model's embedding space, its place in the dataset's projection and its score among the dataset's.",
    runner=Later(lambda: _locate().run_locate), result=results.LocateResult, inputs="both",
    lit_counterpart="LIT's embedding projector and its nearest neighbours", options=(
        *_PROJECTED,
        Option("k", int, 5, "nearest examples listed per model", low=1, high=50))))
register(Capability(
    "similarity", "Linear CKA between every layer of the two models, in bounded memory.",
    runner=Later(lambda: _similarity().run_similarity),
    result=results.SimilarityResult, inputs="dataset", options=(
        Option("pooling", str, "cls", "a vector per sentence ([CLS] or the tokens' mean) or per word (its tokens' "
               "mean)", choices=LAYER_POOLINGS),
        Option("minibatch", int, 128, "rows per minibatch of the unbiased estimator", high=1024, clamp=True))))
register(Capability(
    "attention", "Both models' attention on one input, word to word, at one layer (over a dataset: per layer and "
    "head, entropy and the share on [CLS], [SEP] and punctuation).",
    runner=Later(lambda: _attention().run_attention),
    lit_counterpart="LIT's attention module (the models' attention)",
    result=results.AttentionResult, inputs="either", options=(
        Option("layer", int, -1, "1 .. the model's layers, -1 = the top", low=-1000, high=1000,
               validator=layer_number),
        Option("head", int, None, "one head (from 0); not given: the mean of the layer's heads", low=0, high=1000,
               optional=True, validator=head_or_mean))))
register(Capability(
    "attack", "Attack both models with one TextAttack recipe, and see whether each one's adversarial examples "
    "fool the other.", runner=Later(lambda: _attacks().run_attack),
    result=results.AttackResult, inputs="either",
    lit_counterpart="LIT's Hotflip and Ablation Flip generators (a TextAttack recipe takes minutes per example: the "
    "app's Attacks tab and `albert-lens attack` run it)",
    writes="a JSON-lines file of per-example results, appended as each finishes; an existing one is resumed", options=(
        Option("recipe", str, "deepwordbug", "the TextAttack recipe (deepwordbug, pruthi, input-reduction, pwws, "
               "leap, textfooler-offline, ...)"),
        Option("label", str, "", "the input's gold label, which the attack tries to move the models off"),
        Option("n", int, 5, "first N labelled examples of the dataset", cap="max_attack_examples"),
        Option("query_budget", int, 200, "model queries per example and model", cap="max_query_budget"),
        Option("time_limit", float, 30.0, "seconds per example and model", low=0, cap="max_attack_seconds"))))
register(Capability(
    "checklist", "A released CheckList suite on both models, test by test, with the paired difference.",
    runner=Later(lambda: _checklist().run_checklist),
    lit_counterpart="none: a CheckList suite brings its own inputs, not LIT's selection (the app's Behavioural tab "
    "and `albert-lens checklist` run it)",
    result=results.ChecklistResult, inputs="dataset", options=(
        Option("suite", str, "", "a CheckList suite export (*_suite.json.gz) or a released suite's name"),
        Option("over", str, "suite", "suite: the suite's own cases; dataset: CheckList's robustness perturbations "
               "(typos, contractions, punctuation, URLs and handles) of the dataset's rows, each failure with its row",
               choices=("suite", "dataset")),
        Option("sample", int, 20, "cases per test, the release's run_idxs first (at most this server's cap)",
               cap="max_checklist_sample"))))
register(Capability(
    "slices", "Slices of a labelled dataset (by length, negation, overlap, embedding cluster ...) where the two "
    "models differ, tested with a false-discovery rate over them all.", runner=Later(lambda: _slices().run_slices),
    result=results.SlicesResult, inputs="dataset", options=(
        Option("metric", str, "accuracy", "accuracy: McNemar's test on the examples one model gets right; "
               "agreement: Fisher's test of the slice's disagreements against the rest's", choices=SLICE_METRICS),
        Option("min_size", int, 20, "the smallest slice tested", low=5, high=10_000, clamp=True),
        Option("clusters", int, 8, "k-means clusters of each model's embeddings as candidates (0: none)", low=0,
               high=20))))
register(Capability(
    "confusion", "Both models' confusion matrices on a labelled dataset, side by side, split by length, a marker "
    "(negation, contrast, ...) or whether the models agree, each part with the paired test of the two accuracies.",
    runner=Later(lambda: _confusion().run_confusion), result=results.ConfusionResult, inputs="dataset",
    lit_counterpart="LIT's Confusion Matrix (one model at a time, faceted by a feature)", options=(
        Option("facet", str, "none", "what the examples are split by: nothing, length (the quartiles of word "
               "counts), a marker group present or not, or whether the two models agree", choices=FACETS),)))
register(Capability(
    "curves", "Both models' ROC and precision-recall curves for one class on a labelled dataset, on one plot, with "
    "each area's interval and the paired test of the two (DeLong's for the ROC AUC).",
    runner=Later(lambda: _confusion().run_curves), result=results.CurvesResult, inputs="dataset",
    lit_counterpart="LIT's PR and ROC curves (one model at a time, no interval)", options=(
        Option("positive", str, "", "the class the curves are for, against the rest (not given: a two-class "
               "task's second label, else the first)"),)))
