"""`train-offline`: fine-tune the MiniLM BERT on a classification task (SST-2 by default, or any task the registry
names, sentence pairs included: RTE, MRPC, ...), then distil it into a factorised, layer-shared ALBERT.

Built to finish on two CPU cores in well under two hours: short sequences (64 tokens for one sentence, 128 for a
pair), length-bucketed batches,
the BERT's word-embedding table frozen (so it need not be shipped), teacher logits computed once and cached, and
a checkpoint every few hundred steps so an interrupted run resumes where it stopped.
"""
from __future__ import annotations

import json
import logging
import math
import random
import re
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..ground.data import Example, load_dataset
from ..ground.errors import InputError
from ..models import offline
from ..models.registry import TASKS, Task, task_key
from .facts import count_parameters
from .model_cards import write_offline_cards

log = logging.getLogger("albert_lens.train")


@dataclass
class TrainSettings:
    seed: int = 13
    max_len: int | None = None  # None: 64 tokens for one sentence, 128 for a pair (an RTE premise is long)
    batch_size: int = 32
    bert_epochs: float | None = None  # None: chosen by the training set's size (resolve_epochs)
    bert_lr: float = 5e-5
    albert_epochs: float | None = None
    albert_lr: float = 1e-4
    temperature: float = 2.0
    distil_weight: float = 0.7  # rest goes to the gold labels
    detok_share: float = 0.5  # share of training sentences rewritten from SST's tokenised style to plain text
    warmup: float = 0.06
    checkpoint_every: int = 300
    train_limit: int | None = None
    layer_probe: int = 512
    extra: dict = field(default_factory=dict)


_DETOK = [
    (re.compile(r" (n't|'s|'re|'ve|'ll|'d|'m)\b"), r"\1"),
    (re.compile(r" ([.,!?;:%)])"), r"\1"),
    (re.compile(r"([($]) "), r"\1"),
    (re.compile(r"-lrb- ?"), "("),
    (re.compile(r" ?-rrb-"), ")"),
    (re.compile(r"`` ?| ?''"), '"'),
]


def detokenise(text: str) -> str:
    """SST-2 is lower-cased and tokenised ("it 's good ."); users type "It's good." Teach both."""
    text = text.strip()
    for pat, rep in _DETOK:
        text = pat.sub(rep, text)
    return text[:1].upper() + text[1:]


MIN_STEPS = {"bert": 300, "albert": 450}  # what RTE's 2,490 pairs needed to move at all (4 and 6 epochs)


def resolve_epochs(settings: TrainSettings, n_examples: int) -> TrainSettings:
    """Epochs not given: SST-2's 1.5 (BERT) and 2 (ALBERT), or as many whole epochs as a small training set
    needs for MIN_STEPS steps (RTE: 78 batches an epoch, so 1.5 epochs would be 117 steps, near chance)."""
    n_batches = max(1, math.ceil(n_examples / settings.batch_size))
    if settings.bert_epochs is None:
        settings.bert_epochs = max(1.5, float(math.ceil(MIN_STEPS["bert"] / n_batches)))
    if settings.albert_epochs is None:
        settings.albert_epochs = max(2.0, float(math.ceil(MIN_STEPS["albert"] / n_batches)))
    return settings


def training_task(name: str) -> Task:
    """The task `train-offline` can train: a classification task the registry names."""
    task = TASKS.get(task_key(name))
    if task is None:
        raise InputError(f"task: unknown task {name!r}; choose one of {sorted(TASKS)}")
    if task.is_regression:
        raise InputError(f"task: {task.name!r} is a regression task; train-offline trains classifiers")
    return task


