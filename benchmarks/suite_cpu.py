"""The test suite's CPU seconds (user + system), from the per-test lines `ALBERT_LENS_TEST_CPU=FILE` makes the
suite write (tests/conftest.py): the total, per file and the slowest tests, so a change to the suite's cost is
measured, not guessed. Run the suite with it, then this:

    ALBERT_LENS_TEST_CPU=/tmp/cpu.jsonl ./run test
    python benchmarks/suite_cpu.py /tmp/cpu.jsonl [--top 20] [--against /tmp/cpu-before.jsonl]
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict


def load(path: str) -> dict[str, dict]:
    rows = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                rows[row["test"]] = row  # a rerun test counts once, as its last run
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--against", help="an earlier run's log: the ratio of the totals, this over that")
    args = ap.parse_args()
    rows = load(args.log)
    total = sum(r["cpu_s"] for r in rows.values())
    files: dict[str, float] = defaultdict(float)
    for name, r in rows.items():
        files[name.split("::")[0]] += r["cpu_s"]
    print(f"{len(rows)} tests, {total:,.0f} CPU seconds ({total / 60:.1f} min), "
          f"{sum(r['wall_s'] for r in rows.values()) / 60:.1f} min of test wall time summed over workers")
    if args.against:
        before = sum(r["cpu_s"] for r in load(args.against).values())
        print(f"against {args.against}: {before:,.0f} -> {total:,.0f} CPU s, ratio {total / before:.2f}")
    print("\nper file:")
    for name, cpu in sorted(files.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {cpu:8.1f}  {name}")
    print("\nslowest tests:")
    for name, r in sorted(rows.items(), key=lambda kv: -kv[1]["cpu_s"])[: args.top]:
        print(f"  {r['cpu_s']:8.1f}  {name}")


if __name__ == "__main__":
    main()
