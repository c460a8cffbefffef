"""`albert-lens lit`: a LIT server with both models of a pair side by side, the task's datasets, UMAP/PCA,
salience (gradient norm, gradient x input, integrated gradients, LIME) and the generators (word replacer,
HotFlip, ablation flip, scrambler). Binds 127.0.0.1 unless told otherwise."""
from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from urllib.parse import quote

from lit_nlp import app as lit_app
from lit_nlp import dev_server
from lit_nlp.api import types as lit_types
from lit_nlp.components import core as lit_core
from lit_nlp.components import word_replacer
from lit_nlp.lib import caching as lit_caching

from app.core.api import (
    METHODS,
    Job,
    Pair,
    Stopped,
    TextCost,
    blank_reason,
    bounded_log_lines,
    capabilities,
    check_length,
    check_readable,
    limits,
    public_message,
    resolve_dataset,
    running,
    short_int,
    surrogate_reason,
    views,
)
from app.core.ground.errors import InputError, LensError

from . import gate
from .client import client_root
from .datasets import LensDataset
from .declared import PROBE, DeclaredMetrics, metric_name, row_of, served
from .generators import LensGenerator
from .generators import lit_name as generator_name
from .generators import offered as generator_options
from .generators import ours as lens_generators
from .metrics import PairedComparison
from .models import LensModel, lens_of, light_outputs, models_for
from .salience import LensSalience, lit_name
from .salience import offered as salience_options

log = logging.getLogger("albert_lens.lit")
# The declared saliency methods and counterfactual generators (app/core/declare/capabilities.py) under the names
# of LIT's
# implementations: LIT serves those of the declaration it implements, with the declaration's defaults, plus its
# scrambler, which has no counterpart here.
LIT_GENERATORS = {"word_replacement": "Word Replacer", "hotflip": "Hotflip", "ablation_flip": "Ablation Flip"}
LIT_ONLY = ("Scrambler",)


def _declared(capability: str, option: str, lit_names: dict[str, str]) -> tuple[str, ...]:
    return tuple(lit_names[c] for c in capabilities.get(capability).option(option).choices if c in lit_names)


def lit_salience() -> dict[str, str]:
    """Each declared saliency method LIT has its own implementation of, by that implementation's name
    (`saliency.Method.lit_name`): LIT serves ours of every method (`salience.LensSalience`) and keeps its own
    beside them, named as LIT's (`theirs`)."""
    return {name: cls.lit_name for name, cls in METHODS.items() if cls.lit_name}


def theirs(name: str) -> str:
    """LIT's own implementation's name in its menus: said to be LIT's, so that one name means one algorithm (the
    app's integrated gradients is not LIT's, nor its LIME)."""
    return f"{name} (LIT's)"


SALIENCE = tuple(theirs(n) for n in lit_salience().values())  # LIT's implementations, as LIT's menus name them
GENERATORS = (*_declared("counterfactual", "generator", LIT_GENERATORS), *LIT_ONLY)