def prepare_texts(examples: list[Example], settings: TrainSettings,
                  task: Task = TASKS["sst2"]) -> tuple[list, np.ndarray]:
    """Texts (a string each, or a pair of strings) and label indices in the task's order. Only SST-2's sentences
    are rewritten to plain style: other tasks' data is already written as people write."""
    rng = random.Random(settings.seed)
    share = settings.detok_share if task.name == "sst2" else 0.0
    texts, labels = [], []
    for i, ex in enumerate(examples):
        if len(ex.texts) != len(task.fields):
            raise InputError(f"train: example {i + 1} has {len(ex.texts)} text(s); {task.name} needs "
                             f"{len(task.fields)} ({', '.join(task.fields)})")
        if ex.label not in task.labels:
            raise InputError(f"train: example {i + 1} has label {ex.label!r}; {task.name} labels are "
                             f"{list(task.labels)}")
        if task.two_texts:
            texts.append(tuple(ex.texts))
        else:
            t = ex.text
            if rng.random() < share:
                t = detokenise(t)
            texts.append(t)
        labels.append(task.labels.index(ex.label))
    return texts, np.asarray(labels)


def encode(tok, texts: list, max_length: int) -> dict:
    """Tokenised texts; pairs as the models read them at inference (two segments, longest cut first)."""
    if texts and isinstance(texts[0], tuple):
        return dict(tok([t[0] for t in texts], [t[1] for t in texts], truncation=True, max_length=max_length))
    return dict(tok(list(texts), truncation=True, max_length=max_length))


def bucketed_batches(lengths: np.ndarray, batch_size: int, seed: int) -> list[np.ndarray]:
    """Shuffle, sort within chunks of 50 batches by length, then shuffle the batches: little padding, still random."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(lengths))
    chunk = batch_size * 50
    batches = []
    for s in range(0, len(order), chunk):
        part = order[s : s + chunk]
        part = part[np.argsort(lengths[part], kind="stable")]
        batches.extend(part[i : i + batch_size] for i in range(0, len(part), batch_size))
    rng.shuffle(batches)
    return batches


def collate(enc: dict, idx: np.ndarray) -> dict[str, torch.Tensor]:
    ids = [enc["input_ids"][i] for i in idx]
    types = enc.get("token_type_ids")
    width = max(map(len, ids))
    input_ids = torch.zeros(len(ids), width, dtype=torch.long)
    mask = torch.zeros(len(ids), width, dtype=torch.long)
    token_types = torch.zeros(len(ids), width, dtype=torch.long)
    for r, (i, row) in enumerate(zip(idx, ids)):
        input_ids[r, : len(row)] = torch.tensor(row)
        mask[r, : len(row)] = 1
        if types is not None:
            token_types[r, : len(row)] = torch.tensor(types[i])
    return {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": token_types}


@torch.inference_mode()
def logits_for(model, enc: dict, batch_size: int = 128, desc: str = "predict") -> np.ndarray:
    model.eval()
    lengths = np.asarray([len(x) for x in enc["input_ids"]])
    order = np.argsort(lengths, kind="stable")
    out = np.zeros((len(order), model.config.num_labels), dtype=np.float32)
    for s in tqdm(range(0, len(order), batch_size), desc=desc, leave=False, mininterval=5):
        idx = order[s : s + batch_size]
        out[idx] = model(**collate(enc, idx)).logits.float().numpy()
    return out


def accuracy(model, enc: dict, labels: np.ndarray) -> float:
    return float((logits_for(model, enc, desc="eval").argmax(1) == labels).mean())


def _train_loop(model, enc, labels, settings: TrainSettings, *, epochs: float, lr: float, ckpt: Path,
                loss_fn, desc: str, eval_fn=None) -> list[dict]:
    """AdamW with linear warm-up/decay; resumable from `ckpt` (model, optimiser, scheduler, position)."""
    torch.manual_seed(settings.seed)
    lengths = np.asarray([len(x) for x in enc["input_ids"]])
    n_batches = math.ceil(len(lengths) / settings.batch_size)
    total = int(n_batches * epochs)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    warm = max(1, int(total * settings.warmup))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm)))
    )
    step, history = 0, []
    if ckpt.is_file():
        state = torch.load(ckpt, map_location="cpu", weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        step, history = int(state["step"]), json.loads(state["history"])
        log.info("%s: resumed at step %d/%d", desc, step, total)
    model.train()
    bar = tqdm(total=total, initial=step, desc=desc, mininterval=10)
    t0, losses = time.time(), []
    while step < total:
        epoch, pos = divmod(step, n_batches)
        batches = bucketed_batches(lengths, settings.batch_size, settings.seed + epoch)
        for idx in batches[pos:]:
            if step >= total:
                break
            batch = collate(enc, idx)
            loss = loss_fn(model(**batch).logits, idx)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            losses.append(float(loss.detach()))
            bar.update(1)
            if step % 50 == 0:
                bar.set_postfix(loss=f"{np.mean(losses[-50:]):.4f}")
            end_of_epoch = step % n_batches == 0 or step == total
            if step % settings.checkpoint_every == 0 or end_of_epoch:
                if end_of_epoch and eval_fn is not None:
                    rec = {"step": step, "epoch": step / n_batches, "train_loss": float(np.mean(losses[-200:])),
                           **eval_fn(), "seconds": round(time.time() - t0, 1)}
                    history.append(rec)
                    log.info("%s: %s", desc, rec)
                    model.train()
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                            "step": step, "history": json.dumps(history)}, ckpt)
    bar.close()
    return history


def resolve_max_len(max_len, task) -> int:
    """The tokens kept per training example: the one asked for, checked against the MiniLM's 512 positions, or
    the task's default (64 for one sentence; 128 for a pair, whose RTE premise is long)."""
    if max_len is None:
        return 128 if task.two_texts else 64
    if isinstance(max_len, bool) or not isinstance(max_len, int) or not 8 <= max_len <= 512:
        raise InputError(f"max_len: {max_len!r} is out of range; give a whole number of tokens from 8 to "
                         "512 (the MiniLM's positions)")
    return max_len


