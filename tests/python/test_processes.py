# The module across real processes: a worker SIGKILLed while it holds a
# lease is refused when its fence comes back, and a fleet of worker
# processes drains a queue with every count exact.
import multiprocessing
import os
import signal

import pytest

import cplane

T0 = 1_700_000_000_000_000
SECOND = 1_000_000
# The ctest entry drains 10,000 items; a quick run may ask for fewer.
DRAIN_ITEMS = int(os.environ.get("CPLANE_PY_DRAIN_ITEMS", "10000"))
DRAIN_WORKERS = 8


def claim_and_hang(url, conn):
    # Opened in the child (a store is one connection per process).
    with cplane.ControlStore(url) as store:
        item = store.claim("doomed", lease_seconds=60, now=T0)
        conn.send((item.item_id, item.fence))
        signal.pause()  # holds the lease until the SIGKILL


def test_a_worker_killed_with_its_lease_is_refused_after_a_reclaim(url):
    with cplane.ControlStore(url) as store:
        store.create_project("alpha", "Project Alpha", now=T0)
        item_id = store.enqueue("alpha", {"task": "t"}, now=T0)
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    worker = ctx.Process(target=claim_and_hang, args=(url, child))
    worker.start()
    assert parent.poll(30), "the worker claimed nothing"
    claimed_id, stale_fence = parent.recv()
    assert claimed_id == item_id
    os.kill(worker.pid, signal.SIGKILL)
    worker.join()
    assert worker.exitcode == -signal.SIGKILL
    with cplane.ControlStore(url) as store:
        # The lease is live: nobody else may take the item yet.
        assert store.claim("rescuer", now=T0 + 30 * SECOND) is None
        # It lapses; the next claim takes it under a higher fence.
        rescued = store.claim("rescuer", lease_seconds=60, now=T0 + 61 * SECOND)
        assert rescued.item_id == item_id and rescued.fence > stale_fence
        assert rescued.attempts == 2
        before = store.log_end()
        with pytest.raises(cplane.FenceRejected) as e:
            store.finish(item_id, fence=stale_fence, status="done")
        assert e.value.reason == "stale_fence"
        assert store.log_end() == before
        store.finish(item_id, fence=rescued.fence, status="done")
        assert [e["event_type"] for e in store.events(item_id)] == ["queued", "claimed", "claimed", "done"]
        assert cplane.verify_ledger(store) == []


def drain(url, name, start, results):
    with cplane.ControlStore(url, durability="normal") as store:
        start.wait()
        done = []
        while (item := store.claim(name)) is not None:
            store.finish(item.item_id, fence=item.fence, status="done")
            done.append(item.item_id)
        results.put((name, done))


def test_eight_processes_drain_the_queue_with_every_count_exact(url):
    with cplane.ControlStore(url) as store:
        store.create_project("alpha", "Project Alpha")
        ids = []
        for start in range(0, DRAIN_ITEMS, 1000):
            ids += store.enqueue_batch("alpha", [{"i": i} for i in
                                                 range(start, min(start + 1000, DRAIN_ITEMS))])
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(DRAIN_WORKERS)
    results = ctx.Queue()
    workers = [ctx.Process(target=drain, args=(url, f"worker-{w}", start, results))
               for w in range(DRAIN_WORKERS)]
    for w in workers:
        w.start()
    finished = dict(results.get(timeout=300) for _ in workers)
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    every = [i for done in finished.values() for i in done]
    assert len(every) == DRAIN_ITEMS
    assert sorted(every) == sorted(ids)  # each item finished exactly once
    with cplane.ControlStore(url) as store:
        counts = store.status_counts()
        assert counts["done"] == DRAIN_ITEMS
        assert counts["ready"] == counts["claimed"] == counts["failed"] == 0
        # queued, claimed, done per item, and the project's creation
        assert store.log_end() >= 3 * DRAIN_ITEMS + 1
        assert cplane.verify_ledger(store) == []
