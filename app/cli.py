"""`albert-lens`: the command line. Thin: parses arguments, calls the core, prints tables or JSON."""
from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from app.core.ground import runtime

runtime.prepare()

# after prepare(); none of these loads PyTorch (policy: a bad flag is refused before the facade is imported)
from app.core.ground import policy  # noqa: E402
from app.core.ground.errors import InputError, LensError  # noqa: E402
from app.core.present import plots, views  # noqa: E402


def _api():
    """The facade, the CLI's one door into the core, imported on first use: `--help` and a bad flag answer
    without loading PyTorch (seconds)."""
    from app.core import api

    return api

log = logging.getLogger("albert_lens")


def _pair_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--pair", help="a preset pair (sst2, rte, ..., offline, or offline-<task> once train-offline "
                   "--task <task> exported it); default: TextAttack SST-2 if reachable or cached, else offline")
    g.add_argument("--models", nargs=2, metavar=("A", "B"), help="any two hub ids or local model directories")
    p.add_argument("--task", help="task of --models (a preset name such as rte) when their configs don't say")
    p.add_argument("--device", help="auto (CUDA, then MPS, then the CPU), cpu, cuda, cuda:N or mps; default: "
                   "$ALBERT_LENS_DEVICE, else auto")


def _text_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("text", nargs=None if required else "?", help="the input" + ("" if required else
                   " (not for dataset_*)"))
    p.add_argument("text2", nargs="?", help="second text for pair tasks (premise/hypothesis, ...)")


def _output_args(p: argparse.ArgumentParser, figure: str | None = None) -> None:
    if figure:
        p.add_argument("--png", help=f"save {figure} here")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=["local", "ray"], default="local", help="run batches here or on Ray")
    p.add_argument("--address", help="address of an existing Ray cluster (default: start a local one)")
    p.add_argument("--workers", type=int, default=2, help="Ray workers, one model pair each")


@contextmanager
def _bar(desc: str, disable: bool = False, unit: str = "it") -> Iterator[Callable[[int, int], None]]:
    """A tqdm bar driven by the core's (done, total) progress calls, closed afterwards."""
    from tqdm.auto import tqdm  # deferred: only commands that show progress

    bar = tqdm(total=1, desc=desc, unit=unit, disable=disable)

    def step(done: int, total: int) -> None:
        bar.total, bar.n = total, done
        bar.refresh()

    try:
        yield step
    finally:
        bar.close()


def _engine(args):
    """The Engine of --engine/--address/--workers (in process by default)."""
    return _api().Engine(getattr(args, "engine", "local"), getattr(args, "address", None), getattr(args, "workers", 2))


_HARDWARE: dict = {}  # the device and dtype that answer this command, added to its --json


def _dumps(obj, **kw) -> str:
    """A command's JSON, saying which device and precision computed it."""
    if isinstance(obj, dict) and _HARDWARE:  # which device answered, and which precision and why
        obj = {**obj, "hardware": _HARDWARE}
    return json.dumps(obj, **kw)


def _pair(args):
    pair = _api().Pair.resolve(args.pair, args.models, getattr(args, "task", None), getattr(args, "device", None))
    precision = getattr(args, "precision", None)
    if precision and precision != "fp32":
        pair = pair.with_precision(precision, force=True if getattr(args, "force_precision", False) else None)
        # the command's first line: which precision answers, and why (never slower than fp32 without a word)
        print(_api().views.precision_line(pair.precision_asked), file=sys.stderr)
    _HARDWARE.clear()
    _HARDWARE.update(pair.hardware())
    return pair


def _precision_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--precision", choices=["fp32", "int8", "bf16", "fp16"], default="fp32",
                   help="for this forward-only batch work: int8, dynamically quantised encoder layers on the CPU; "
                        "bf16 or fp16, half precision on a GPU (bf16 also on a CPU). On a CPU the models' forward "
                        "passes are timed once per machine, and fp32 answers where the asked precision is slower "
                        "(benchmarks/README.md, CPUs); the first line says which answered and why")
    p.add_argument("--force-precision", action="store_true",
                   help="answer in --precision even where it is slower than fp32 here (also "
                        "ALBERT_LENS_FORCE_PRECISION=1); bf16 without bf16 instructions then runs emulated")


UNSAFE_PUBLIC = ("bind a non-loopback --host without hosted mode (ALBERT_LENS_HOSTED=1): whoever connects can "
                 "make the server read any data file it can and use its CPU without caps")
