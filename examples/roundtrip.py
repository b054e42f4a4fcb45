#!/usr/bin/env python3
# The Python round trip of docs/python.md, as a program (ctest runs it; the
# function is the block in the page, checked equal).
#   usage: PYTHONPATH=build/python python3 examples/roundtrip.py DB_PATH
import os
import sys

import cplane


# One item queued, claimed by a worker and finished; returns its id.
def round_trip(db_path: str) -> str:
    with cplane.ControlStore(db_path, lease_seconds=900) as store:
        store.create_project("alpha", "Project Alpha", status="open")
        item_id = store.enqueue("alpha", {"task": "summarise the report"})
        item = store.claim("worker-1")  # a cplane.ClaimedItem, or None
        # item.item_id, project_id, payload (a dict), fence, attempts, lease_expires_at
        store.finish(item.item_id, fence=item.fence, status="done")  # or raises FenceRejected
        for event in store.events(item_id):
            print(event["event_type"], event["fence"])  # queued None, claimed 1, done 1
        print(len(cplane.verify_ledger(store)), "problems")  # 0
        return item_id


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} DB_PATH", file=sys.stderr)
        sys.exit(2)
    if os.path.exists(sys.argv[1]):
        os.remove(sys.argv[1])
    round_trip(sys.argv[1])
