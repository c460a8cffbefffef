"""Load: N concurrent gradio_client users mixing /predict, /saliency and a few small /benchmark jobs against one
app, for R rounds of a fixed time in one server process. Reports per round: requests served, errors (target 0:
an exception *or* an answer whose content is wrong), p50/p95 latency per endpoint (target: /predict p95 <= 200 ms
with 16 users) and the server's RSS after the round (target: growth from round 2 to round 3 <= 5%).

    python benchmarks/load_test.py [--users 16] [--seconds 120] [--rounds 3] [--pair offline] [--json out.json]
    python benchmarks/load_test.py --mix predict-beside-jobs [--hosted]   # issue 41's load
    python benchmarks/load_test.py --mix flood --hosted --users 4 --seconds 60   # issue 58's flood

`--mix predict-beside-jobs`: the N users send only /predict, while one more client keeps a batch job running
beside them, alternating LIME over a dataset (`/saliency_dataset`, JOB_ROWS rows) and an attack (`/attack`,
deepwordbug on JOB_ROWS rows): issue 41's target is /predict p95 <= 300 ms there. `--hosted` starts the app as a
hosted server (ALBERT_LENS_HOSTED=1: worker processes, caps).

`--mix flood` (issue 58): N ordinary visitors, each from an address of its own (127.0.1.k), send /predict as the
page does (one POST, a quarter second apart): quiet for `--seconds`, then beside FLOOD_CLIENTS clients from one
other address (127.0.0.2) sending hostile texts (FLOOD_CHARS characters of mixed scripts, emoji and combining
marks) as fast as they are answered or refused, then quiet again after the flood has stopped. Reported: the
visitors' p50/p95 in each phase and the server's RSS (and its workers') before the flood, at its peak and 15 s
after. Targets: the visitors' p95 under the flood within 3x the quiet one, RSS after within 1.5x of before.

`--mix queue-flood` (issue 70): one visitor (127.0.1.1) asks for /saliency as the page does (joins the queue and
reads its event stream), one request after another: quiet for `--seconds`, then beside one client (127.0.0.2)
keeping QUEUE_FLOOD_JOBS /saliency jobs queued at once (the issue's 70 calls from one gradio_client: each
finished or refused call is sent again). `--mix sybil-flood`: the same visitor beside SYBIL_ADDRESSES clients,
each from an address of its own (127.0.2.k), each keeping SYBIL_JOBS jobs queued. Reported per phase: the
visitor's /saliency p50/p95 and how many of its calls were refused, and how the flood's joins were answered
(queued, refused with 429, queue full). Target: the visitor's p95 under the queue flood within 3x the quiet one.

The app is started here on a free loopback port and stopped at the end; request loops are bounded in time.
"""
from __future__ import annotations

import argparse
import json
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["What a wonderful, moving film!", "The plot made no sense and the jokes fell flat.",
         "I loved the soundtrack but the acting was wooden.", "Two hours of my life I will never get back.",
         "A warm, funny and surprisingly moving film.", "<b>great</b> & fun 😍"]
