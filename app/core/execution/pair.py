"""A `Pair`: the two classifiers every front end shows side by side, answering each call for both."""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from ..ground import device as devices
from ..ground.data import Example
from ..ground.errors import InputError, PairError
from ..ground.policy import limits
from ..ground.precision import FORCE_ENV, PRECISIONS, check_on, choose, forced
from ..ground.runtime import hub_reachable
from ..models.loading import Classifier, ModelHead, get_classifier, get_head
from ..models.registry import PRESETS, PairSpec, custom_pair, get_pair
from .inference import DEFAULT_BATCH, Prediction, Progress, predict

log = logging.getLogger("albert_lens")


def same_outputs(heads: tuple) -> tuple:
    """Both models must answer in the same label names: gold labels, flips, agreement and the explained class
    are all matched by name. Two configs naming their outputs differently (a user's pair without --task) can't
    be compared, so say so instead of scoring one model wrong on every example."""
    a, b = heads
    if a.labels != b.labels and (a.labels is None or b.labels is None or set(a.labels) != set(b.labels)):
        def says(h) -> str:
            return "a regression score" if h.labels is None else f"labels {list(h.labels)}"

        raise PairError(f"models: {a.name} answers with {says(a)} and {b.name} with {says(b)}; give --task to name "
                        "both models' outputs alike (positionally, when a config has only LABEL_0, LABEL_1...)")
    return heads