# the numbers each command takes, validated by the core's policy like the app's (no cap: the operator's machine)
WHOLE = ("limit", "n", "query_budget", "sample", "show", "umap_n", "attack_n", "saliency_n", "batch", "workers")


def _whole(args, *names: str) -> None:
    """Refuse a zero, negative or fractional count before any work, with the core's message."""
    for name in names or WHOLE:
        value = getattr(args, name, None)
        if value is not None:
            setattr(args, name, policy.count("--" + name.replace("_", "-"), value, cap=policy.OPERATOR_CAP))
    if getattr(args, "time_limit", None) is not None:
        args.time_limit = policy.number("--time-limit", args.time_limit, low=0, high=float(2**31))


def cmd_predict(args) -> int:
    api = _api()

    pair = _pair(args)
    res = api.predict(pair, args.text, args.text2)
    if args.json:
        print(_dumps({"pair": pair.name, **res}, indent=2, ensure_ascii=False))
        return 0
    print(f"pair: {pair.name} ({pair.reason})")
    width = max(8, *(len(clf.name) for clf in pair.models))
    for clf, rec in zip(pair.models, res["models"]):
        if "score" in rec:
            print(f"  {clf.name:<{width}} score {rec['score']:.4f}   [{clf.spec.source}]")
        else:
            probs = "  ".join(f"{k}={v:.4f}" for k, v in rec["probabilities"].items())
            print(f"  {clf.name:<{width}} {rec['label']:<16} {probs}   [{clf.spec.source}]")
    return 0


def _png_folder(path: str | None) -> None:
    """A --png into a folder that isn't there is refused before any work, naming the folder."""
    if path and not Path(path).parent.is_dir():
        raise InputError(f"png: the folder {str(Path(path).parent)[:200]!r} does not exist; make it first or "
                         "name another")


def _save_figure(draw, path: str | None) -> None:
    """`draw()` makes the figure, only when a path asks for it; said on stderr so --json output stays JSON."""
    if path:  # its folder was checked before any work (`main`)
        figure = draw()
        try:
            figure.savefig(path, dpi=110)
        except OSError as exc:
            raise InputError(f"png: {str(path)[:200]!r} cannot be written ({type(exc).__name__}: "
                             f"{exc.strerror or exc})") from None
        print(f"figure: {path}", file=sys.stderr)