BENCH_N = 30  # a small batch job: the shipped examples, both models
JOB_ROWS = 10  # the batch jobs of --mix predict-beside-jobs: LIME over 10 rows, an attack on 10 rows


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--pair", default="offline")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--mix", choices=["mixed", "predict-beside-jobs", "flood", "queue-flood", "sybil-flood"],
                    default="mixed")
    ap.add_argument("--hosted", action="store_true", help="start the app with ALBERT_LENS_HOSTED=1")
    ap.add_argument("--client", choices=["gradio_client", "http"], default="gradio_client",
                    help="how the users send /predict: gradio_client (which joins the queue and polls its messages "
                         "every 50 ms) or one HTTP POST each, as the page does")
    args = ap.parse_args()
    import psutil
    from gradio_client import Client

    port = free_port()
    import os

    env = {**os.environ, **({"ALBERT_LENS_HOSTED": "1", "ALBERT_LENS_ALLOWED_PAIRS": args.pair} if args.hosted else {})}
    proc = subprocess.Popen([sys.executable, "-m", "app", "app", "--pair", args.pair, "--port", str(port)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.time() + 180
    client = None
    while time.time() < deadline:
        try:
            client = Client(url, verbose=False)
            break
        except Exception:  # noqa: BLE001 - still starting
            time.sleep(1)
    if client is None:
        proc.kill()
        raise SystemExit("app did not start: " + (proc.stderr.read() if proc.stderr else ""))
    ps = psutil.Process(proc.pid)
    labels = set(client.predict(TEXTS[0], "", api_name="/predict")[0]["models"][0]["probabilities"])
    predict_dep = next(d for d in client.config["dependencies"] if d.get("api_name") == "predict")
    predict_fn, predict_queued = predict_dep["id"], predict_dep.get("queue") is not False
    print(json.dumps({"url": url, "predict_fn": predict_fn, "predict_queued": predict_queued}), flush=True)

    def rss() -> int:
        try:
            return ps.memory_info().rss + sum(c.memory_info().rss for c in ps.children(recursive=True))
        except psutil.Error:
            return 0

    def check(kind: str, text: str, out) -> None:
        """The answer's content, not only its arrival: a wrong answer counts as an error."""
        res = out[0]
        if kind == "predict":
            assert res["input"] == [text] and len(res["models"]) == 2, res
            for m in res["models"]:
                assert m["label"] in labels and abs(sum(m["probabilities"].values()) - 1) < 1e-4, m
        elif kind == "saliency":
            assert len(res["maps"]) == 2, res
            for m in res["maps"]:
                assert m["words"] and len(m["words"]) == len(m["scores"]), m
                assert all(s == s for s in m["scores"]) and any(m["scores"]), m  # finite, not all zero
        elif kind == "lime over a dataset":
            assert res["method"] == "lime" and res["stopped"] is None and res["n"] == JOB_ROWS, res
            assert len(res["examples"]) == JOB_ROWS and len(res["comprehensiveness"]) == 2, res
            assert all(e["top_words"] for e in res["examples"]), res
        elif kind == "attack":
            assert res["recipe"] == "deepwordbug" and res["stopped"] is None, res
            assert len(res["examples"]) == JOB_ROWS and len(res["models"]) == 2, res
        else:
            assert res["n"] == BENCH_N and all(0 <= r["accuracy"] <= 1 for r in res["models"]), res

    if args.mix in ("flood", "queue-flood", "sybil-flood"):
        dep = next(d for d in client.config["dependencies"] if d.get("api_name") == "saliency")
        shown = {c["id"]: c.get("props", {}).get("value") for c in client.config["components"]}
        # the page sends every input's value: the controls' own defaults, the text, method and class set here
        data = [shown.get(i) for i in dep["inputs"]]
        data[:4] = ["What a wonderful, moving film!", "", "gradient_x_input", "predicted"]
        res = flood(args, url, rss, check) if args.mix == "flood" else \
            queue_flood(args, url, dep["id"], data, check)
        proc.terminate()
        proc.wait(timeout=30)
        print(json.dumps(res, indent=2))
        if args.json:
            Path(args.json).write_text(json.dumps(res, indent=2))
        return

    rounds = []
    for rnd in range(1, args.rounds + 1):
        lat: dict[str, list[float]] = {"predict": [], "saliency": [], "benchmark": [], "predict (browser-like)": [],
                                       "lime over a dataset": [], "attack": []}
        errors: list[str] = []
        peak = [rss()]
        stop_at = time.time() + args.seconds
        lock = threading.Lock()

        def user(k: int) -> None:
            import httpx

            c = Client(url, verbose=False) if args.client == "gradio_client" else None
            http = httpx.Client(base_url=url, timeout=120) if c is None else None
            rng = random.Random(1000 * rnd + k)
            while time.time() < stop_at:
                text = rng.choice(TEXTS)
                r = rng.random()
                kind = "benchmark" if r < 0.03 else "saliency" if r < 0.4 else "predict"
                if args.mix == "predict-beside-jobs":
                    kind = "predict"
                t0 = time.perf_counter()
                try:
                    if kind == "predict" and http is not None:  # as the page sends it (off the queue)
                        reply = http.post("gradio_api/run/predict", json={"data": [text, ""],
                                                                         "session_hash": f"user-{k}"})
                        reply.raise_for_status()
                        out = reply.json()["data"]
                    elif kind == "predict":
                        out = c.predict(text, "", api_name="/predict")
                    elif kind == "saliency":
                        out = c.predict(text, "", rng.choice(["gradient_x_input", "gradient_norm",
                                                              "integrated_gradients"]), "predicted",
                                        api_name="/saliency")
                    else:
                        out = c.predict("sentiment_plain", None, BENCH_N, api_name="/benchmark")
                    check(kind, text, out)
                    with lock:
                        lat[kind].append(time.perf_counter() - t0)
                except Exception as exc:  # noqa: BLE001 - counted and reported
                    with lock:
                        errors.append(f"{kind}: {type(exc).__name__}: {str(exc)[:160]}")

        def batch_jobs() -> None:
            """--mix predict-beside-jobs: one batch job at a time beside the users, LIME and an attack in turn."""
            c = Client(url, verbose=False)
            turn = 0
            while time.time() < stop_at:
                kind = ("lime over a dataset", "attack")[turn % 2]
                turn += 1
                t0 = time.perf_counter()
                try:
                    if kind == "attack":
                        out = c.predict("", "", "deepwordbug", None, "sentiment_plain", JOB_ROWS, 100, 10,
                                        api_name="/attack")
                    else:
                        out = c.predict("sentiment_plain", "lime", "1e-03", JOB_ROWS, "prob",
                                        api_name="/saliency_dataset")
                    check(kind, "", out)
                    with lock:
                        lat[kind].append(time.perf_counter() - t0)
                except Exception as exc:  # noqa: BLE001 - counted and reported
                    with lock:
                        errors.append(f"{kind}: {type(exc).__name__}: {str(exc)[:160]}")

        def sample_memory() -> None:
            while time.time() < stop_at + 1:
                peak[0] = max(peak[0], rss())
                time.sleep(0.5)

        def browser_probe() -> None:
            """/predict as the browser's client sends it: one POST to /run/predict when the event is off the queue
            (the app's choice), else join the queue and read the event stream as it comes. gradio_client always
            queues, and adds its own 50 ms polling of messages to every call, which no page does."""
            import httpx

            rng = random.Random(rnd)
            with httpx.Client(base_url=url, timeout=60) as http:
                while time.time() < stop_at:
                    text = rng.choice(TEXTS)
                    session = f"probe-{rnd}-{rng.random()}"
                    t0 = time.perf_counter()
                    try:
                        if not predict_queued:  # the page's route for an event off the queue: one POST
                            r = http.post("gradio_api/run/predict", json={"data": [text, ""], "session_hash": session})
                            r.raise_for_status()
                            check("predict", text, r.json()["data"])
                            with lock:
                                lat["predict (browser-like)"].append(time.perf_counter() - t0)
                            time.sleep(0.25)
                            continue
                        kind, out = queued_call(http, predict_fn, [text, ""], session)
                        assert kind == "done", (kind, out)
                        check("predict", text, out)
                        with lock:
                            lat["predict (browser-like)"].append(time.perf_counter() - t0)
                    except Exception as exc:  # noqa: BLE001 - counted and reported
                        with lock:
                            errors.append(f"predict (browser-like): {type(exc).__name__}: {str(exc)[:160]}")
                    time.sleep(0.25)

        me = psutil.Process()

        def cpu(proc) -> float:
            try:
                t = proc.cpu_times()
                return t.user + t.system + t.children_user + t.children_system
            except psutil.Error:
                return 0.0

        def server_cpu() -> dict:
            """CPU seconds of the server's process and of its workers (alive now) so far."""
            out = {"server": cpu(ps), "workers": 0.0}
            try:
                out["workers"] = sum(cpu(c) for c in ps.children(recursive=True))
            except psutil.Error:
                pass
            return out

        cpu0, srv0, wall0 = cpu(me), server_cpu(), time.time()
        threads = [threading.Thread(target=user, args=(k,)) for k in range(args.users)]
        threads.append(threading.Thread(target=browser_probe))
        if args.mix == "predict-beside-jobs":
            threads.append(threading.Thread(target=batch_jobs))
        mem = threading.Thread(target=sample_memory)
        mem.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        mem.join()
        wall = time.time() - wall0
        srv1 = server_cpu()
        cores = {"load generator": (cpu(me) - cpu0) / wall, "server": (srv1["server"] - srv0["server"]) / wall,
                 "workers": (srv1["workers"] - srv0["workers"]) / wall}
        time.sleep(2)  # let the last answers' buffers go before measuring what stays

        def pct(xs, q):
            return 1000 * sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] if xs else None

        every = [x for v in lat.values() for x in v]
        rounds.append({
            "round": rnd, "served": len(every), "errors": len(errors), "error_examples": errors[:5],
            "throughput_per_s": len(every) / args.seconds,
            "latency_ms": {k: {"n": len(v), "p50": pct(v, 0.5), "p95": pct(v, 0.95)} for k, v in lat.items()},
            "latency_ms_all": {"p50": pct(every, 0.5), "p95": pct(every, 0.95),
                               "mean": 1000 * statistics.mean(every) if every else None},
            "cores_used": cores,  # CPU seconds per second: the load generator shares the server's two cores
            "peak_rss_mb": peak[0] / 2**20, "rss_after_mb": rss() / 2**20})
        print(json.dumps(rounds[-1]), flush=True)
    proc.terminate()
    proc.wait(timeout=30)
    after = [r["rss_after_mb"] for r in rounds]
    res = {"users": args.users, "seconds": args.seconds, "pair": args.pair, "mix": args.mix, "hosted": args.hosted,
           "client": args.client,
           "cpu": cpu_name(), "rounds": rounds,
           "rss_growth_last_round": (after[-1] / after[-2] - 1) if len(after) > 1 else None}
    print(json.dumps(res, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


def pct_ms(xs: list[float], q: float) -> float | None:
    """The `q` quantile of seconds `xs`, in milliseconds to one decimal (None for none)."""
    return round(1000 * sorted(xs)[min(len(xs) - 1, int(q * len(xs)))], 1) if xs else None


FLOOD_CLIENTS = 60
FLOOD_CHARS = 1999


def hostile_text(rng: random.Random) -> str:
    """What the issue's flood sent: texts at the hosted cap, of mixed scripts, emoji and combining marks."""
    pieces = ["terrible", "film", "ça", "naïve", "фильм", "映画", "😍", "e\u0301", "\u200bx", "<b>", "a" * 40,
              "ｆｕｌｌｗｉｄｔｈ", "مرحبا", "🤖🤖", "don't", "1e999"]
    out = []
    while sum(len(p) + 1 for p in out) < FLOOD_CHARS:
        out.append(rng.choice(pieces))
    return " ".join(out)[:FLOOD_CHARS]


def flood(args, url: str, rss, check) -> dict:
    """Issue 58's flood beside ordinary visitors: quiet, flood, quiet again (see the module's docstring)."""
    import httpx

    lock = threading.Lock()

    def visitors(seconds: float) -> tuple[list[float], list[str]]:
        lat, errors = [], []
        stop_at = time.time() + seconds

        def one(k: int) -> None:
            rng = random.Random(k)
            transport = httpx.HTTPTransport(local_address=f"127.0.1.{k + 1}")
            with httpx.Client(base_url=url, timeout=120, transport=transport) as http:
                while time.time() < stop_at:
                    text = rng.choice(TEXTS)
                    t0 = time.perf_counter()
                    try:
                        r = http.post("gradio_api/run/predict", json={"data": [text, ""]})
                        r.raise_for_status()
                        check("predict", text, r.json()["data"])
                        with lock:
                            lat.append(time.perf_counter() - t0)
                    except Exception as exc:  # noqa: BLE001 - counted and reported
                        with lock:
                            errors.append(f"{type(exc).__name__}: {str(exc)[:160]}")
                    time.sleep(0.25)

        threads = [threading.Thread(target=one, args=(k,)) for k in range(args.users)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return lat, errors

    def phase(name: str, lat: list[float], errors: list[str]) -> dict:
        return {"phase": name, "answers": len(lat), "errors": len(errors), "error_examples": errors[:3],
                "p50_ms": pct_ms(lat, 0.5), "p95_ms": pct_ms(lat, 0.95)}

    out = {"users": args.users, "seconds": args.seconds, "flood_clients": FLOOD_CLIENTS, "flood_chars": FLOOD_CHARS,
           "hosted": args.hosted, "cpu": cpu_name(), "phases": []}
    visitors(5)  # warm: first requests' one-off costs
    out["phases"].append(phase("quiet", *visitors(args.seconds)))
    time.sleep(2)
    out["rss_before_mb"] = round(rss() / 2**20)
    print(json.dumps(out["phases"][-1]), f"RSS {out['rss_before_mb']} MB", flush=True)

    stop_flood = threading.Event()
    sent = {"answered": 0, "refused": 0, "failed": 0}
    peak = [rss()]

    def flooder(k: int) -> None:
        rng = random.Random(10_000 + k)
        transport = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(base_url=url, timeout=120, transport=transport) as http:
            while not stop_flood.is_set():
                try:
                    r = http.post("gradio_api/run/predict", json={"data": [hostile_text(rng), ""]})
                    kind = "answered" if r.status_code == 200 else "refused" if "its share" in r.text else "failed"
                    if kind == "refused":  # as a well-behaved client reads 429's Retry-After; a hostile one won't
                        pass
                except Exception:  # noqa: BLE001 - counted
                    kind = "failed"
                with lock:
                    sent[kind] += 1

    def sample() -> None:
        while not stop_flood.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.5)

    floods = [threading.Thread(target=flooder, args=(k,)) for k in range(FLOOD_CLIENTS)]
    sampler = threading.Thread(target=sample)
    for t in [*floods, sampler]:
        t.start()
    time.sleep(2)
    out["phases"].append(phase("flood", *visitors(args.seconds)))
    stop_flood.set()
    for t in [*floods, sampler]:
        t.join()
    out["flood_requests"] = dict(sent)
    out["rss_peak_mb"] = round(peak[0] / 2**20)
    print(json.dumps(out["phases"][-1]), json.dumps(sent), f"peak RSS {out['rss_peak_mb']} MB", flush=True)
    time.sleep(15)
    out["rss_after_mb"] = round(rss() / 2**20)
    out["phases"].append(phase("after", *visitors(args.seconds / 2)))
    print(json.dumps(out["phases"][-1]), f"RSS after {out['rss_after_mb']} MB", flush=True)
    quiet, flooded = out["phases"][0]["p95_ms"], out["phases"][1]["p95_ms"]
    out["p95_ratio"] = round(flooded / quiet, 2) if quiet and flooded else None
    out["rss_ratio"] = round(out["rss_after_mb"] / out["rss_before_mb"], 2)
    return out


QUEUE_FLOOD_JOBS = 70
SYBIL_ADDRESSES, SYBIL_JOBS = 40, 4


def queued_call(http, fn_index: int, data: list, session: str) -> tuple[str, object]:
    """One queued call as the page makes it: join, then read the event stream to the end. ("done", output),
    ("refused", the 429's detail), ("full", Gradio's queue full) or ("failed", why)."""
    r = http.post("gradio_api/queue/join", json={"data": data, "fn_index": fn_index, "session_hash": session,
                                                 "event_data": None, "trigger_id": None})
    if r.status_code == 429:
        return "refused", r.json().get("detail")
    if r.status_code == 503:
        return "full", r.text
    if r.status_code != 200:
        return "failed", f"{r.status_code} {r.text[:120]}"
    with http.stream("GET", "gradio_api/queue/data", params={"session_hash": session}) as st:
        for line in st.iter_lines():
            if line.startswith("data:") and '"process_completed"' in line:
                done = json.loads(line[5:])
                return ("done", done["output"]["data"]) if done.get("success") else ("failed", str(done)[:160])
    return "failed", "the stream ended without an answer"


def queue_flood(args, url: str, fn_index: int, data: list, check) -> dict:
    """--mix queue-flood or sybil-flood (see the module's docstring): quiet, flood, quiet again."""
    import httpx

    lock = threading.Lock()

    def visitor(seconds: float) -> tuple[list[float], dict]:
        lat, kinds = [], {}
        stop_at = time.time() + seconds
        transport = httpx.HTTPTransport(local_address="127.0.1.1")
        with httpx.Client(base_url=url, timeout=600, transport=transport) as http:
            n = 0
            while time.time() < stop_at:
                n += 1
                t0 = time.perf_counter()
                try:
                    kind, out = queued_call(http, fn_index, data, f"visitor-{n}")
                    if kind == "done":
                        check("saliency", data[0], out)
                        lat.append(time.perf_counter() - t0)
                except Exception as exc:  # noqa: BLE001 - counted and reported
                    kind = f"failed: {type(exc).__name__}"
                kinds[kind] = kinds.get(kind, 0) + 1
                time.sleep(0.25)
        return lat, kinds

    def phase(name: str, lat: list[float], kinds: dict) -> dict:
        return {"phase": name, "answers": len(lat), "calls": kinds, "p50_ms": pct_ms(lat, 0.5),
                "p95_ms": pct_ms(lat, 0.95)}

    if args.mix == "queue-flood":
        flooders = [("127.0.0.2", k) for k in range(QUEUE_FLOOD_JOBS)]
    else:
        flooders = [(f"127.0.2.{a + 1}", k) for a in range(SYBIL_ADDRESSES) for k in range(SYBIL_JOBS)]
    out = {"mix": args.mix, "seconds": args.seconds, "hosted": args.hosted, "cpu": cpu_name(),
           "flood_callers": len(flooders), "flood_addresses": len({a for a, _ in flooders}), "phases": []}
    visitor(5)  # warm: the first calls' one-off costs
    out["phases"].append(phase("quiet", *visitor(args.seconds)))
    print(json.dumps(out["phases"][-1]), flush=True)

    stop = threading.Event()
    sent: dict[str, int] = {}

    def flooder(address: str, k: int) -> None:
        transport = httpx.HTTPTransport(local_address=address)
        with httpx.Client(base_url=url, timeout=600, transport=transport) as http:
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    kind, _ = queued_call(http, fn_index, data, f"flood-{address}-{k}-{n}")
                except Exception as exc:  # noqa: BLE001 - counted
                    kind = f"failed: {type(exc).__name__}"
                with lock:
                    sent[kind] = sent.get(kind, 0) + 1
                if kind != "done":
                    time.sleep(1.0)  # as gradio_client's caller retrying; the door pauses its refusals a second too

    threads = [threading.Thread(target=flooder, args=f, daemon=True) for f in flooders]
    for t in threads:
        t.start()
    time.sleep(5)  # the flood's jobs queued
    out["phases"].append(phase("flood", *visitor(args.seconds)))
    stop.set()
    print(json.dumps(out["phases"][-1]), json.dumps(sent), flush=True)
    out["flood_calls"] = dict(sent)
    for t in threads:
        t.join(timeout=120)
    out["phases"].append(phase("after", *visitor(args.seconds / 2)))
    print(json.dumps(out["phases"][-1]), flush=True)
    quiet, flooded = out["phases"][0]["p95_ms"], out["phases"][1]["p95_ms"]
    out["p95_ratio"] = round(flooded / quiet, 2) if quiet and flooded else None
    return out


if __name__ == "__main__":
    main()
