"""LIT under half-open connections (issue 70): a hosted `albert-lens lit --pair offline` as an operator starts it,
one client (127.0.0.2) opening CONNECTIONS connections that never finish their headers, and another visitor
(127.0.0.1) asking `/get_info` before, during and after. Reports the visitor's latencies (p50, max), how many of
the flood's connections the server kept open, and the server's thread count (from /proc). Target: the visitor's
`/get_info` under 2 s during and after.

    python benchmarks/lit_slowloris.py [--connections 1200] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return -1


def get_info(url: str, timeout: float = 60.0) -> float:
    """Seconds for one /get_info (a refusal or a dropped connection raises)."""
    start = time.perf_counter()
    req = urllib.request.Request(url + "/get_info", data=b"{}", method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        r.read()
        assert r.status == 200
    return time.perf_counter() - start


def phase(url: str, n: int = 10) -> dict:
    times, errors = [], []
    for _ in range(n):
        try:
            times.append(get_info(url))
        except Exception as exc:  # noqa: BLE001 - a failed visit is a result here
            errors.append(f"{type(exc).__name__}: {exc}"[:120])
        time.sleep(0.2)
    return {"n": n, "errors": errors, "p50_s": round(statistics.median(times), 3) if times else None,
            "max_s": round(max(times), 3) if times else None}


def start_hosted_lit():
    """A hosted `albert-lens lit --pair offline` as an operator starts it, on a free port, once it answers:
    (the process, its URL, its log: a file read at the end, as a pipe nobody reads fills up)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "ALBERT_LENS_HOSTED": "1"}
    log = tempfile.TemporaryFile(mode="w+")
    server = subprocess.Popen([sys.executable, "-m", "app", "lit", "--pair", "offline", "--port", str(port)],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log, text=True)
    deadline = time.monotonic() + 600
    while True:
        try:
            get_info(url, timeout=5)
            return server, url, log
        except Exception:  # noqa: BLE001 - not up yet
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                log.seek(0)
                raise SystemExit(f"LIT did not start: {log.read()[-2000:]}") from None
            time.sleep(1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=1200)
    ap.add_argument("--json")
    args = ap.parse_args()
    server, url, log = start_hosted_lit()
    port = int(url.rsplit(":", 1)[1])
    try:
        out = {"cpu": cpu_name(), "connections": args.connections, "before": phase(url),
               "threads_before": threads(server.pid)}
        held, refused = [], 0
        for _ in range(args.connections):
            s = socket.socket()
            try:
                s.bind(("127.0.0.2", 0))
                s.connect(("127.0.0.1", port))
                s.sendall(b"GET /get_info HTTP/1.1\r\nHost: lit\r\nX-Slow: ")
                held.append(s)
            except OSError:
                refused += 1
                s.close()
        time.sleep(1)
        out["during"] = phase(url)
        out["threads_during"] = threads(server.pid)
        still = 0
        for s in held:
            s.setblocking(False)
            try:
                still += bool(s.recv(1, socket.MSG_PEEK))  # data: open; b"": closed by the server
            except BlockingIOError:
                still += 1
            except OSError:
                pass
        out["flood_kept_open"], out["flood_refused_at_connect"] = still, refused
        for s in held:
            s.close()
        time.sleep(1)
        out["after"] = phase(url)
        out["threads_after"] = threads(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.seek(0)
        out["log_lines"] = len(log.read().splitlines())
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