def train_offline(train_path: str | Path, out: str | Path, *, dev_path: str | Path | None = None,
                  settings: TrainSettings | None = None, export_to: Path | None = None,
                  task: str = "sst2") -> dict:
    """Run (or resume) all stages; returns the results that also go into `out/results.json`."""
    # deferred: transformers: loaded with the first model, not by every import of the core
    from transformers import AutoTokenizer

    settings = settings or TrainSettings()
    the_task = training_task(task)
    settings.max_len = resolve_max_len(settings.max_len, the_task)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    done = out / "settings.json"
    if done.is_file():  # a resumed run must be the same task: its checkpoints have that task's head
        earlier = json.loads(done.read_text()).get("extra", {}).get("task", "sst2")
        if earlier != the_task.name:
            raise InputError(f"out: {out} holds a {earlier} run; give another --out for {the_task.name}")
    settings.extra = {**settings.extra, "task": the_task.name}
    torch.manual_seed(settings.seed)
    tok = AutoTokenizer.from_pretrained(offline.minilm_dir())
    id2label = dict(enumerate(the_task.labels))

    train = load_dataset(train_path, task=the_task.name).examples[: settings.train_limit]
    texts, labels = prepare_texts(train, settings, the_task)
    resolve_epochs(settings, len(texts))
    done.write_text(json.dumps(asdict(settings), indent=2))
    log.info("settings: %s", asdict(settings))
    enc = encode(tok, texts, settings.max_len)
    log.info("training examples: %d (%s)", len(texts),
             f"{100 * settings.detok_share:.0f}% rewritten to plain style" if the_task.name == "sst2"
             else f"{the_task.name}, labels {list(the_task.labels)}")
    dev_enc = dev_labels = None
    if dev_path:
        dev = load_dataset(dev_path, task=the_task.name).examples
        dev_texts, dev_labels = prepare_texts(dev, replace(settings, detok_share=0.0), the_task)
        dev_enc = encode(tok, dev_texts, 128)

    results: dict = json.loads((out / "results.json").read_text()) if (out / "results.json").is_file() else {}
    # a model's dev accuracy as last measured in this process: a training loop's last evaluation is at its last
    # step, on the weights it returns, so the final results reuse it instead of predicting dev again
    measured: dict[str, float] = {}

    def dev_accuracy(name: str, model) -> dict:
        measured[name] = accuracy(model, dev_enc, dev_labels)
        return {"dev_accuracy": measured[name]}

    def final_accuracy(name: str, model) -> float:
        return measured[name] if name in measured else accuracy(model, dev_enc, dev_labels)

    def save_results():
        (out / "results.json").write_text(json.dumps(results, indent=2))

    # ---- stage 1: BERT
    bert = offline.bert_from_minilm(id2label)
    bert_final = out / "bert_final.pt"
    if bert_final.is_file():
        bert.load_state_dict(torch.load(bert_final, map_location="cpu", weights_only=True))
    else:
        for name in offline.FROZEN_FROM_MINILM:
            dict(bert.named_parameters())[name].requires_grad_(False)
        y = torch.as_tensor(labels)
        hist = _train_loop(
            bert, enc, labels, settings, epochs=settings.bert_epochs, lr=settings.bert_lr, ckpt=out / "bert_ckpt.pt",
            loss_fn=lambda logits, idx: F.cross_entropy(logits, y[idx]), desc="bert",
            eval_fn=(lambda: dev_accuracy("bert", bert)) if dev_enc else None,
        )
        torch.save(bert.state_dict(), bert_final)
        results["bert"] = {"history": hist, "parameters": count_parameters(bert)}
        save_results()

    # ---- stage 2: teacher logits, once
    teacher_file = out / "teacher_logits.npy"
    if teacher_file.is_file():
        teacher = np.load(teacher_file)
    else:
        teacher = logits_for(bert, enc, desc="teacher logits")
        np.save(teacher_file, teacher)

    # ---- stage 3: ALBERT by distillation
    albert_final = out / "albert_final.pt"
    if "albert_init" not in results:
        results["albert_init"] = choose_init_layer(bert, enc, teacher, settings, id2label)
        save_results()
    albert = offline.albert_from_bert(bert, results["albert_init"]["layer"], id2label)
    if albert_final.is_file():
        albert.load_state_dict(torch.load(albert_final, map_location="cpu", weights_only=True))
    else:
        t = torch.as_tensor(teacher)
        y = torch.as_tensor(labels)
        temp, w = settings.temperature, settings.distil_weight

        def distil(logits, idx):
            soft = F.kl_div(F.log_softmax(logits / temp, -1), F.softmax(t[idx] / temp, -1), reduction="batchmean")
            return w * temp * temp * soft + (1 - w) * F.cross_entropy(logits, y[idx])

        hist = _train_loop(
            albert, enc, labels, settings, epochs=settings.albert_epochs, lr=settings.albert_lr,
            ckpt=out / "albert_ckpt.pt", loss_fn=distil, desc="albert",
            eval_fn=(lambda: dev_accuracy("albert", albert)) if dev_enc else None,
        )
        torch.save(albert.state_dict(), albert_final)
        results["albert"] = {"history": hist, "parameters": count_parameters(albert)}
        save_results()

    if dev_enc:
        results["final"] = {
            "bert_dev_accuracy": final_accuracy("bert", bert),
            "albert_dev_accuracy": final_accuracy("albert", albert),
            "dev_n": len(dev_labels),
            "bert_parameters": count_parameters(bert),
            "albert_parameters": count_parameters(albert),
        }
        save_results()
    if export_to is not None:
        write_offline_cards(bert, albert, results, settings, Path(export_to), train_path=str(train_path),
                            dev_path=str(dev_path) if dev_path else None, task=the_task)
    log.info("results: %s", json.dumps(results.get("final", {})))
    return results


@torch.inference_mode()
def choose_init_layer(bert, enc, teacher: np.ndarray, settings: TrainSettings, id2label: dict) -> dict:
    """Pick the MiniLM layer whose six-fold repetition best imitates the teacher before any training."""
    idx = np.random.default_rng(settings.seed).choice(len(teacher), size=min(settings.layer_probe, len(teacher)),
                                                      replace=False)
    sub = {k: [v[i] for i in idx] for k, v in enc.items() if k in ("input_ids", "token_type_ids")}
    t = torch.as_tensor(teacher[idx])
    losses = {}
    for layer in range(bert.config.num_hidden_layers):
        albert = offline.albert_from_bert(bert, layer, id2label)
        s = torch.as_tensor(logits_for(albert, sub, desc=f"probe layer {layer}"))
        losses[layer] = float(F.kl_div(F.log_softmax(s, -1), F.softmax(t, -1), reduction="batchmean"))
    best = min(losses, key=losses.get)
    log.info("init-layer probe (KL to teacher): %s -> layer %d", losses, best)
    return {"layer": best, "kl_by_layer": losses}