class WordReplacer(word_replacer.WordReplacer):
    """LIT's word replacer, its substitutions by default the counterfactual capability's `replacements`, bounded
    before it builds anything: each input text and the substitutions held to the text cap, and what it would make
    counted first (datapoints, and each one's length) and refused past the caps with its numbers. One 999-word
    text with `a -> |||...` made 499,500 datapoints, a 1.13 GB answer."""

    def config_spec(self) -> lit_types.Spec:
        spec = super().config_spec()
        default = capabilities.get("counterfactual").option("replacements").default
        spec[word_replacer.SUBSTITUTIONS_KEY] = lit_types.TextSegment(default=default)
        return spec

    def generate_all(self, inputs, model, dataset, config=None):
        self.check(inputs, dataset, config or {})
        return super().generate_all(inputs, model, dataset, config)

    def check(self, inputs, dataset, config: dict) -> int:
        """How many datapoints the request would make, after refusing it where that, an input, the substitutions
        or a made text is past this server's caps."""
        caps = limits()
        chars, most = int(caps["max_chars"]), int(caps["max_examples"])
        subs = config.get(word_replacer.SUBSTITUTIONS_KEY) or ""
        if not isinstance(subs, str):
            raise InputError(f"{word_replacer.SUBSTITUTIONS_KEY}: expected text, got {type(subs).__name__}")
        check_length(word_replacer.SUBSTITUTIONS_KEY, subs, chars)
        if (why := surrogate_reason(subs)) is not None:
            raise InputError(f"{word_replacer.SUBSTITUTIONS_KEY}: {why}")
        ignore = bool(config.get(word_replacer.IGNORE_CASING_KEY, True))
        table = self.parse_subs_string(subs, ignore_casing=ignore) if subs else self.default_replacements
        pattern = self._get_replacement_pattern(table, ignore)
        made = 0
        for ex in inputs or []:
            for f in self._compute_fields_to_replace(dataset, config):
                text = ex.get(f) if isinstance(ex, Mapping) else None
                if not isinstance(text, str):
                    continue
                check_length(f, text, chars)
                for m in (pattern.finditer(text) if pattern.pattern else ()):
                    for target in table.get(m.group(0).lower() if ignore else m.group(0), ()):
                        made += 1
                        if made > most:
                            raise InputError(f"{word_replacer.SUBSTITUTIONS_KEY}: these substitutions would make "
                                             f"more than {most:,} datapoints; the limit here is {most:,}")
                        if (n := len(text) - len(m.group(0)) + len(target)) > chars:
                            raise InputError(f"{word_replacer.SUBSTITUTIONS_KEY}: a made text would be {n:,} "
                                             f"characters long; the limit here is {chars:,}")
        return made
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


# LIT's endpoints that run the models (or read and write files); the others (the page's info, the dataset, the UI
# state) answer at once and are never held behind them
HEAVY = frozenset({"_get_preds", "_get_interpretations", "_get_metrics", "_get_generated", "_annotate_new_data",
                   "_create_dataset", "_create_model", "_save_datapoints", "_load_datapoints"})


class Busy(LensError):
    """Every work slot stayed taken for the whole wait: the visitor is told to try again, not queued forever."""


class WorkGate:
    """At most `slots` model requests at once; a request waits for a slot at most `wait_s` seconds. LIT's own
    server answered one request at a time, so one visitor's 2,000 texts left every other visitor (and the page's
    /get_info) without an answer for 16 minutes."""

    def __init__(self, slots: int, wait_s: float):
        self.slots, self.wait_s = slots, wait_s
        self._free = threading.BoundedSemaphore(slots)

    @contextmanager
    def slot(self, what: str) -> Iterator[None]:
        if not self._free.acquire(timeout=self.wait_s):
            raise Busy(f"{what}: the server's {self.slots} work slot(s) stayed busy for {self.wait_s:g} s; "
                       "try again in a moment")
        try:
            yield
        finally:
            self._free.release()


def work_gate() -> WorkGate:
    """Hosted: two model requests at once, a third waits up to 30 s; on one's own machine: four, and a request
    waits as long as its time budget. `ALBERT_LENS_LIT_SLOTS` sets the number."""
    caps = limits()
    slots = int(caps["lit_slots"])
    return WorkGate(slots, 30.0 if caps["hosted"] else float(caps["request_seconds"]))


