"""`albert-lens lit`: a LIT server with both models of a pair side by side, the task's datasets, UMAP/PCA,
salience (gradient norm, gradient x input, integrated gradients, LIME) and the generators (word replacer,
HotFlip, ablation flip, scrambler). Binds 127.0.0.1 unless told otherwise."""
from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from urllib.parse import quote

from lit_nlp import app as lit_app
from lit_nlp import dev_server
from lit_nlp.components import core as lit_core

from app.core.api import Pair, bounded_log_lines, limits, public_message, resolve_dataset
from app.core.errors import LensError

from .client import client_root
from .datasets import LensDataset
from .metrics import PairedComparison
from .models import LensModel, models_for

log = logging.getLogger("albert_lens.lit")
SALIENCE = ("Grad L2 Norm", "Grad ⋅ Input", "Integrated Gradients", "LIME")
GENERATORS = ("Word Replacer", "Hotflip", "Ablation Flip", "Scrambler")
PAIRED = "vs the other model"  # the metrics table's columns read "vs the other model: p" etc.


def datasets_for(pair: Pair, specs: Sequence[str] | None, limit: int | None = None) -> dict[str, LensDataset]:
    """The given files or ids, or the shipped examples for the pair's task (named by the server's operator, so
    hosted mode reads them wherever they are)."""
    out = {}
    for spec in specs or [None]:
        ds = resolve_dataset(pair, spec, limit, visitor=False)
        out[ds.name] = LensDataset(ds, pair.task)
    return out


def page_url(pair: Pair, host: str, port: int) -> str:
    """The LIT page with both models selected: LIT alone opens on the first model only, and side by side is the
    point of the pair."""
    models = ",".join(quote(m.name, safe="") for m in pair.models)
    return f"http://{host}:{port}/?models={models}"


class LensLitApp(lit_app.LitApp):
    """LIT's app, answering a failed request with one line instead of LIT's full Python traceback (which named
    the server's paths to any visitor); the traceback goes to the log."""

    def make_handler(self, fn):
        handler = super().make_handler(fn)

        @functools.wraps(handler)
        def quiet(app, request, environ):
            try:
                return handler(app, request, environ)
            except LensError as exc:  # ours: written for the reader, naming the field
                message = public_message(str(exc))
            except Exception as exc:  # noqa: BLE001 - LIT's own errors can carry paths and internals
                log.exception("LIT endpoint %s failed", getattr(fn, "__name__", fn))
                message = (f"{getattr(fn, '__name__', 'request').lstrip('_')} failed ({type(exc).__name__}); "
                           "the server logged the details")
            return app.respond(request, message[:1000], "text/plain", 500)

        return quiet


class LensServer(dev_server.Server):
    """`dev_server.Server` serving `LensLitApp`."""

    def serve(self):
        app = LensLitApp(*self._app_args, **self._app_kw)
        if self._server_type == "external":
            return app
        server = dev_server.WSGI_SERVERS[self._server_type](app, **self._server_kw)
        server.serve()
        if self._server_type == "notebook":
            return server
        app.save_cache()
        return None


def make_server(pair: Pair, datasets: Sequence[str] | None = None, *, host: str = "127.0.0.1", port: int = 5432,
                limit: int | None = None, **kw) -> dev_server.Server:
    bounded_log_lines()  # a visitor's request is logged by LIT at most LOG_LINE_CHARS long
    models = models_for(pair.models)
    for clf in pair.models:  # LIT answers from its server thread, not the main one
        clf.reserve_tokenizer()
    data = datasets_for(pair, datasets, limit)
    interpreters = lit_core.default_interpreters(models)
    if "umap" not in interpreters:
        raise RuntimeError("LIT does not see umap-learn; install the pinned stack (./run test sets it up)")
    generators = {k: v for k, v in lit_core.default_generators().items() if k in GENERATORS}
    # hosted mode: no loading of arbitrary models from the LIT UI
    cap = limits()
    hosted = cap["hosted"]
    if hosted:  # a visitor's datapoint (and what LIT's LIME or generators make of it) is capped like the app's
        # input, or at the operator's longest text, which the served datasets and their edits must still pass
        longest = max((len(str(v)) for d in data.values() for row in d.examples for f, v in row.items()
                       if f in pair.task.fields), default=0)
        biggest = max((len(d.examples) for d in data.values()), default=0)
        for m in models.values():
            m.max_chars = max(cap["max_chars"], longest + longest // 10)  # room for edits' growth
            m.max_inputs = max(4 * cap["max_examples"], biggest)  # LIME's default 256 samples pass
    loaders = {} if hosted else {"LensModel": (LensModel, LensModel.init_spec())}
    # hosted: no dataset loaders either (LIT's /create_dataset passed a visitor's keywords to the loader)
    if hosted:
        kw.setdefault("dataset_loaders", {})
    # LIT's /save_datapoints and /load_datapoints write and read any server path the page names; a public
    # Space must not offer that, and LIT's demo mode turns both off
    kw.setdefault("demo_mode", hosted)
    if "client_root" not in kw:  # setdefault would build the folder even for a caller's own root
        kw["client_root"] = str(client_root())  # LIT's page, its icon fonts served from here
    # LIT caches predictions by the `_id` a request carries: a visitor who sent another text under a dataset
    # example's id had every later visitor's request for that example answered from it. Each id is checked against
    # its example's content (LIT's input_hash, which its datasets and new datapoints are given) before the cache.
    kw.setdefault("strict_cache_id_validation", True)
    # LIT's own flags default this to "default"; without it the page reads layouts[undefined] and shows no module
    kw.setdefault("default_layout", "default")
    # LIT's metrics table, plus the paired test of each model against the pair's other one on the selection
    metrics = lit_core.default_metrics() | {PAIRED: PairedComparison([models[clf.name] for clf in pair.models])}
    return LensServer(models, data, generators=generators, interpreters=interpreters, metrics=metrics,
                             model_loaders=loaders, host=host, port=port, page_title="albert-lens · LIT", **kw)