class Pair:
    def __init__(self, spec: PairSpec, reason: str = ""):
        self.spec = spec
        self.reason = reason  # why this pair was chosen, for the banner and logs
        self._models: tuple[Classifier, Classifier] | None = None

    @classmethod
    def resolve(cls, pair: str | None = None, models: Sequence[str] | None = None, task: str | None = None,
                device: str | None = None) -> "Pair":
        """`--models A B` wins, then `--pair NAME`, then the default pair, on `device` (`device.resolve`: None
        reads ALBERT_LENS_DEVICE, then `auto`). Hosted mode allows only the presets in ALBERT_LENS_ALLOWED_PAIRS
        (default: offline and sst2) and no arbitrary model ids."""
        where = devices.resolve(device)
        return cls._resolve(pair, models, task).with_device(where)

    @classmethod
    def _resolve(cls, pair: str | None, models: Sequence[str] | None, task: str | None) -> "Pair":
        caps = limits()
        if caps["hosted"]:
            if models:
                raise InputError("models: hosted mode serves only its configured pairs, not arbitrary model ids")
            if pair and pair.strip().lower() not in caps["allowed_pairs"]:
                raise InputError(f"pair: {pair!r} is not served here; allowed: {sorted(caps['allowed_pairs'])}")
        if models:
            if len(models) != 2:
                raise InputError(f"models: give exactly two model ids or directories, got {len(models)}")
            return cls(custom_pair(models[0], models[1], task), "models given by the user")
        if pair:
            return cls(get_pair(pair), "chosen by the user")
        spec, reason = default_pair_spec()
        return cls(spec, reason)

    def with_precision(self, precision: str | None, force: bool | None = None) -> "Pair":
        """The same models at `precision`: "fp32" (the default, and the only one gradients use), or "int8" /
        "bf16" / "fp16" for forward-only batch work. On a CPU a reduced precision answers only where the models'
        own forward passes, timed here once per machine and model, are faster in it than in fp32
        (`precision.choose`); else fp32 answers. `force` (else ALBERT_LENS_FORCE_PRECISION=1) insists on it.
        `precision_choice` says which answered and why."""
        precision = "fp32" if precision in (None, "") else str(precision)
        if precision not in PRECISIONS:
            raise InputError(f"precision: {precision[:20]!r} is not one of {list(PRECISIONS)}")
        check_on(precision, self.device)
        if precision == "fp32":
            return self._at("fp32", False) if self.precision != "fp32" or self.precision_choice else self
        insist = forced(force)
        if not devices.is_cpu(self.device):
            twin = self._at(precision, False)
            twin.precision_choice = {"asked": precision, "used": precision, "forced": insist,
                                     "why": f"{precision} weights on {self.device} (not timed: GPUs' fast path)"}
            return twin
        if insist and precision == "int8":  # nothing to choose between: int8's layers, however fast
            twin = self._at("int8", False)
            twin.precision_choice = {"asked": "int8", "used": "int8", "forced": True,
                                     "why": f"forced ({FORCE_ENV} or --force-precision), not timed"}
            return twin
        choice = choose(self.fp32.models, self._at(precision, False).models, precision, insist)
        twin = self._at(choice["used"], choice.get("emulated", False))
        twin.precision_choice = choice
        if choice["used"] == "fp32":
            twin.precision_note = f"{precision} asked for, but {choice['why']}"
        return twin

    def _at(self, precision: str, emulated: bool) -> "Pair":
        """A new Pair of the same models at `precision` (no choosing; the loaded models are shared through the
        loading cache)."""
        models = tuple(dataclasses.replace(m, precision=precision, emulated=emulated) for m in self.spec.models)
        return Pair(dataclasses.replace(self.spec, models=models), self.reason)

    def with_device(self, device: str | None) -> "Pair":
        """The same models on `device` (resolved: "cuda" is "cuda:0"; a device that isn't here is refused with
        the list of those that are)."""
        where = devices.resolve(device)
        if all(m.device == where for m in self.spec.models):
            return self
        check_on(self.precision, where)
        models = tuple(dataclasses.replace(m, device=where) for m in self.spec.models)
        return Pair(dataclasses.replace(self.spec, models=models), self.reason)

    @property
    def precision(self) -> str:
        return self.spec.models[0].precision

    @property
    def device(self) -> str:
        return self.spec.models[0].device

    precision_note = ""  # why the precision answering is not the one asked for (`with_precision`)
    precision_choice: dict | None = None  # {"asked", "used", "why", ...}: set by `with_precision`

    @property
    def precision_asked(self) -> dict:
        """{"asked", "used", "why"} (and "forced", "emulated", "timing" where a choice was timed): which precision
        answers and why, for every `--json`, the banner, Model facts, the report and LIT."""
        if self.precision_choice:
            return dict(self.precision_choice)
        return {"asked": self.precision, "used": self.precision,
                "why": "fp32, the default" if self.precision == "fp32" else f"{self.precision} as loaded"}

    def hardware(self) -> dict:
        """The device and dtype that answer, for every `--json`, the banner, Model facts and the report."""
        note = {"precision_note": self.precision_note} if self.precision_note else {}
        said = {k: v for k, v in self.precision_asked.items() if k in ("asked", "used", "why", "forced", "one_input")}
        return {**devices.describe(self.device), "precision": said, **note}

    @property
    def for_one_input(self) -> "Pair":
        """The pair that answers one input at a time (Compare): itself, or its fp32 twin where the chosen
        precision was timed slower than fp32 on one input (`precision.choose`'s "one_input")."""
        one = (self.precision_choice or {}).get("one_input") or {}
        return self.fp32 if one.get("used") == "fp32" and self.precision != "fp32" else self

    @property
    def fp32(self) -> "Pair":
        """This pair in fp32, for gradients (a quantised layer has none); itself when it already is."""
        if self.precision == "fp32":
            return self
        twin = getattr(self, "_fp32", None)
        if twin is None:
            twin = self._fp32 = self.with_precision("fp32")
        return twin

    def __getstate__(self) -> dict:
        """A pair travels to a worker process as its spec; the worker loads its own weights."""
        return {"spec": self.spec, "reason": self.reason, "_models": None}

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def task(self):
        return self.heads[0].task

    @property
    def heads(self) -> tuple[ModelHead, ModelHead]:
        """Names, labels and tasks without loading weights (the loaded models when they are): what a Ray driver
        needs to read its workers' logits."""
        if self._models is not None:
            return self._models
        return same_outputs(tuple(get_head(s) for s in self.spec.models))  # type: ignore[arg-type]

    @property
    def models(self) -> tuple[Classifier, Classifier]:
        if self._models is None:
            self._models = same_outputs(tuple(get_classifier(s) for s in self.spec.models))  # type: ignore
        return self._models

    def predict(self, examples: Sequence[Example], *, batch_size: int = DEFAULT_BATCH,
                progress: Progress | None = None) -> list[Prediction]:
        out = []
        for k, clf in enumerate(self.models):
            step = (lambda d, n, k=k: progress(k * n + d, 2 * n)) if progress else None
            out.append(predict(clf, examples, batch_size=batch_size, progress=step))
        return out

    def banner(self) -> str:
        parts = [f"pair **{self.name}** ({self.reason})" if self.reason else f"pair **{self.name}**"]
        parts += [m.describe() for m in self.models]
        return " · ".join(parts)


def _in_local_cache(repo_id: str) -> bool:
    try:
        # deferred: the hub client: only for models that are not local
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(repo_id, "config.json")
        return isinstance(hit, str)
    except Exception:  # noqa: BLE001 - a broken cache just means "not cached"
        return False


def default_pair_spec() -> tuple[PairSpec, str]:
    """TextAttack's SST-2 pair when it is cached or the hub answers within 3 s, else the offline pair."""
    sst2 = PRESETS["sst2"]
    if all(_in_local_cache(m.source) for m in sst2.models):
        reason = "default: TextAttack SST-2 pair found in the local Hugging Face cache"
    elif hub_reachable(3.0):
        reason = "default: TextAttack SST-2 pair, the Hugging Face hub answered"
    else:
        reason = "default: offline pair, the Hugging Face hub can't be reached and TextAttack's models are not cached"
        log.info(reason)
        return PRESETS["offline"], reason
    log.info(reason)
    return sst2, reason