class LensLitApp(lit_app.LitApp):
    """LIT's app, answering a failed request with one line instead of LIT's full Python traceback (which named
    the server's paths to any visitor); the traceback goes to the log. A request that runs the models takes a work
    slot (`WorkGate`) and runs as a job with the server's request budget (`jobs`): the models check it between
    texts, and refuse up front a request whose texts would take longer (`LensModel.cost`)."""

    gate: WorkGate | None = None  # set by LensServer.serve, read at each request
    SAVED_SETS = 100  # datapoint sets /post_new_data keeps for a later page load; the oldest go first

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        # LIT's prediction caches, bounded in bytes; its static files answered without a traceback
        for m in self._models.values():
            if isinstance(m, lit_caching.CachingModelWrapper):
                m._cache._d = gate.BoundedCache(int(limits()["lit_cache_bytes"]), m._cache._d)
                m._validate_ids = functools.partial(_drop_foreign_ids, m)
        self._wsgi_app.__class__ = gate.QuietStatic
        self._saved_datapoints = OrderedDict(self._saved_datapoints)
        self._saved_bytes: dict[str, int] = {}  # each kept set's size (`gate.size_of`), for the byte cap

    def __call__(self, environ, start_response):
        """Hostile URLs and bodies answered in one line before LIT reads them: a control character in the path
        (LIT answered NUL with a traceback), a body over `limits()["lit_body_bytes"]` (LIT read any size into
        memory)."""
        path = environ.get("PATH_INFO", "")
        if any(ord(c) < 32 or ord(c) == 127 for c in path):
            return _plain(start_response, 400, "bad path")
        cap = int(limits()["lit_body_bytes"])
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return _plain(start_response, 400, "bad Content-Length")
        if length > cap:
            return _plain(start_response, 413, f"request body: {length:,} bytes; the limit here is {cap:,}")
        if environ.get("wsgi.input") is not None and not length:  # chunked: read at most the cap
            from werkzeug.wsgi import LimitedStream

            environ["wsgi.input"] = LimitedStream(environ["wsgi.input"], cap + 1)
        return super().__call__(environ, start_response)

    def _outputs(self, model: str | None) -> dict:
        """The model's output spec (empty for a name this server doesn't have)."""
        return self._get_model_spec(model)["output"] if model in self._info["models"] else {}

    def _inputs_capped(self, data, model: str | None = None) -> None:
        """The request's datapoints: a list, at most the model's input cap (hosted: any model's)."""
        lens = lens_of(self._models.get(model)) if isinstance(model, str) else None
        most = lens.max_inputs if lens is not None else (4 * int(limits()["max_examples"])
                                                         if limits()["hosted"] else None)
        gate.check_inputs((data or {}).get("inputs") if isinstance(data, dict) else None, most)

    def _get_preds(self, data, model=None, **kw):
        self._inputs_capped(data, model)
        return super()._get_preds(data, model=model, **kw)

    def _get_metrics(self, data, model=None, **kw):
        self._inputs_capped(data, model)
        if isinstance(data, dict) and data.get("config") is not None:
            if not isinstance(data["config"], dict):
                raise InputError("metrics: config must be a JSON object")
            data["config"] = gate.Small(2_000).check("metrics: config", data["config"], {})
        return super()._get_metrics(data, model=model, **kw)

    def _get_interpretations(self, data, model=None, dataset_name=None, interpreter=None, **kw):
        self._inputs_capped(data, model)
        if isinstance(data, dict) and interpreter in self._interpreters:
            if interpreter in gate.PROJECTORS:
                embeddings = [k for k, v in self._outputs(model).items() if isinstance(v, lit_types.Embeddings)]
                data["config"] = gate.projection_settings(interpreter, data.get("config"), model, dataset_name,
                                                          embeddings)
            else:
                data["config"] = gate.settings(interpreter, data.get("config"),
                                               spec=self._interpreters[interpreter].config_spec())
        with light_outputs():
            return super()._get_interpretations(data, model=model, dataset_name=dataset_name,
                                                interpreter=interpreter, **kw)

    def _get_generated(self, data, model=None, dataset_name=None, generator=None, **kw):
        self._inputs_capped(data, model)
        if isinstance(data, dict) and generator in self._generators:
            data["config"] = gate.settings(generator, data.get("config"),
                                           spec=self._generators[generator].config_spec(),
                                           outputs=list(self._outputs(model)))
        with light_outputs():
            return super()._get_generated(data, model=model, dataset_name=dataset_name, generator=generator, **kw)

    def _new_datapoints(self, data, dataset_name) -> None:
        """New datapoints a visitor sends to be kept: capped in count, each a JSON object of text fields capped
        like a prediction's (they are given to every later visitor who loads the link)."""
        self._inputs_capped(data)
        caps = limits()
        fields = self._datasets[dataset_name].spec() if dataset_name in self._datasets else {}
        for ex in (data or {}).get("inputs") or []:
            row = ex
            # LIT nests a datapoint in {"id", "data", "meta"}, and /post_new_data nests that once more
            for _ in range(2):
                if isinstance(row, Mapping) and isinstance(row.get("data"), Mapping) and not (fields.keys() & row):
                    row = row["data"]
            if not isinstance(row, Mapping):
                raise InputError("inputs: each datapoint is a JSON object of its fields")
            for f, spec in fields.items():
                if isinstance(spec, lit_types.TextSegment):
                    text = row.get(f, "")
                    if not isinstance(text, str):
                        raise InputError(f"field {f!r} must be text, got {type(text).__name__}")
                    check_length(f, text, int(caps["max_chars"]))
                    if (why := blank_reason(text)) is not None:
                        raise InputError(f"field {f!r} {why}")
                    check_readable(self._classifiers(), [(f, text)])

    def _classifiers(self) -> list:
        """The served models' classifiers (under LIT's caching wrappers)."""
        return [lens.clf for lens in map(lens_of, self._models.values()) if lens is not None]

    def _annotate_new_data(self, data, dataset_name=None, **kw):
        self._new_datapoints(data, dataset_name)
        return super()._annotate_new_data(data, dataset_name=dataset_name, **kw)

    def _post_new_data(self, data, dataset_name=None, **kw):
        """Datapoints kept for a later page load: only the fields the dataset declares (a 30 MB field of another
        name was kept whole), at most `SAVED_SETS` sets and `limits()["lit_saved_bytes"]` in all, the oldest
        forgotten first; a set larger than that alone is refused with its size."""
        self._new_datapoints(data, dataset_name)
        declared = set(self._datasets[dataset_name].spec()) if dataset_name in self._datasets else set()
        for ex in data.get("inputs") or []:
            if isinstance(ex, dict) and isinstance(ex.get("data"), dict):
                ex["data"] = {k: v for k, v in ex["data"].items() if k in declared or k == "_id"}
                ex["meta"] = {}
        size, cap = gate.size_of(data.get("inputs")), int(limits()["lit_saved_bytes"])
        if size > cap:
            raise InputError(f"inputs: {size:,} bytes of datapoints to keep; the limit here is {cap:,}")
        out = super()._post_new_data(data, dataset_name=dataset_name, **kw)
        saved = out["load"].partition("saved_datapoints_id=")[2]
        with self._saved_datapoints_lock:
            self._saved_bytes = {k: v for k, v in self._saved_bytes.items() if k in self._saved_datapoints}
            self._saved_bytes[saved] = size  # (a set removed by /remove_new_data no longer counts)
            while self._saved_datapoints and (len(self._saved_datapoints) > self.SAVED_SETS
                                              or sum(self._saved_bytes.values()) > cap):
                gone, _ = self._saved_datapoints.popitem(last=False)
                self._saved_bytes.pop(gone, None)
        return out

    # which of a request's URL parameters name what: checked before LIT reads them (a KeyError or an
    # AttributeError inside LIT answered "failed" with no reason)
    _WITH_INPUTS = frozenset({"_get_preds", "_get_interpretations", "_get_generated", "_get_metrics",
                              "_post_new_data", "_annotate_new_data"})
    _NAMED = {"model": "_models", "dataset_name": "_datasets", "interpreter": "_interpreters",
              "generator": "_generators"}

    def _check_request(self, name: str, request) -> None:
        """The request's shape, before LIT's own handler parses it: its URL's names exist here, its body is a
        JSON object whose `inputs` is a list of datapoints ({"id", "data"}, the id its data's `_id`) or of the
        dataset's ids. A malformed request is an InputError naming what is wrong."""
        if name in ("_get_info", "_push_ui_state"):
            return
        args = request.args
        for key, attr in self._NAMED.items():
            if key in args and args[key] not in getattr(self, attr):
                raise InputError(f"{key}: {args[key][:60]!r} is not one of {sorted(getattr(self, attr))[:20]}")
        if "metrics" in args:
            unknown = [m for m in args["metrics"].split(",") if m and m not in self._metrics]
            if unknown:
                raise InputError(f"metrics: {unknown[0][:60]!r} is not one of {sorted(self._metrics)}")
        if name in ("_fetch_new_data", "_remove_new_data"):
            with self._saved_datapoints_lock:
                if args.get("saved_datapoints_id") not in self._saved_datapoints:
                    raise InputError(f"saved_datapoints_id: no saved datapoints by that id here (the last "
                                     f"{self.SAVED_SETS} sets are kept)")
        try:
            body = json.loads(request.data, parse_int=short_int, parse_constant=_no_constant) if request.data \
                else None
        except (ValueError, RecursionError) as exc:
            raise InputError(f"request body: not JSON ({str(exc)[:80]})") from None
        needs_inputs = name in self._WITH_INPUTS
        if body is None and not needs_inputs:
            return
        if not isinstance(body, dict):
            raise InputError("request body: expected a JSON object such as {\"inputs\": [...]}")
        inputs = body.get("inputs")
        if inputs is None and not needs_inputs:
            return
        if not isinstance(inputs, list):
            raise InputError("inputs: expected a list of datapoints")
        if not inputs and name == "_get_metrics":
            raise InputError("inputs: metrics need at least one datapoint")
        dataset = self._datasets.get(args.get("dataset_name"))
        for k, ex in enumerate(inputs):
            if isinstance(ex, str):
                if dataset is None or ex not in dataset.index:
                    raise InputError(f"inputs: datapoint {k}: {ex[:40]!r} is no example id of this dataset")
                continue
            if not isinstance(ex, dict) or not isinstance(ex.get("data"), dict):
                raise InputError(f"inputs: datapoint {k}: expected {{\"id\", \"data\": {{...}}, \"meta\"}} or "
                                 "an example's id")
            if name == "_post_new_data" and not (isinstance(ex.get("id"), str) and ex["id"]):
                raise InputError(f"inputs: datapoint {k} has no id; a datapoint to keep is {{\"id\", \"data\": "
                                 "{...}, \"meta\"}, its id its data's _id")
            if "dataset_name" in args and ex.get("id") != ex["data"].get("_id"):
                raise InputError(f"inputs: datapoint {k}: its id is not its data's _id")
            if name in ("_get_interpretations", "_get_generated") and not ex["data"].get("_id"):
                # a datapoint without an id is answered as an interpreter's probe (`light_outputs`)
                raise InputError(f"inputs: datapoint {k} has no id; LIT's page gives every datapoint one "
                                 "(/annotate_new_data)")
            given = ex["data"].get("_id")
            if given and name != "_post_new_data" and given != self._content_id(ex["data"]):
                # LIT caches by this id: another text under an example's id answered for it, for every visitor
                raise InputError(f"inputs: datapoint {k}: its _id is not its content's (LIT's input_hash)")

    @staticmethod
    def _content_id(data: dict) -> str | None:
        try:
            return lit_caching.input_hash(data)
        except (TypeError, ValueError, RecursionError):  # not JSON LIT can hash
            return None

    def make_handler(self, fn):
        handler = super().make_handler(fn)
        name = getattr(fn, "__name__", "request")

        @functools.wraps(handler)
        def quiet(app, request, environ):
            status = 500
            try:
                self._check_request(name, request)
                if name not in HEAVY or self.gate is None:
                    return handler(app, request, environ)
                what = name.lstrip("_")
                with self.gate.slot(what):
                    job = Job(seconds=float(limits()["request_seconds"]), name=f"LIT {what}")
                    with running(job):
                        return handler(app, request, environ)
            except Busy as exc:
                status, message = 503, str(exc)
            except Stopped as exc:
                status, message = 503, f"{name.lstrip('_')}: {exc}"
            except InputError as exc:  # the visitor's request: named, and a 400
                status, message = 400, public_message(str(exc))
            except LensError as exc:  # ours: written for the reader, naming the field
                message = public_message(str(exc))
            except Exception as exc:  # noqa: BLE001 - LIT's own errors can carry paths and internals
                log.exception("LIT endpoint %s failed", name)
                message = f"{name.lstrip('_')} failed ({type(exc).__name__}); the server logged the details"
            return app.respond(request, message[:1000], "text/plain", status)

        return quiet


