#!/usr/bin/env python3
# The worker's loop of README.md in Python, as a program: a worker drains a
# project, heartbeating between steps and reporting under its fence; a
# second worker that stalled past its lease is refused when it reports late.
# The function `work` is the block in the README (ctest checks they stay
# equal). Exits non-zero if anything is off.
#   usage: PYTHONPATH=build/python python3 examples/worker_loop.py DB_PATH
import os
import sys
import time

import cplane

steps_done = 0


def do_step(payload, step):
    global steps_done
    steps_done += payload is not None and step >= 0


# Claims items until none is left; each is done in three steps, under a
# lease renewed between them. A refusal means the lease lapsed and another
# worker holds the item now (or it ended): drop the result, never retry it.
def work(store: cplane.ControlStore, me: str) -> int:
    done = 0
    while (item := store.claim(me, lease_seconds=300)) is not None:
        try:
            for step in range(3):
                do_step(item.payload, step)
                store.heartbeat(item.item_id, item.fence, lease_seconds=300)
            store.finish(item.item_id, fence=item.fence, status="done")
            done += 1
        except cplane.FenceRejected as e:
            print(f"{item.item_id}: {e.reason}", file=sys.stderr)
    return done


def main(path):
    if os.path.exists(path):
        os.remove(path)
    with cplane.ControlStore(path) as store:
        store.create_project("alpha", "Project Alpha")
        for i in range(5):
            store.enqueue("alpha", {"n": i})

        # A stale worker: it claims with a 50 ms lease and stalls past it.
        stale = store.claim("stale", lease_seconds=0.05)
        time.sleep(0.1)

        # The lease has lapsed by now: the loop reclaims that item too.
        if work(store, "worker-1") != 5 or steps_done != 15:
            return 1
        try:
            store.finish(stale.item_id, fence=stale.fence, status="done")
            return 1
        except cplane.FenceRejected as e:
            if e.reason != "terminal":
                return 1
        if cplane.verify_ledger(store):
            return 1
    print("ok: 5 items done, the stale report refused, the ledger verifies")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} DB_PATH", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