def cmd_facts(args) -> int:
    api = _api()

    pair = _pair(args)
    texts = list(args.texts)
    if args.file:
        texts += [ln for ln in Path(args.file).read_text(encoding="utf-8").splitlines() if ln.strip()]
    res = api.facts(pair, texts or None)
    if args.json:
        print(_dumps(res.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(views.facts_text(res))
    _save_figure(lambda: plots.transitions_figure({m["model"]: m["transitions"] for m in res["models"]}), args.png)
    return 0


def cmd_train_offline(args) -> int:
    api = _api()

    # main() has configured logging at WARNING: the stages' INFO lines (settings, each epoch's dev accuracy) go
    # to stderr and to the work dir's log.txt, beside the checkpoints they describe
    train_log = logging.getLogger("albert_lens.train")
    train_log.setLevel(logging.INFO)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    to_file = logging.FileHandler(Path(args.out) / "log.txt", encoding="utf-8")
    to_file.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    train_log.addHandler(to_file)
    settings = api.TrainSettings(seed=args.seed, bert_epochs=args.bert_epochs, albert_epochs=args.albert_epochs,
                             train_limit=args.limit, max_len=args.max_len)
    export = Path(args.export) if args.export else None
    try:
        res = api.train_offline(args.train, args.out, dev_path=args.dev, settings=settings, export_to=export,
                            task=args.task)
    finally:
        train_log.removeHandler(to_file)
        to_file.close()
    print(json.dumps(res.get("final", {}), indent=2))
    return 0


def cmd_benchmark(args) -> int:
    api = _api()

    pair = _pair(args)
    with _engine(args) as engine, _bar(f"benchmark ({engine.kind})", args.json, "example") as step:
        res = api.benchmark(pair, args.dataset, args.limit, step, engine=engine, visitor=False)
    print(_dumps(res.to_dict(), indent=2) if args.json else views.benchmark_table(res))
    return 0




def cmd_app(args) -> int:
    from app.core.execution import workers

    policy.public_bind_allowed(args.host, args.unsafe_public)
    if policy.limits()["worker_processes"]:
        workers.serve_beside_workers()  # before PyTorch loads
    from app.ui import launch  # deferred: gradio: only the app command
    pair = _pair(args)
    print(f"albert-lens: {pair.banner()}", flush=True)
    launch(pair, host=args.host, port=args.port)
    return 0


def cmd_lit(args) -> int:
    from lit_models.server import make_server, page_url  # deferred: LIT: only the lit command

    policy.public_bind_allowed(args.host, args.unsafe_public)
    pair = _pair(args)
    print(f"albert-lens: LIT on {pair.banner()}", flush=True)
    server = make_server(pair, args.dataset, host=args.host, port=args.port, limit=args.limit)
    print(f"albert-lens: LIT at {page_url(pair, args.host, args.port)}", flush=True)
    server.serve()
    return 0


def cmd_report(args) -> int:
    from app.report import generate  # deferred: loads PyTorch: only the report command

    pair = _pair(args)
    with _engine(args) as engine:
        res = generate(pair, args.out, datasets=args.datasets or [], suites=args.suites, limit=args.limit,
                       sample=args.sample, attack_n=args.attack_n, umap_n=args.umap_n,
                       saliency_n=args.saliency_n, engine=engine)
    print(f"report written to {res['out']}: {', '.join(res['files'])} "
          f"({len(res['reused'])} of {len(res['sections'])} sections reused from the cache)")
    for key, why in res["failed"].items():
        print(f"albert-lens: section {key} not computed: {why}", file=sys.stderr)
    return 1 if res["failed"] else 0


def cmd_embed(args) -> int:
    import numpy as np  # deferred: the CLI answers --help without it

    api = _api()

    pair = _pair(args)
    with api.Engine(args.engine, args.address, args.workers, args.batch) as engine, \
            _bar(f"embedding ({args.engine})", unit="batch") as step:
        res = api.embed(pair, args.dataset, args.limit, args.layer, args.pooling, step, engine=engine, visitor=False)
    out = Path(args.out)
    np.savez_compressed(out, **res["embeddings"])
    if args.json:
        print(_dumps({"out": str(out), "n": res["n"], "dataset": res["dataset"],
                      "shapes": {name: list(a.shape) for name, a in res["embeddings"].items()},
                      "fidelity": res.fidelity}))
        return 0
    print(f"{out}: {res['n']:,} examples of {res['dataset']}: "
          + ", ".join(f"{name} {a.shape}" for name, a in res["embeddings"].items()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="albert-lens", description="A BERT and an ALBERT, side by side.")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("predict", help="both models' labels and probabilities for one input")
    _pair_args(p)
    _output_args(p)
    _text_args(p)
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("facts", help="parameters, shared layers, layer transitions, latency and throughput")
    _pair_args(p)
    p.add_argument("--file", help="inputs, one per line (pair tasks: tab between the two texts)")
    _output_args(p, "the layer-transition figure")
    p.add_argument("texts", nargs="*", help="inputs (default: the shipped examples)")
    p.set_defaults(func=cmd_facts)

    p = sub.add_parser("train-offline", help="train the offline BERT and ALBERT from the shipped MiniLM")
    p.add_argument("--train", required=True, help="the task's training file (SST-2 train.tsv by default)")
    p.add_argument("--dev", help="the task's dev file, evaluated after each epoch")
    p.add_argument("--task", default="sst2",
                   help="the classification task trained (sst2, rte, mrpc, ...); a pair task's models read two "
                        "texts; the export names them bert-<task> and albert-<task>")
    p.add_argument("--out", required=True, help="work dir: checkpoints, logs, results (re-run to resume)")
    p.add_argument("--export", help="write shipped weights and model cards here (e.g. assets/offline)")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--bert-epochs", type=float, help="default 1.5, or enough whole epochs for 300 steps on a small "
                   "training set (RTE: 4)")
    p.add_argument("--albert-epochs", type=float, help="default 2, or enough whole epochs for 450 steps (RTE: 6)")
    p.add_argument("--limit", type=int, help="use only the first N training sentences")
    p.add_argument("--max-len", type=int, help="tokens kept per example (default 64 for one sentence, 128 for a "
                   "pair of texts); shorter trains faster on long texts")
    p.set_defaults(func=cmd_train_offline)

    p = sub.add_parser("benchmark", help="accuracy, parameters, latency and throughput of both models, and "
                                         "whether the accuracy gap is beyond chance")
    _pair_args(p)
    _precision_args(p)
    p.add_argument("--dataset", required=True,
                   help="a shipped name, a released set by name (\"sst2 dev (released GLUE)\"), a file (GLUE tsv, "
                   "csv, jsonl) or datasets id")
    p.add_argument("--limit", type=int, help="first N examples only")
    p.add_argument("--json", action="store_true")
    _engine_args(p)
    p.set_defaults(func=cmd_benchmark)

    p = sub.add_parser("app", help="start the Gradio app (default http://127.0.0.1:7860)")
    _pair_args(p)
    _precision_args(p)
    p.add_argument("--host", default="127.0.0.1", help="interface to bind; 0.0.0.0 only when you mean it")
    p.add_argument("--port", type=int, default=7860)
    p.add_argument("--unsafe-public", action="store_true", help=UNSAFE_PUBLIC)
    p.set_defaults(func=cmd_app)

    p = sub.add_parser("lit", help="start a LIT server with both models (default http://127.0.0.1:5432)")
    _pair_args(p)
    _precision_args(p)
    p.add_argument("--dataset", nargs="*", help="dataset files or ids (default: the shipped examples)")
    p.add_argument("--limit", type=int, default=1000, help="first N examples of each dataset")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=5432)
    p.add_argument("--unsafe-public", action="store_true", help=UNSAFE_PUBLIC)
    p.set_defaults(func=cmd_lit)

    p = sub.add_parser("report", help="benchmark, CheckList, attacks, UMAP, saliency, parameters and speed: "
                                             "markdown + PNG + HTML")
    _pair_args(p)
    _precision_args(p)
    p.add_argument("--out", required=True, help="output folder (its cache/ makes re-runs resume)")
    p.add_argument("--datasets", nargs="*", help="labelled dataset files or ids")
    p.add_argument("--suites", nargs="*", help="CheckList suite exports (default: the task's released suite)")
    p.add_argument("--limit", type=int, default=1000, help="examples per dataset for the benchmark")
    p.add_argument("--sample", type=int, default=20, help="CheckList cases per test")
    p.add_argument("--attack-n", type=int, default=10, help="examples attacked per recipe")
    p.add_argument("--umap-n", type=int, default=500, help="examples in the UMAP figure")
    p.add_argument("--saliency-n", type=int, default=30,
                   help="examples explained by integrated gradients for the saliency section (0: none)")
    _engine_args(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("embed", help="sentence embeddings of both models for a dataset (.npz), locally or on Ray")
    _pair_args(p)
    _precision_args(p)
    p.add_argument("--dataset", required=True)
    p.add_argument("--out", required=True, help="output .npz (one array per model)")
    p.add_argument("--layer", type=int, default=-1)
    p.add_argument("--pooling", choices=["cls", "mean"], default="cls")
    p.add_argument("--limit", type=int)
    p.add_argument("--batch", type=int, default=256, help="examples per batch sent to a worker")
    p.add_argument("--json", action="store_true", help="print what was embedded, where, and in which precision")
    _engine_args(p)
    p.set_defaults(func=cmd_embed)
    p = sub.add_parser("recipes", help="TextAttack's recipes, and whether each runs here (what the others need)")
    p.set_defaults(func=cmd_recipes)
    _declared_commands(sub)
    return parser


def _option_args(p: argparse.ArgumentParser, name: str) -> None:
    """The flags of a declared capability's options (`app.core.declare.capabilities`): named, typed, bounded and
    explained
    as declared, with the declared defaults."""
    from app.core.declare import capabilities  # light: no PyTorch, so --help stays quick

    for o in capabilities.get(name).options:
        kw = {"choices": list(o.choices)} if o.choices else {}
        if o.kind is bool:
            kw["choices"] = ["true", "false"]
        shown = str(o.default).lower() if o.kind is bool else o.default
        default = "" if o.optional or shown in (None, "") else f" (default: {shown})"
        # given as text: the declaration checks it in the core, with the message naming the field and its range
        p.add_argument(o.flag, dest=o.name, help=f"{o.help}{default}", default=o.default, **kw)


def _declared_commands(sub) -> None:
    """A subcommand for every declared capability (`app.core.declare.capabilities`), generated from its declaration: its
    inputs (the text and text2, and/or --dataset with --limit), its options as flags (named, typed, bounded and
    explained as declared), Ray's flags where it reads a dataset, --out where it writes files, and --json (its
    result's `to_dict()`) or its text (`views.text_of`) and --png (`plots.figure_of`). Nothing here is written
    per capability."""
    from app.core.declare import capabilities  # light: no PyTorch, so --help stays quick

    for capability in capabilities.declared():
        command = capability.name.replace("_", "-")
        if command in sub.choices:
            continue
        p = sub.add_parser(command, help=capability.help[:1].lower() + capability.help[1:].rstrip("."),
                           description=capability.help)
        _pair_args(p)
        _precision_args(p)
        if capability.inputs != "dataset":
            _text_args(p, required=capability.inputs in ("text", "both"))
        if capability.inputs != "text":
            p.add_argument("--dataset", help="a shipped name, a released set by name, a file (GLUE tsv, csv, jsonl), "
                           "an id of `datasets`, or some of its rows (<dataset> @rows:3,17,40-45)"
                           + (" instead of an input" if capability.inputs == "either" else ""))
            p.add_argument("--limit", type=int, help="first N examples (default: the capability's)")
            p.add_argument("--show", type=int, default=5, help="rows the text lists (the JSON has them all)")
            _engine_args(p)
        _option_args(p, capability.name)
        if capability.writes:
            p.add_argument("--out", help=capability.writes)
        if capability.saves:
            p.add_argument("--save-as", metavar="NAME", help=capability.saves)
        colours = getattr(capability.result_type(), "COLOURS", None)  # a figure whose points take a colouring
        if colours:
            p.add_argument("--colour", choices=list(colours), default=next(iter(colours)),
                           help="what colours --out's figure (models: whether the two models agree on the example)")
        p.add_argument("--png", help="save the result's figure here (where it has one)")
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        p.set_defaults(func=cmd_declared, capability=capability.name)


def cmd_declared(args) -> int:
    """A declared capability: its inputs and options to `api.run` as the operator's request, its answer as JSON
    or as text, its figure and files where asked."""
    from app.core.declare import capabilities

    api = _api()
    capability = capabilities.get(args.capability)
    takes = api.accepts(capability.name)
    if getattr(args, "engine", "local") != "local" and "engine" not in takes:
        raise InputError(f"engine: {capability.name} runs in this process only")
    pair = _pair(args)
    given = {o.name: getattr(args, o.name) for o in capability.options}
    for key in ("dataset", "limit", "out"):
        if key in takes and getattr(args, key, None) is not None:
            given[key] = getattr(args, key)
    with (_engine(args) if "engine" in takes else nullcontext()) as engine, \
            _bar(capability.name.replace("_", " "), args.json or not getattr(args, "dataset", None)) as step:
        res = api.run(capability.name, pair, getattr(args, "text", None), getattr(args, "text2", None), progress=step,
                      visitor=False, **given, **({"engine": engine} if engine is not None else {}))
    print(_dumps(res.to_dict(), indent=2, ensure_ascii=False) if args.json
          else views.text_of(res, pair=pair.name, show=getattr(args, "show", 5)))
    if args.png:
        figure = plots.figure_of(res)
        if figure is None:
            raise InputError(f"png: {capability.name} has no figure here")
        _save_figure(lambda: figure, args.png)
    if getattr(args, "save_as", None):
        kept = api.save_result(pair, res, args.save_as, visitor=False)
        print(f"saved: {kept.n} examples as {kept.spec} ({kept.name}); --dataset {kept.spec} reads them",
              file=sys.stderr)
    if getattr(args, "out", None) and "out" not in takes:
        written = plots.export(res, Path(args.out), getattr(args, "colour", "gold"))
        print(f"written: {', '.join(str(w) for w in written)}", file=sys.stderr)
    return 0


def cmd_recipes(args) -> int:
    """TextAttack's recipes `attack` takes, and whether each runs here (what the others need)."""
    for r in _api().list_recipes():
        state = "runs here" if r["available"] else r["why"]
        print(f"{r['name']:<20} {'offline' if r['offline'] else 'needs downloads':<16} {state}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(message)s")
    try:
        runtime.prepare()
        runtime.cache_dir()  # an unusable cache folder said now, in one line, before any work
        _png_folder(getattr(args, "png", None))
        _whole(args)
        return int(args.func(args) or 0)
    except LensError as exc:
        print(f"albert-lens: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("albert-lens: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
