"""Model facts: how many parameters, where they sit, and whether layers share them (ALBERT's headline)."""
from __future__ import annotations


def count_parameters(model) -> int:
    """Unique parameters: a tensor shared by several layers is stored, and counted, once."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def parameter_split(model) -> dict[str, int]:
    """Embeddings / encoder / head, counting shared tensors once."""
    seen: set[int] = set()
    split = {"embeddings": 0, "encoder": 0, "head": 0}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            continue
        seen.add(id(p))
        if ".embeddings." in name or "embedding_hidden_mapping_in" in name:
            split["embeddings"] += p.numel()
        elif ".encoder." in name:
            split["encoder"] += p.numel()
        else:
            split["head"] += p.numel()
    return split


def shares_layers(model) -> bool:
    """True when the encoder applies one set of weights more than once (ALBERT's cross-layer sharing)."""
    config = model.config
    groups = getattr(config, "num_hidden_groups", None)
    return groups is not None and groups < config.num_hidden_layers
