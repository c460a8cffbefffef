"""Per-word saliency, one class per method with a uniform `attribute(example, target)` (as in Captum).

Scores are per *word* (see `alignment`), so BERT's and ALBERT's maps line up although their tokenizers differ.
Gradient methods use the core's gradients; LIME uses Captum. Integrated gradients follows Captum's
LayerIntegratedGradients path but chooses its own nodes (see `IntegratedGradients`), running a round as one batch.
"""
from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from ..declare import capabilities
from ..declare.capabilities import SALIENCY_METHODS
from ..execution import graphs
from ..execution.inference import class_index, encode_one, host, predict, windowed
from ..ground import device as devices
from ..ground import quadrature
from ..ground.alignment import Alignment, edit_texts
from ..ground.data import Example
from ..ground.errors import InputError
from ..models.loading import Classifier
from .gradients import (
    class_score,
    embedding_states,
    embeds_forward,
    forward_from_layer,
    fp32_only,
    id_positions,
    input_gradients,
    layer_outputs,
    repeat_rows,
)


@dataclass
class WordSaliency:
    model: str
    method: str
    words: list[str]
    fields: list[int]
    scores: list[float]  # one per word; positive supports the target class
    target: int
    target_label: str | None
    probability: float | None  # model's probability of the target on the input
    tokens: list[str] = field(default_factory=list)
    token_scores: list[float] = field(default_factory=list)
    note: str = ""  # truncation, convergence, ...
    delta: float | None = None  # integrated gradients: completeness error
    n_steps: int | None = None
    seconds: float = 0.0
    output: str = "prob"  # what the scores explain: the target's probability, or its logit (see OUTPUTS)
    unread: list[int] = field(default_factory=list)  # words past the model's max length: never read, no score
    spans: list[list[int]] = field(default_factory=list)  # per word: its [start, end) in its field's text
    alignment: Alignment | None = field(default=None, repr=False)
    # the model's logits on the explained input, from the method's own forward pass: faithfulness and a restated
    # class (`explanation.on_class`) read the input's output here instead of running the model on it again
    logits: np.ndarray | None = field(default=None, repr=False)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("alignment")
        d.pop("logits")
        return d

    def input_output(self) -> float | None:
        """The explained class's probability on the input (a regression model's score), from `logits`; None
        when the map carries none."""
        if self.logits is None:
            return None
        if self.target_label is None:  # regression
            return float(self.logits[0])
        return float(softmax(self.logits)[self.target])


def softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


# The explained output. A probability saturates: on a confident prediction its gradient all but vanishes, and
# gradient x input then ranks noise; the logit keeps the evidence. Faithfulness is measured on the probability
# whatever is explained (ERASER's definition).
OUTPUTS = capabilities.OUTPUTS


def check_output(output: str) -> str:
    if output not in OUTPUTS:
        raise InputError(f"output: {output!r} is not one of {OUTPUTS} (the target's probability or its logit)")
    return output


def _target_values(clf: Classifier, pred, target: int, output: str = "prob") -> np.ndarray:
    """Per example, the explained output: the target's probability or logit, or a regression model's score."""
    if clf.is_regression:
        return pred.scores
    return pred.logits[:, target] if output == "logit" else pred.probs[:, target]


def target_outputs(clf: Classifier, examples: list[Example], target: int, output: str = "prob") -> np.ndarray:
    return _target_values(clf, predict(clf, examples, validate=False, batch_size=64), target, output)