def _drop_foreign_ids(wrapper, inputs: list) -> None:
    """LIT's strict id check, as the cache needs it: a datapoint whose `_id` is not its content's hash is
    predicted as new (its `_id` dropped, so nothing is cached or read under another's id) instead of failing the
    request. A visitor's own datapoints are refused for it before (`_check_request`); what reaches here are
    LIT's own probes, which copy their datapoint's `_id` (ablation flip's, which failed every time)."""
    from lit_nlp.api import types as lit_api_types

    for i, ex in enumerate(inputs):
        given = ex.get("_id")
        if given and wrapper._id_hash_fn(lit_api_types.Input(ex)) != given:
            inputs[i] = {k: v for k, v in ex.items() if k != "_id"}


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _plain(start_response, status: int, message: str):
    reasons = {400: "Bad Request", 413: "Content Too Large"}
    body = message.encode()
    start_response(f"{status} {reasons.get(status, 'Error')}",
                   [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))])
    return [body]


class ThreadedServer:
    """LIT's app on waitress, a production WSGI server: connections are read by one event loop (a connection that
    never finishes its headers holds a socket, not a thread) and requests run on a bounded pool of threads, so the
    page and /get_info answer while a prediction runs. Each peer address holds at most `limits()["lit_per_address"]`
    connections (more are closed as they arrive), the server at most `lit_connections`, and a connection idle past
    `lit_idle_seconds` is closed. (werkzeug's development server, before it, started a thread per connection: 1,200
    half-open connections from one client took it to 1,033 threads and every other visitor's request was dropped.)
    `serve(block=False)` returns at once, as LIT's notebook server does; `stop()` ends it."""

    def __init__(self, app, host: str = "127.0.0.1", port: int | None = None, **unused):
        self.app, self._host, self._port = app, host, port
        self._server = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("server not started")
        return int(self._server.effective_port)

    def serve(self, block: bool = True) -> None:
        from waitress.server import create_server

        caps = limits()
        self._server = create_server(
            self.app, host=self._host, port=self._port or 0, ident="albert-lens",
            threads=int(caps["lit_slots"]) + 4,  # the model work's slots, and room for the page's light requests
            connection_limit=int(caps["lit_connections"]), channel_timeout=int(caps["lit_idle_seconds"]),
            cleanup_interval=max(1, int(caps["lit_idle_seconds"]) // 4),
            max_request_body_size=int(caps["lit_body_bytes"]) + 2**20)  # the app answers a body past its cap itself
        _cap_per_address(self._server, int(caps["lit_per_address"]))
        if block:
            try:
                self._server.run()
            except KeyboardInterrupt:
                pass
            finally:
                self._close()
            return
        self._thread = threading.Thread(target=self._server.run, name="lit-server", daemon=True)
        self._thread.start()

    def _close(self) -> None:
        server = self._server
        for channel in list(server._map.values()):  # the listening socket, its trigger and every connection
            with contextlib.suppress(Exception):
                channel.close()
        server.task_dispatcher.shutdown()

    def stop(self) -> None:
        if self._server is None:
            return
        thread = self._thread
        if thread is not None and thread.is_alive():
            # closed inside the event loop (its trigger runs the call there): closed from this thread while the
            # loop sat in select(), its sockets failed it with EBADF, a traceback from the server's thread
            with contextlib.suppress(OSError):  # its trigger closed already: the loop is closing, waited for below
                self._server.trigger.pull_trigger(self._close)
            thread.join(timeout=30)
        if thread is None or thread.is_alive():  # no loop running, or one that did not answer: closed from here
            self._close()
            if thread is not None:
                thread.join(timeout=30)
        self._server = self._thread = None


def _cap_per_address(server, most: int) -> None:
    """`server` (waitress's) closes a connection as it arrives where its peer address already holds `most`."""
    from waitress.channel import HTTPChannel

    said: dict[str, float] = {}
    closed: dict[str, int] = {}

    def peer(addr) -> str:
        return str(addr[0] if isinstance(addr, tuple) else addr)

    def handle_accept() -> None:
        try:
            accepted = server.accept()
            if accepted is None:
                return
            conn, addr = accepted
            server.set_socket_options(conn)
        except OSError:
            return
        addr = server.fix_addr(addr)
        held = sum(1 for ch in list(server._map.values())
                   if isinstance(ch, HTTPChannel) and peer(getattr(ch, "addr", "")) == peer(addr))
        if held >= most:
            conn.close()
            now, who = time.monotonic(), peer(addr)
            closed[who] = closed.get(who, 0) + 1
            if now - said.get(who, -60.0) >= 60.0:  # one line a minute per address: a flood must not flood the log
                said[who] = now
                log.warning("LIT: %s holds %d connections, the most one address may; %d more closed since the "
                            "last such line", who, held, closed.pop(who))
            return
        server.channel_class(server, conn, addr, server.adj, map=server._map)

    server.handle_accept = handle_accept


class LensServer(dev_server.Server):
    """`dev_server.Server` serving `LensLitApp` on a `ThreadedServer` (`server_type="notebook"`: in a thread of
    its own, returned; "external": the WSGI app alone, for another server; otherwise served until interrupted)."""

    def serve(self):
        app = LensLitApp(*self._app_args, **self._app_kw)
        app.gate = work_gate()
        if self._server_type == "external":
            return app
        server = ThreadedServer(app, **self._server_kw)
        if self._server_type == "notebook":
            server.serve(block=False)
            return server
        server.serve()
        app.save_cache()
        return None


def measure_cost(model: LensModel, example: dict, longest: int, repeats: int = 3) -> TextCost:
    """What a text costs `model` on this machine, by its tokens: `example` (a typical row) and the same text
    grown to `longest` characters (what a visitor may send), each the fastest of `repeats` after two warm-ups
    (one-off costs of a first call, a first shape, were 2-10x at start-up). The server then follows what texts
    really cost (`LensModel.predict_minibatch`)."""
    fields = model.task.fields
    texts = [str(example.get(f, "")) for f in fields]
    short = sum(len(t) for t in texts)
    grown = dict(example)
    if short and longest > short:
        for f, t in zip(fields, texts):
            grown[f] = (t + " ") * max(1, (longest * len(t) // short) // (len(t) + 1))
    cost = TextCost()
    for ex in (example, grown):
        model.predict_minibatch([ex])
        model.predict_minibatch([ex])
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            model.predict_minibatch([ex])
            times.append(time.perf_counter() - start)
        cost.anchor(model.tokens(model.example(ex)), min(times))
    return cost


def make_server(pair: Pair, datasets: Sequence[str] | None = None, *, host: str = "127.0.0.1", port: int = 5432,
                limit: int | None = None, **kw) -> dev_server.Server:
    bounded_log_lines()  # a visitor's request is logged by LIT at most LOG_LINE_CHARS long
    models = models_for(pair.models, views.precision_line(pair.precision_asked))
    for clf in pair.models:  # LIT answers from its server thread, not the main one
        clf.reserve_tokenizer()
    data = datasets_for(pair, datasets, limit)
    interpreters = lit_core.default_interpreters(models)
    if "umap" not in interpreters:
        raise RuntimeError("LIT does not see umap-learn; install the pinned stack (./run test sets it up)")
    # salience by every declared method (a method taken out of the declaration leaves LIT too), ours under the
    # app's names with the method's declared options; LIT's own implementation of a declared method beside it,
    # named as LIT's ("LIME (LIT's)"), LIT's others left out
    kept = lit_salience().values()
    lit_methods = {"Grad L2 Norm", "Grad ⋅ Input", "Integrated Gradients", "LIME", *kept}
    interpreters = {(theirs(k) if k in kept else k): v for k, v in interpreters.items()
                    if k not in lit_methods or k in kept}
    ours = {lit_name(m): LensSalience(m, pair) for m in METHODS}
    gate.SETTINGS.update({name: {o.name: gate.Declared(o) for o in salience_options(m)} for m, name in
                          ((m, lit_name(m)) for m in METHODS)})
    interpreters |= ours
    # projections keyed by their checked settings and bounded in bytes, UMAP's fit stopped at the deadline; only
    # components whose settings are declared (gate.SETTINGS) are served
    interpreters |= gate.projectors(int(limits()["lit_cache_bytes"]))
    interpreters = {k: v for k, v in interpreters.items() if k in gate.SETTINGS or k in gate.PROJECTORS}
    offered = lit_core.default_generators() | {LIT_GENERATORS["word_replacement"]: WordReplacer()}
    generators = {k: v for k, v in offered.items() if k in GENERATORS and k in gate.SETTINGS}
    # and the core's one-input generators, ours, each with its declared options
    for name in lens_generators():
        gate.SETTINGS[generator_name(name)] = {o.name: gate.Declared(o) for o in generator_options(name)}
        generators[generator_name(name)] = LensGenerator(name, pair)
    # hosted mode: no loading of arbitrary models from the LIT UI
    caps = limits()
    hosted = caps["hosted"]
    if hosted:  # a visitor's datapoint (and what LIT's LIME or generators make of it) is capped like the app's
        # input, or at the operator's longest text, which the served datasets and their edits must still pass
        longest = max((len(str(v)) for d in data.values() for row in d.examples for f, v in row.items()
                       if f in pair.task.fields), default=0)
        biggest = max((len(d.examples) for d in data.values()), default=0)
        typical = next((row for d in data.values() for row in d.examples), None)
        for m in models.values():
            m.max_chars = max(caps["max_chars"], longest + longest // 10)  # room for edits' growth
            m.max_inputs = max(4 * caps["max_examples"], biggest)  # LIME's default 256 samples pass
            m.max_output_bytes = int(caps["lit_output_bytes"])  # what one request's answer may hold
            if typical is not None:  # the work a request asks for: its new texts priced by what they cost here
                m.cost = measure_cost(m, typical, m.max_chars)
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
    # and every declared capability over a dataset that LIT has no component for, from its declaration alone
    # (its columns the numbers it answers on the served datasets' first rows)
    rows = itertools.islice((row for d in data.values() for row in d.examples), PROBE)
    probe = [row_of(row, pair.task.fields) for row in rows]
    declared = {metric_name(c.name): DeclaredMetrics(c.name, pair, probe) for c in served()}
    metrics |= {name: m for name, m in declared.items() if m.columns}  # one that can't answer here has no columns
    return LensServer(models, data, generators=generators, interpreters=interpreters, metrics=metrics,
                             model_loaders=loaders, host=host, port=port, page_title="albert-lens · LIT", **kw)
