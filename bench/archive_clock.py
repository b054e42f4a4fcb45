# cplane archive: its cost with and without a rate limit in the store (the
# live-log replay that checks and carries its clock, docs/retention.md).
# N items drained (in batches), L more left queued, then one archive of the
# N; the last argument 1 sets a rate limit first. Prints the archive's time.
# Usage: PYTHONPATH=build/python python3 bench/archive_clock.py N L 0|1
import os, sys, time, tempfile, cplane
N, L, limited = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
d = tempfile.mkdtemp()
s = cplane.ControlStore(os.path.join(d, "a.db"))
T0 = 1_700_000_000_000_000
s.create_project("p", "P", now=T0)
if limited:
    s.set_limit("k", rate="1000000/s", burst=1000, now=T0)
t = T0 + 1
for start in range(0, N + L, 1000):
    n = min(1000, N + L - start)
    s.enqueue_batch("p", ["{}"] * n, now=t)
for i in range(0, N, 500):
    t += 1000
    got = s.claim_batch("w", 500, now=t)
    s.finish_batch([(c.item_id, c.fence) for c in got], now=t + 1)
t0 = time.perf_counter()
r = cplane.archive(s, before=t + 10, to=os.path.join(d, "s.seg"), now=t + 20)
print(f"limited={int(limited)} items={r['items']} clocks={r['clocks_carried']} archive_s={time.perf_counter() - t0:.3f}")
