#!/usr/bin/env python3
"""cplane-bench --scenario long-horizon, from the outside (bench/long_horizon.hpp).

  long_horizon_check.py BENCH samples   the descriptor, the samples' fields and
                                        clock-aligned ticks (fixed and burst),
                                        and a malformed variable refused
  long_horizon_check.py BENCH signals   SIGTERM and SIGINT: exit 0 within 5 s
                                        with a final sample, no child left

Exit 0 when every check holds, 1 with the first failure otherwise.
"""
import json
import os
import signal
import subprocess
import sys
import time

BENCH = sys.argv[1]
MODE = sys.argv[2]


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def check(ok, message):
    if not ok:
        fail(message)


def environment(**settings):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL",)}
    env.update({k: str(v) for k, v in settings.items()})
    return env


def run(timeout, **settings):
    done = subprocess.run([BENCH, "--scenario", "long-horizon"], env=environment(**settings),
                          capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout.splitlines(), done.stderr


SAMPLE_FIELDS = {"t", "interval_s", "claim_p50_ms", "claim_p95_ms", "claim_p99_ms",
                 "claim_max_ms", "claims", "enqueue_rate", "completion_rate", "queue_depth",
                 "enqueued", "completed", "producer_lag", "errors", "late_ms", "final"}


def parse(lines):
    check(len(lines) >= 2, f"expected a descriptor and samples, got {lines}")
    records = [json.loads(line) for line in lines]
    descriptor, samples = records[0], records[1:]
    check(descriptor.get("kind") == "descriptor", f"first line is not the descriptor: {lines[0]}")
    for s in samples:
        check(s.get("kind") == "sample", f"not a sample: {s}")
        missing = SAMPLE_FIELDS - set(s)
        check(not missing, f"a sample lacks {sorted(missing)}: {s}")
        if s["claims"] > 0:
            check(0 <= s["claim_p50_ms"] <= s["claim_p95_ms"] <= s["claim_p99_ms"]
                  <= s["claim_max_ms"], f"percentiles out of order: {s}")
        else:
            check(s["claim_p99_ms"] is None, f"a percentile without a claim: {s}")
        check(s["queue_depth"] == s["enqueued"] - s["completed"] and s["queue_depth"] >= 0,
              f"queue_depth is not enqueued - completed: {s}")
    check([s["final"] for s in samples] == [False] * (len(samples) - 1) + [True],
          f"only the last sample is final: {[s['final'] for s in samples]}")
    return descriptor, samples


def check_ticks(samples, every, duration):
    ticks = [s["t"] for s in samples if not s["final"]]
    want = [round(every * k, 3) for k in range(1, round(duration / every) + 1)]
    check(ticks == want, f"ticks {ticks}, expected {want} (multiples of {every})")
    check(samples[-1]["t"] >= duration, f"the final sample is before the end: {samples[-1]}")


def samples_mode():
    # Fixed rate: 3 s, a sample a second.
    rate, every, duration, workers = 300, 1, 3, 3
    rc, lines, err = run(60, DURATION_S=duration, SAMPLE_EVERY_S=every, PRODUCER_RATE=rate,
                         WORKER_COUNT=workers, JOB_WORK_MS=1, JOB_PAYLOAD_BYTES=100,
                         DURABILITY="normal")
    check(rc == 0, f"exit {rc}: {err}")
    descriptor, samples = parse(lines)
    expected = {"system": "cplane", "backend": "sqlite", "durability": "normal",
                "producer_rate": 300.0, "producer_mode": "fixed", "worker_count": workers,
                "job_payload_bytes": 100, "job_work_ms": 1.0, "sample_every_s": 1.0,
                "duration_s": 3.0, "combine": True, "sticky_ms": 10}
    for key, value in expected.items():
        check(descriptor.get(key) == value, f"descriptor {key}={descriptor.get(key)!r}, "
              f"expected {value!r}: {descriptor}")
    for key in ("producer_batch_max", "burst_every_s", "claim_wait_ms", "database", "project"):
        check(key in descriptor, f"the descriptor lacks {key}: {descriptor}")
    check_ticks(samples, every, duration)
    for s in samples[:-1]:
        check(0.75 * rate <= s["enqueue_rate"] <= 1.25 * rate, f"enqueue_rate off {rate}: {s}")
        check(s["completion_rate"] >= 0.5 * rate, f"workers did not keep up: {s}")
        check(s["claims"] > 0, f"no claim in an interval: {s}")
    last = samples[-1]
    check(abs(last["enqueued"] - rate * duration) <= 0.1 * rate * duration,
          f"enqueued {last['enqueued']} of about {rate * duration}")
    check(sum(s["claims"] for s in samples) == last["run_claims"] >= last["completed"],
          "the samples' claims are not the run's, or fewer than the items completed")
    check(0 < last["run_claim_p50_ms"] <= last["run_claim_p95_ms"] <= last["run_claim_p99_ms"],
          f"the run's percentiles: {last}")

    # Burst: a second's items owed at each second's start, sampled each 0.5 s.
    rc, lines, err = run(60, DURATION_S=2, SAMPLE_EVERY_S=0.5, PRODUCER_RATE=200,
                         PRODUCER_MODE="burst", BURST_EVERY_S=1, WORKER_COUNT=2,
                         DURABILITY="normal", STICKY_MS=0)
    check(rc == 0, f"burst: exit {rc}: {err}")
    descriptor, samples = parse(lines)
    check(descriptor["producer_mode"] == "burst", f"burst: {descriptor}")
    check(descriptor["sticky_ms"] == 0, f"burst: STICKY_MS=0 not taken: {descriptor}")
    check_ticks(samples, 0.5, 2)
    first = samples[0]
    check(first["enqueued"] >= 190, f"burst: the first period's items not all owed at 0: {first}")
    # Bursts at 0, 1, 2 s and samples every 0.5 s: some half-second after
    # the first holds no enqueue. (Not always the one ending at 1.0 s: a
    # sample taken a few ms late counts the burst due at 1.0 s; CI's did.)
    deltas = [b["enqueued"] - a["enqueued"] for a, b in zip(samples, samples[1:])]
    check(0 in deltas, f"burst: items enqueued in every half-second, not in bursts: {samples}")

    # A malformed variable: refused with a sentence, nothing printed or run.
    for name, value in (("PRODUCER_MODE", "sometimes"), ("PRODUCER_RATE", "-5"),
                        ("WORKER_COUNT", "many"), ("DURABILITY", "maybe"),
                        ("STICKY_MS", "-1"), ("STICKY_MS", "1.5"), ("WORKER_COUNT", "0x10"),
                        ("JOB_PAYLOAD_BYTES", "1e3"), ("PRODUCER_RATE", " 5"),
                        ("PRODUCER_RATE", "0x1p3")):
        rc, lines, err = run(30, **{name: value, "DURATION_S": 1})
        check(rc == 1 and not lines and name in err,
              f"{name}={value}: exit {rc}, stdout {lines}, stderr {err!r}")


def children_of(pid):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def signal_mode():
    # SIGTERM with quick work; SIGINT while the workers sleep in 2 s jobs.
    for sig, work_ms in ((signal.SIGTERM, 1), (signal.SIGINT, 2000)):
        workers = 4
        proc = subprocess.Popen([BENCH, "--scenario", "long-horizon"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=environment(PRODUCER_RATE=400, WORKER_COUNT=workers,
                                                JOB_WORK_MS=work_ms, SAMPLE_EVERY_S=0.5,
                                                DURABILITY="normal"))
        lines = [proc.stdout.readline(), proc.stdout.readline()]  # descriptor, first sample
        check(all(line.strip() for line in lines), f"{sig.name}: no first sample: {lines}")
        children = children_of(proc.pid)
        check(len(children) == workers + 1,
              f"{sig.name}: {len(children)} children, expected {workers} workers + a producer")
        t0 = time.monotonic()
        proc.send_signal(sig)
        try:
            rest, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail(f"{sig.name}: still running 5 s after the signal")
        took = time.monotonic() - t0
        check(proc.returncode == 0, f"{sig.name}: exit {proc.returncode}: {err}")
        _, samples = parse([l for l in lines + rest.splitlines() if l.strip()])
        check(samples[-1]["final"], f"{sig.name}: no final sample")
        survivors = [pid for pid in children if alive(pid)]
        check(not survivors, f"{sig.name}: children {survivors} outlived the run")
        print(f"{sig.name}: exit 0 after {took:.2f} s, {len(samples)} samples, "
              f"{len(children)} children all gone")


if MODE == "samples":
    samples_mode()
elif MODE == "signals":
    signal_mode()
else:
    fail(f"unknown mode {MODE}")
print("PASS")
