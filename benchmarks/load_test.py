"""Load: N concurrent gradio_client users mixing /predict and /saliency against one app for a fixed time
(issue 9). Reports requests served, errors (target 0), p50/p95 latency and the server's peak memory.

    python benchmarks/load_test.py [--users 16] [--seconds 120] [--pair offline] [--json out.json]

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--pair", default="offline")
    ap.add_argument("--json")
    args = ap.parse_args()
    import psutil
    from gradio_client import Client

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app", "app", "--pair", args.pair, "--port", str(port)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
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
    peak = [ps.memory_info().rss]
    lat: dict[str, list[float]] = {"predict": [], "saliency": []}
    errors: list[str] = []
    stop_at = time.time() + args.seconds
    lock = threading.Lock()

    def user(k: int) -> None:
        c = Client(url, verbose=False)
        rng = random.Random(k)
        while time.time() < stop_at:
            text = rng.choice(TEXTS)
            kind = "saliency" if rng.random() < 0.4 else "predict"
            t0 = time.perf_counter()
            try:
                if kind == "predict":
                    c.predict(text, "", api_name="/predict")
                else:
                    c.predict(text, "", rng.choice(["gradient_x_input", "gradient_norm", "integrated_gradients"]),
                              "predicted", api_name="/saliency")
                with lock:
                    lat[kind].append(time.perf_counter() - t0)
            except Exception as exc:  # noqa: BLE001 - counted and reported
                with lock:
                    errors.append(f"{kind}: {type(exc).__name__}: {str(exc)[:120]}")

    def sample_memory() -> None:
        while time.time() < stop_at + 1:
            try:
                rss = ps.memory_info().rss + sum(c.memory_info().rss for c in ps.children(recursive=True))
                peak[0] = max(peak[0], rss)
            except psutil.Error:
                pass
            time.sleep(0.5)

    threads = [threading.Thread(target=user, args=(k,)) for k in range(args.users)]
    mem = threading.Thread(target=sample_memory)
    mem.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    mem.join()
    proc.terminate()
    proc.wait(timeout=30)

    def pct(xs, q):
        return 1000 * sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] if xs else None

    every = lat["predict"] + lat["saliency"]
    res = {"users": args.users, "seconds": args.seconds, "pair": args.pair, "served": len(every),
           "errors": len(errors), "error_examples": errors[:5],
           "throughput_per_s": len(every) / args.seconds,
           "latency_ms": {k: {"n": len(v), "p50": pct(v, 0.5), "p95": pct(v, 0.95)} for k, v in lat.items()},
           "latency_ms_all": {"p50": pct(every, 0.5), "p95": pct(every, 0.95),
                              "mean": 1000 * statistics.mean(every) if every else None},
           "peak_rss_mb": peak[0] / 2**20}
    print(json.dumps(res, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
