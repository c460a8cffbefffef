"""Hosted LIT under the issue's hostile requests (issue 70): a hosted `albert-lens lit --pair offline` as an
operator starts it, sent what took the development server from 0.92 to 4.9 GB and to 10 GB: the Word Replacer
with one 999-word text and `a -> ` + 499 targets, the Word Replacer on a 100,000-character text and on a 20 MB
one, and `/get_preds` of 40 new 1,990-character texts with every output. Reports each request's status, answer
(first 160 characters) and seconds, and the server's RSS at the start, its peak (sampled every 0.1 s) and at the
end. Target: each refused up front (HTTP 4xx, not after building it), the RSS within 1.5 GB of the start.

    python benchmarks/lit_hostile.py [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from lit_slowloris import cpu_name, start_hosted_lit  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def post(url: str, path: str, body: bytes) -> tuple[int, str, float]:
    start = time.perf_counter()
    req = urllib.request.Request(url + path, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            status, text = r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode("utf-8", "replace")
    except OSError as exc:  # the server closed on a body past its cap
        status, text = 0, f"{type(exc).__name__}: {exc}"
    return status, text, time.perf_counter() - start


def rows(texts: list[str], field: str) -> list[dict]:
    from lit_nlp.api.dataset import input_hash

    out = []
    for t in texts:
        data = {field: t}
        data["_id"] = input_hash(data)
        out.append({"id": data["_id"], "data": data, "meta": {}})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    server, url, _log = start_hosted_lit()
    peak, stop = [0.0], threading.Event()
    try:
        info = json.loads(post(url, "/get_info", b"{}")[1])
        model = next(iter(info["models"]))
        dataset = next(d for d in info["datasets"] if d != "_union_empty")
        field = next(k for k, v in info["datasets"][dataset]["spec"].items() if v.get("__name__") == "TextSegment")
        start = rss_mb(server.pid)

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], rss_mb(server.pid))
                time.sleep(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        gen = f"/get_generated?model={quote(model)}&dataset_name={quote(dataset)}&generator={quote('Word Replacer')}"

        def replacer(text: str, subs: str) -> bytes:
            return json.dumps({"inputs": rows([text], field),
                               "config": {"Substitutions": subs, "Fields to replace": [field]}}).encode()

        cases = {
            "Word Replacer: 999 words, a -> 499 targets": (gen, replacer(" ".join(["a"] * 999), "a -> " + "|" * 499)),
            "Word Replacer: a 100,000-character text": (gen, replacer("a fine film " * 8_334, "fine -> good")),
            "Word Replacer: a 20 MB text": (gen, replacer("a fine film " * 1_750_000, "fine -> good")),
            "/get_preds: 40 new 1,990-character texts, every output": (
                f"/get_preds?model={quote(model)}&dataset_name={quote(dataset)}",
                json.dumps({"inputs": rows([f"{k} " + "a long and winding film " * 82 for k in range(40)],
                                           field)}).encode()),
        }
        out = {"cpu": cpu_name(), "model": model, "dataset": dataset, "rss_start_mb": round(start), "cases": []}
        for name, (path, body) in cases.items():
            status, text, seconds = post(url, path, body)
            out["cases"].append({"case": name, "request_bytes": len(body), "status": status,
                                 "answer": text[:160], "answer_bytes": len(text), "seconds": round(seconds, 2),
                                 "rss_after_mb": round(rss_mb(server.pid))})
            print(json.dumps(out["cases"][-1]), flush=True)
        stop.set()
        sampler.join()
        out["rss_peak_mb"], out["rss_end_mb"] = round(peak[0]), round(rss_mb(server.pid))
        out["peak_over_start_mb"] = round(peak[0] - start)
    finally:
        stop.set()
        server.terminate()
        server.wait(timeout=60)
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