class Method:
    """A saliency method: `attribute(example, target)` gives each word's score. A method is declared by its class
    (what it is called and shown as, whether its scores have a sign, LIT's own implementation of the same name,
    the options it reads and what it takes from this server's caps); a built-in also by its line in
    `capabilities.SALIENCY_METHODS`, a plugin's by `register` (docs/plugins.md). Every front end reads these."""

    name = "method"
    label = "method"  # its name for people: the app's menus, the CLI's text, the report
    signed = True  # scores say for (+) or against (-) the class; False: how sensitive, whatever the direction
    # LIT's own implementation of the same idea, which LIT still lists under "<this> (LIT's)" beside ours; None:
    # LIT has none (`lit_models.server`)
    lit_name: str | None = None
    # the options it reads besides `output` (`capabilities.Option`s): the saliency capabilities take them from
    # here, and every front end offers them (a built-in's come from its line in `capabilities.SALIENCY_METHODS`)
    options: tuple = ()

    @classmethod
    def settings(cls, request: dict, caps: dict) -> dict:
        """The keywords the method is built with for a checked request (`request`: the capability's options,
        checked) on this server (`caps`: `policy.limits()`): `output` and the options it declares."""
        return {"output": request["output"], **{o.name: request[o.name] for o in cls.options}}

    def __init__(self, clf: Classifier, output: str = "prob"):
        self.clf = clf
        self.output = check_output(output)

    def attribute(self, example: Example, target: int | str | None = None) -> WordSaliency:
        t0 = time.perf_counter()
        enc, al = encode_one(self.clf, example)
        example = windowed(self.clf, example, al)  # perturbing methods edit copies of a long input
        logits, ctx = self._prepare(example, enc)
        probs = None if self.clf.is_regression else softmax(logits)
        tgt = class_index(self.clf, target, probs)
        res = self._attribute(example, enc, al, tgt, ctx)
        res.seconds = time.perf_counter() - t0
        res.logits = np.asarray(logits, dtype=np.float32)
        res.probability = None if probs is None else float(probs[tgt])
        res.note = "; ".join(filter(None, [al.cut_message(self.clf.max_length), res.note]))
        return res

    def _result(self, al: Alignment, tgt: int, scores, **kw) -> WordSaliency:
        return WordSaliency(
            model=self.clf.name, method=self.name, words=[w.text for w in al.words], fields=[w.field for w in al.words],
            scores=[float(s) for s in scores], target=tgt, spans=[[w.start, w.end] for w in al.words],
            target_label=None if self.clf.is_regression else self.clf.labels[tgt], probability=None,
            unread=list(al.cut), alignment=al, output=self.output, **kw)

    def _prepare(self, example: Example, enc) -> tuple[np.ndarray, object]:
        """(the model's logits on the input, anything the method can reuse from computing them): the one forward
        pass over the explained input, which picks the target and which faithfulness reads again."""
        pred = predict(self.clf, [example])
        return pred.logits[0], pred

    def _attribute(self, example, enc, al, tgt, ctx=None) -> WordSaliency:  # pragma: no cover - abstract
        raise NotImplementedError


class _GradientMethod(Method):
    def _prepare(self, example, enc):
        """The gradient's own forward pass (its graph kept) gives the logits that pick the target."""
        embeds, logits = embeds_forward(self.clf, enc)
        return logits.detach()[0].float().cpu().numpy(), (embeds, logits)

    def gradients(self, example, enc, al, tgt, ctx):
        return input_gradients(self.clf, example, tgt, score=self.output, encoded=(enc, al), forward=ctx)


class GradientNorm(_GradientMethod):
    """L2 norm of the gradient per token, summed per word and normalised to 1 (unsigned: how sensitive)."""

    name = "gradient_norm"
    label = "gradient norm"
    signed = False
    lit_name = "Grad L2 Norm"

    def _attribute(self, example, enc, al, tgt, ctx=None):
        g = self.gradients(example, enc, al, tgt, ctx)
        tok = np.linalg.norm(g.gradients, axis=1)
        tok[[i for i, w in enumerate(al.token_word) if w is None]] = 0
        total = tok.sum() or 1.0
        return self._result(
            al, tgt, np.asarray(al.pool(tok / total)), tokens=g.tokens, token_scores=(tok / total).tolist()
        )


class GradientXInput(_GradientMethod):
    """Gradient dot input embedding per token, summed per word (signed)."""

    name = "gradient_x_input"
    label = "gradient × input"
    lit_name = "Grad ⋅ Input"

    def _attribute(self, example, enc, al, tgt, ctx=None):
        g = self.gradients(example, enc, al, tgt, ctx)
        tok = (g.gradients * g.embeddings).sum(1)
        tok[[i for i, w in enumerate(al.token_word) if w is None]] = 0
        return self._result(al, tgt, al.pool(tok), tokens=g.tokens, token_scores=tok.tolist())


