"""Attack speed: TextAttack's stock HuggingFaceModelWrapper (pads every query to the tokenizer's max length,
512) against albert-lens's wrapper (length-sorted, dynamically padded, max length 128), same recipe, same
examples, same model, one run (issue 6). Reports the speed-up and the share of examples with the same
adversarial text.

    python benchmarks/attack_speed.py [--recipe deepwordbug] [--n 20] [--model BERT] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import OrderedDict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from app.core.execution.pair import Pair  # noqa: E402
from app.core.ground.data import load_dataset  # noqa: E402
from app.core.ground.runtime import SHARED_DATA as SHARED  # noqa: E402
from app.core.techniques import attacks  # noqa: E402


def run(attack, examples, clf) -> tuple[float, list]:
    """Each example starts from the same seed in both runs: DeepWordBug picks its character edits at random."""
    from textattack.shared.utils import set_seed

    outs = []
    t0 = time.perf_counter()
    for ex in examples:
        set_seed(0)
        inp = ex.text if len(ex.texts) == 1 else OrderedDict((f"text{i}", t) for i, t in enumerate(ex.texts))
        r = attack.attack(inp, clf.labels.index(ex.label))
        outs.append((type(r).__name__, r.perturbed_result.attacked_text.text))
    return time.perf_counter() - t0, outs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipe", default="deepwordbug")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--model", default="BERT", help="BERT or ALBERT side of the offline pair")
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(2)
    attacks._textattack()  # through its one shim on transformers 5
    from textattack.models.wrappers import HuggingFaceModelWrapper

    pair = Pair.resolve("offline")
    clf = {m.name: m for m in pair.models}[args.model]
    dev = load_dataset(SHARED / "glue" / "sst2" / "dev.tsv").examples[: args.n]
    stock = HuggingFaceModelWrapper(clf.model, clf.tokenizer)
    ours = attacks.make_wrapper(clf)
    t_stock, out_stock = run(attacks.build_attack(args.recipe, stock, args.budget), dev, clf)
    t_ours, out_ours = run(attacks.build_attack(args.recipe, ours, args.budget), dev, clf)
    same = sum(a == b for a, b in zip(out_stock, out_ours)) / len(dev)
    res = {"recipe": args.recipe, "model": clf.name, "n": len(dev), "query_budget": args.budget,
           "stock_max_length": clf.tokenizer.model_max_length,
           "stock_seconds": t_stock, "ours_seconds": t_ours, "speedup": t_stock / t_ours,
           "same_adversarial_text": same,
           "outcomes_stock": {k: [o[0] for o in out_stock].count(k) for k in {o[0] for o in out_stock}},
           "outcomes_ours": {k: [o[0] for o in out_ours].count(k) for k in {o[0] for o in out_ours}}}
    print(json.dumps(res, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
