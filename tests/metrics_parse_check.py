"""cplane metrics, read by a real parser: Debian's python3-prometheus-client.

Usage: metrics_parse_check.py CPLANE SCRATCH_DIR

Builds a store through the CLI (a project whose id holds a quote and a
backslash, items claimed, finished, released, lapsed and reclaimed), runs
`cplane metrics` twice with a state file, and checks that the output parses
with prometheus_client.parser.text_string_to_metric_families: every family
has its HELP and TYPE, the label values come back as they were, the
counters and gauges hold what the commands did, and --json holds the same
samples. Exits 1 on any failure, naming it.
"""
import json
import os
import shutil
import subprocess
import sys

from prometheus_client.parser import text_string_to_metric_families

T0 = 1_800_000_000_000_000
S = 1_000_000


def main():
    cplane, scratch = sys.argv[1], sys.argv[2]
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    db = os.path.join(scratch, "m.db")
    state = os.path.join(scratch, "m.state")

    def run(*args, now):
        r = subprocess.run([cplane, "--db", db, *args, "--now", str(now)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"cplane {' '.join(args)} exited {r.returncode}: {r.stderr}")
        return r.stdout

    weird = 'we"ird\\one'
    run("project", "create", weird, "W", now=T0)
    run("project", "create", "plain", "P", now=T0)
    for i in range(3):
        run("enqueue", weird, "{}", now=T0 + (1 + i) * S)
    first = run("metrics", "--state", state, "--from-start", now=T0 + 5 * S)
    check(first, {
        ("cplane_items", (("project", weird), ("status", "ready"))): 3,
        ("cplane_enqueued_total", (("project", weird),)): 3,
        ("cplane_oldest_available_age_seconds", (("project", weird),)): 4,
    })

    def claim(owner, lease, now):
        return json.loads(run("claim", "--owner", owner, "--lease", str(lease), "--json", now=now))

    c = claim("w1", 100, T0 + 10 * S)
    run("finish", c["item_id"], "--fence", str(c["fence"]), "--status", "done", now=T0 + 11 * S)
    c = claim("w2", 100, T0 + 12 * S)
    run("release", c["item_id"], "--fence", str(c["fence"]), now=T0 + 13 * S)
    c = claim("w3", 5, T0 + 14 * S)          # the released one again; lapses at 19 s
    run("expire", now=T0 + 20 * S)
    claim("w4", 100, T0 + 21 * S)            # the third item, ready since 3 s
    claim("w5", 100, T0 + 22 * S)            # the lapsed one: a reclaim
    second = run("metrics", "--state", state, now=T0 + 30 * S)
    families = check(second, {
        ("cplane_items", (("project", weird), ("status", "claimed"))): 2,
        ("cplane_items", (("project", weird), ("status", "ready"))): 0,
        ("cplane_items", (("project", "plain"), ("status", "ready"))): 0,
        ("cplane_claims_total", (("project", weird), ("via", "claim"))): 5,
        ("cplane_reclaims_total", (("project", weird),)): 1,
        ("cplane_finishes_total", (("outcome", "done"), ("project", weird))): 1,
        ("cplane_releases_total", (("project", weird),)): 1,
        ("cplane_lease_expiries_total", (("project", weird),)): 1,
        ("cplane_leases", (("project", weird), ("state", "live"))): 2,
        ("cplane_scrape_events_read", ()): 8,
        ("cplane_events_total", (("type", "claimed"),)): 5,
    })
    for family in families:
        if not family.documentation:
            sys.exit(f"{family.name}: no HELP")
        if family.type not in ("counter", "gauge"):
            sys.exit(f"{family.name}: TYPE {family.type}")
        if family.type == "counter":
            for sample in family.samples:
                if not sample.name.endswith("_total"):
                    sys.exit(f"{sample.name}: a counter sample without _total")

    as_json = json.loads(run("metrics", "--state", state, "--json", now=T0 + 30 * S))
    from_json = {}
    for family in as_json["families"]:
        for sample in family["samples"]:
            key = (family["name"], tuple(sorted(sample["labels"].items())))
            from_json[key] = sample["value"]
    from_text = samples(run("metrics", "--state", state, now=T0 + 30 * S))
    del from_json[("cplane_scrape_events_read", ())]
    del from_text[("cplane_scrape_events_read", ())]
    if from_json != from_text:
        diff = set(from_json.items()) ^ set(from_text.items())
        sys.exit(f"--json and the text differ: {sorted(diff)[:10]}")
    print(f"PASS: {len(families)} families, {len(from_text)} samples parsed")


def samples(text):
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def check(text, expected):
    families = list(text_string_to_metric_families(text))
    got = samples(text)
    for (name, labels), value in expected.items():
        key = (name, tuple(sorted(labels)))
        if got.get(key) != value:
            sys.exit(f"{name}{dict(labels)}: expected {value}, parsed {got.get(key)}")
    return families


if __name__ == "__main__":
    main()
