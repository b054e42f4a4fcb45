#!/usr/bin/env python3
"""The Python module's two targets (issue 27), measured in one run.

1. One process: claim + finish per item through the module, against
   spawning the CLI for each (`cplane claim --json`, then `cplane finish`),
   on the same kind of store (a fresh SQLite file, durability fenced, the
   CLI's default). Target: the module at least 20x faster per item.
2. 8 worker processes draining 10,000 items through the module (each opens
   its store after the fork, all start together, claim + finish until
   nothing is left), against `cplane-bench --scenario drain --workers 8
   --items 10000` (the C++ fleet doing the same, durability normal, the
   bench's default, used for both). Target: at least 0.8x its rate.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_bench.py \
        --cli build/cli/cplane --bench build/bench/cplane-bench

Prints one JSON object per figure, then a summary line; exit 1 when a
target is missed (--check) or a count is wrong.
"""
import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time

import cplane


def fill(path, items, durability="fenced"):
    with cplane.ControlStore(path, durability=durability) as store:
        store.create_project("alpha", "Project Alpha")
        for start in range(0, items, 1000):
            store.enqueue_batch("alpha", [{"i": i} for i in range(start, min(items, start + 1000))])


def module_per_item(tmp, items):
    path = os.path.join(tmp, "module.db")
    fill(path, items)
    with cplane.ControlStore(path) as store:
        t = time.perf_counter()
        n = 0
        while (item := store.claim("worker-1")) is not None:
            store.finish(item.item_id, fence=item.fence, status="done")
            n += 1
        dt = time.perf_counter() - t
    assert n == items, f"the module finished {n} of {items}"
    return dt / n


def cli_per_item(tmp, cli, items):
    path = os.path.join(tmp, "cli.db")
    fill(path, items)
    t = time.perf_counter()
    n = 0
    while True:
        claim = subprocess.run([cli, "--db", path, "claim", "--owner", "worker-1", "--json"],
                               capture_output=True, text=True)
        if claim.returncode == 3:
            break
        claim.check_returncode()
        item = json.loads(claim.stdout)
        subprocess.run([cli, "--db", path, "finish", item["item_id"], "--fence",
                        str(item["fence"]), "--status", "done"],
                       check=True, capture_output=True)
        n += 1
    dt = time.perf_counter() - t
    assert n == items, f"the CLI finished {n} of {items}"
    return dt / n


def drain_worker(path, name, start, results):
    with cplane.ControlStore(path, durability="normal") as store:
        start.wait()
        n = 0
        while (item := store.claim(name)) is not None:
            store.finish(item.item_id, fence=item.fence, status="done")
            n += 1
        results.put((n, time.perf_counter()))


def module_drain(tmp, workers, items, run):
    path = os.path.join(tmp, f"drain{run}.db")
    fill(path, items, durability="normal")
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(workers + 1)
    results = ctx.Queue()
    procs = [ctx.Process(target=drain_worker, args=(path, f"worker-{w}", start, results))
             for w in range(workers)]
    for p in procs:
        p.start()
    start.wait()
    t = time.perf_counter()
    got = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
        assert p.exitcode == 0
    dt = max(end for _, end in got) - t
    finished = sum(n for n, _ in got)
    with cplane.ControlStore(path) as store:
        counts = store.status_counts()
    assert finished == items and counts["done"] == items, (finished, counts)
    return items / dt


def cpp_drain(bench, workers, items):
    out = subprocess.run([bench, "--scenario", "drain", "--workers", str(workers),
                          "--items", str(items)], check=True, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("scenario") == "drain":
                return float(record["items_per_s"])
    raise RuntimeError("cplane-bench printed no drain figure:\n" + out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default="build/cli/cplane")
    ap.add_argument("--bench", default="build/bench/cplane-bench")
    ap.add_argument("--single-items", type=int, default=2000, help="items for the module's loop")
    ap.add_argument("--cli-items", type=int, default=200, help="items for the CLI's loop")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--items", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3, help="drains of each kind; the median counts")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cplane-pybench-") as tmp:
        module = module_per_item(tmp, a.single_items)
        cli = cli_per_item(tmp, a.cli, a.cli_items)
        speedup = cli / module
        print(json.dumps({"scenario": "python-single", "module_us_per_item": round(module * 1e6, 1),
                          "cli_us_per_item": round(cli * 1e6, 1), "speedup": round(speedup, 1),
                          "target": 20}))
        py_rates, cpp_rates = [], []
        for run in range(a.runs):
            py_rates.append(module_drain(tmp, a.workers, a.items, run))
            cpp_rates.append(cpp_drain(a.bench, a.workers, a.items))
        py_rate, cpp_rate = statistics.median(py_rates), statistics.median(cpp_rates)
        ratio = py_rate / cpp_rate
        print(json.dumps({"scenario": "python-drain", "workers": a.workers, "items": a.items,
                          "python_items_per_s": [round(r) for r in py_rates],
                          "cpp_items_per_s": [round(r) for r in cpp_rates],
                          "ratio_of_medians": round(ratio, 2), "target": 0.8}))
    ok = speedup >= 20 and ratio >= 0.8
    print(f"single: {speedup:.1f}x the CLI (target 20x); drain: {ratio:.2f}x the C++ bench "
          f"(target 0.8x): {'PASS' if ok else 'MISSED'}")
    return 0 if ok or not a.check else 1


if __name__ == "__main__":
    sys.exit(main())