class IntegratedGradients(Method):
    """Integrated gradients over the embedding layer's output from a [PAD] baseline ([CLS]/[SEP] kept), the
    path of Captum's BERT tutorial (LayerIntegratedGradients), with the number and placement of steps chosen
    adaptively. A first round of `start_steps` nodes (by default sized for the tolerance, `first_round`; `rule`:
    Hale-Trefethen's transplanted Gauss-Legendre by default, or plain Gauss-Legendre as in Captum); while the
    convergence delta (sum of attributions minus F(x) - F(baseline)) exceeds `tolerance`, a round 1.5x larger:
    sinh-mapped around the peak when the integrand has a narrow one (a probability jump), else the same even
    rule. The round with the smallest delta is returned; `n_steps` counts every model evaluation spent.
    Attributions are summed in float64 so that the delta shows the quadrature's error rather than float32
    rounding. With plain Gauss-Legendre nodes it equals Captum's LayerIntegratedGradients
    (tests/test_saliency.py)."""

    name = "integrated_gradients"
    label = "integrated gradients"
    lit_name = "Integrated Gradients"
    ROW_TOKENS = 8192  # rows x tokens per forward/backward chunk: bounds memory on long inputs
    RULES = ("transplanted", "gauss_legendre")

    @classmethod
    def settings(cls, request: dict, caps: dict) -> dict:
        return {**super().settings(request, caps), "max_steps": caps["max_ig_steps"]}

    def __init__(self, clf: Classifier, tolerance: float = 1e-3, start_steps: int | None = None,
                 max_steps: int = 256, rule: str = "transplanted", output: str = "prob"):
        super().__init__(clf, output)
        if start_steps is None:
            start_steps = min(self.first_round(tolerance), max_steps)
        if start_steps < 1 or max_steps < start_steps:
            raise InputError(f"steps: need 1 <= start_steps ({start_steps}) <= max_steps ({max_steps})")
        if rule not in self.RULES:
            raise InputError(f"rule: {rule!r} is not one of {self.RULES}")
        self.tolerance, self.start_steps, self.max_steps, self.rule = tolerance, start_steps, max_steps, rule

    @staticmethod
    def first_round(tolerance: float) -> int:
        """Nodes of the first round for a tolerance: 16 down to 1e-3, 8 more per decade below, at most 40. A round
        that misses is thrown away, so a first round that fits the tolerance saves evaluations: on the speed
        benchmark's 20 sentences (both models, mean evaluations per sentence) 62 against 67 with 16 first nodes
        at 1e-4, 83 against 103 at 1e-5, 119 against 163 at 1e-6."""
        if not tolerance > 0:
            return 40
        decades = max(0.0, -3.0 - math.log10(tolerance))
        return int(min(40, round(16 + 8 * decades)))

    def baseline_ids(self, enc) -> torch.Tensor:
        """The tutorial's baseline: every token of the text becomes [PAD], the ones the tokenizer added ([CLS],
        [SEP]) stay. Text tokens that are special ids ([UNK] for an emoji, a typed "[MASK]") become [PAD] too."""
        added = torch.tensor([s is None for s in enc.sequence_ids(0)], dtype=torch.bool, device=enc["input_ids"].device)
        base = enc["input_ids"].clone()
        base[0, ~added] = self.clf.tokenizer.pad_token_id or 0
        return base

    def _even_rule(self, n: int):
        return quadrature.transplanted(n) if self.rule == "transplanted" else quadrature.gauss_legendre(n)

    def path_integral(self, enc, tgt: int, alphas: np.ndarray, weights: np.ndarray, x, b):
        """Attributions (tokens, E, float64) and the integrand d/dalpha F at each node, for one quadrature rule."""
        ids, mask, tt = enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids")
        fp32_only(self.clf)
        rows = max(1, self.ROW_TOKENS // ids.shape[1])
        a_all = torch.tensor(alphas, dtype=torch.float32, device=x.device)  # the nodes, moved once per round
        w_all = devices.wide_tensor(weights, x.device)  # float64 (on MPS, which has none, on the CPU)
        replayed = graphs.path_round(self.clf, x, b, mask, a_all, w_all,  # on a GPU: the round in one launch
                                     lambda logits: class_score(self.clf, logits, tgt, self.output), (tgt, self.output))
        diff = x - b
        if replayed is not None:
            total, slope_t = replayed
            return (total * devices.wide(diff[0])).detach().cpu(), host(slope_t)
        total = None
        slope = []
        for i in range(0, len(alphas), rows):
            a, w = a_all[i : i + rows], w_all[i : i + rows]
            states = (b + a[:, None, None] * diff).requires_grad_(True)
            with torch.enable_grad():
                score = class_score(self.clf, forward_from_layer(self.clf, states, ids, mask, tt), tgt, self.output)
                (grad,) = torch.autograd.grad(score.sum(), states)
            part = (w[:, None, None] * devices.wide(grad)).sum(0)
            total = part if total is None else total + part
            slope.append((grad * diff).sum((1, 2)))
        return (total * devices.wide(diff[0])).detach().cpu(), host(torch.cat(slope))

    def _prepare(self, example, enc):
        """One forward pass over the input and the baseline gives the endpoints F(x), F(baseline) and the
        prediction that picks the target, so `attribute` needs no separate predict. On a GPU its logits come
        from the model's replayed graph (`graphs.logits`) and the embedding layer's output from that layer
        alone: eagerly, this forward's launches took over half of a call (benchmarks/README.md)."""
        ids, mask, tt = enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids")
        pos = id_positions(self.clf, ids)
        both, masks, segments = torch.cat([ids, self.baseline_ids(enc)]), repeat_rows(mask, 2), repeat_rows(tt, 2)
        if pos is None:  # graphs number positions themselves: models that derive them from the ids run eagerly
            logits = graphs.logits(self.clf, {"input_ids": both, "attention_mask": masks,
                                              **({} if segments is None else {"token_type_ids": segments})})
            if logits is not None:
                states = embedding_states(self.clf, both, segments)
                return logits[0].float().cpu().numpy(), (states, logits)
        states, logits = layer_outputs(self.clf, both, masks, segments, repeat_rows(pos, 2))
        return logits[0].float().cpu().numpy(), (states, logits)

    def _attribute(self, example, enc, al, tgt, ctx=None):
        clf = self.clf
        ids = enc["input_ids"]
        states, logits = ctx  # from _prepare
        x, b = states[:1], states[1:]
        f_x, f_b = class_score(clf, devices.wide(logits), tgt, self.output).tolist()  # one copy back, not two
        best, spent, n, rule = None, 0, self.start_steps, self._even_rule(self.start_steps)
        while True:
            attr, slope = self.path_integral(enc, tgt, *rule, x, b)
            spent += n
            delta = abs(float(attr.sum()) - (f_x - f_b))
            if best is None or delta < best[1]:
                best = (attr, delta)
            nxt = max(n + 1, n * 3 // 2)
            if best[1] <= self.tolerance or spent + nxt > self.max_steps:
                break
            if quadrature.peaked(rule[1], slope):
                rule = quadrature.sinh_mapped(nxt, *quadrature.focus(rule[0], slope))
            else:
                rule = self._even_rule(nxt)
            n = nxt
        attr, delta = best
        tok = attr.sum(-1).numpy()
        note = "" if delta <= self.tolerance else (
            f"convergence delta {delta:.3g} exceeds {self.tolerance} even after {spent} steps: scores are approximate")
        return self._result(al, tgt, al.pool(tok), tokens=clf.tokenizer.convert_ids_to_tokens(ids[0].tolist()),
                            token_scores=tok.tolist(), delta=delta, n_steps=spent, note=note)


class Occlusion(Method):
    """The target's probability (or logit) minus the same with the word removed from the text."""

    name = "occlusion"
    label = "occlusion"

    def _attribute(self, example, enc, al, tgt, ctx=None):
        seen = al.seen  # removing a word the model never read (cut, or dropped by the tokenizer) changes nothing
        edited = [Example(edit_texts(example.texts, al.words, {i: ""})) for i in seen]
        base = _target_values(self.clf, ctx, tgt, self.output)[0]
        scores = np.zeros(len(al.words))
        if edited:
            scores[seen] = base - target_outputs(self.clf, edited, tgt, self.output)
        return self._result(al, tgt, scores)


class Lime(Method):
    """Captum's LIME over word presence: samples remove random word subsets, a ridge model fits their effect."""

    name = "lime"
    label = "LIME"
    lit_name = "LIME"
    SAMPLES = 256  # perturbed inputs a map is fitted to, at most this server's cap

    @classmethod
    def settings(cls, request: dict, caps: dict) -> dict:
        return {**super().settings(request, caps), "n_samples": min(cls.SAMPLES, caps["max_lime_samples"])}

    def __init__(self, clf: Classifier, n_samples: int = SAMPLES, seed: int = 0, output: str = "prob"):
        super().__init__(clf, output)
        self.n_samples, self.seed = n_samples, seed

    def _attribute(self, example, enc, al, tgt, ctx=None):
        from captum._utils.models.linear_model import SkLearnRidge  # deferred: captum: only LIME
        from captum.attr import Lime as CaptumLime  # deferred: captum: only LIME
        from captum.attr._core.lime import get_exp_kernel_similarity_function  # deferred: captum: only LIME

        seen = al.seen  # the interpretable features: words the model read
        n = len(seen)
        scores = np.zeros(len(al.words))
        if n == 0:
            return self._result(al, tgt, scores)

        def f(mask: torch.Tensor) -> torch.Tensor:
            exs = [Example(edit_texts(example.texts, al.words,
                                      {seen[j]: "" for j in np.flatnonzero(m.numpy() < 0.5)})) for m in mask]
            return torch.as_tensor(target_outputs(self.clf, exs, tgt, self.output), dtype=torch.float32)

        torch.manual_seed(self.seed)
        lime = CaptumLime(f, interpretable_model=SkLearnRidge(alpha=1.0),
                          similarity_func=get_exp_kernel_similarity_function("cosine", 0.75))
        attr = lime.attribute(torch.ones(1, n), baselines=torch.zeros(1, n), n_samples=self.n_samples,
                              perturbations_per_eval=self.n_samples)
        scores[seen] = attr[0].numpy()
        return self._result(al, tgt, scores, note=f"{self.n_samples} samples")


class Methods(Mapping):
    """The saliency methods registered now, by name: each `capabilities.SALIENCY_METHODS` line's class (a
    built-in's line declares its options, a plugin's class its own), the plugins' loaded first."""

    def _parts(self) -> dict:
        capabilities.load_plugins()
        return SALIENCY_METHODS

    def __getitem__(self, name: str) -> type[Method]:
        return self._parts()[name].load()

    def __iter__(self):
        return iter(list(self._parts()))

    def __len__(self) -> int:
        return len(self._parts())


METHODS = Methods()
for _name, _part in list(SALIENCY_METHODS.items()):  # the built-ins: the options their lines declare
    _part.load().options = _part.options
    if _part.load().name != _name:
        raise ImportError(f"saliency method {_part.code!r} is declared under another name ({_name!r})")


def register(cls: type[Method]) -> type[Method]:
    """A saliency method from its class alone, its options those it declares (`cls.options`): the saliency
    capabilities offer it and its options from now on, so every front end built afterwards does too (the CLI's
    --method and flags, the app's menu and controls and gradio_client, LIT's interpreter and its settings)."""
    if not (isinstance(cls, type) and issubclass(cls, Method)) or not str(cls.name).isidentifier():
        raise ValueError(f"saliency method {cls!r}: a Method subclass whose name is an identifier")
    if METHODS.get(cls.name, cls) is not cls:
        raise ValueError(f"saliency method {cls.name!r} is declared already")
    if not all(isinstance(o, capabilities.Option) for o in cls.options):
        raise ValueError(f"saliency method {cls.name!r}: its options must be capabilities.Option declarations")
    capabilities.register_part(SALIENCY_METHODS, cls.name, capabilities.Part(cls, tuple(cls.options)),
                               "saliency method")
    return cls


def unregister(name: str) -> None:
    SALIENCY_METHODS.pop(name, None)


def check_method(name: str) -> None:
    """Unknown method names are refused before any work (a dataset read, a model run)."""
    if name not in METHODS:
        raise InputError(f"method: {name!r} is not one of {sorted(METHODS)}")


def method(name: str, clf: Classifier, **kw) -> Method:
    check_method(name)
    return METHODS[name](clf, **kw)
