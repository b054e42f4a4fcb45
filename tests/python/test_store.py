# The cplane module in one process: the round trip, every refusal with its
# reason, scope, verify on a tampered row, bad input that writes nothing,
# a closed store, threads sharing one store, a store inherited by fork.
import json
import math
import os
import pickle
import threading
import time

import pytest

import cplane

T0 = 1_700_000_000_000_000  # an explicit clock, microseconds
SECOND = 1_000_000


def log_size(store):
    return store.log_end()


@pytest.fixture
def store(url):
    with cplane.ControlStore(url) as s:
        s.create_project("alpha", "Project Alpha", now=T0)
        yield s


def test_the_round_trip_reads_like_the_original_store(url):
    with cplane.ControlStore(url, lease_seconds=900) as store:
        store.create_project("alpha", "Project Alpha")
        item_id = store.enqueue("alpha", {"task": "summarise the report"})
        item = store.claim("worker-1")
        assert isinstance(item, cplane.ClaimedItem)
        assert item.item_id == item_id and item.project_id == "alpha"
        assert item.payload == {"task": "summarise the report"}
        assert item.fence == 1 and item.attempts == 1
        assert isinstance(item.lease_expires_at, int)
        store.finish(item.item_id, fence=item.fence, status="done", detail="ok")
        events = store.events(item_id)
        assert [e["event_type"] for e in events] == ["queued", "claimed", "done"]
        assert [e["fence"] for e in events] == [None, 1, 1]
        assert all(isinstance(e["seq"], int) and isinstance(e["at"], int) for e in events)
        assert events[0]["payload"] == {"task": "summarise the report"}
        row = store.item(item_id)
        assert row["status"] == "done" and row["detail"] == "ok" and row["owner"] == "worker-1"
        assert store.claim("worker-1") is None
        assert cplane.verify_ledger(store) == []
    assert store.closed


def test_a_json_string_payload_is_taken_as_json(store):
    item_id = store.enqueue("alpha", '{"n": [1, 2.5, "é"]}', now=T0)
    assert store.item(item_id)["payload"] == {"n": [1, 2.5, "é"]}
    store.enqueue("alpha", ["a", {"b": None}], now=T0)
    assert store.claim("w", now=T0).payload == {"n": [1, 2.5, "é"]}
    assert store.claim("w", now=T0).payload == ["a", {"b": None}]


def test_a_lease_is_in_seconds_and_now_in_microseconds(store):
    store.enqueue("alpha", {}, now=T0)
    item = store.claim("w", lease_seconds=1.5, now=T0)
    assert item.lease_expires_at == T0 + 1_500_000
    assert store.heartbeat(item.item_id, item.fence, 30, now=T0 + SECOND) == T0 + 31 * SECOND


def test_a_stale_fence_is_refused_with_its_reason_and_writes_nothing(store):
    store.enqueue("alpha", {}, now=T0)
    first = store.claim("w1", lease_seconds=10, now=T0)
    second = store.claim("w2", lease_seconds=10, now=T0 + 11 * SECOND)
    assert second.item_id == first.item_id and second.fence == first.fence + 1
    before = log_size(store)
    for call in (lambda: store.finish(first.item_id, fence=first.fence, status="done"),
                 lambda: store.heartbeat(first.item_id, first.fence),
                 lambda: store.release(first.item_id, first.fence)):
        with pytest.raises(cplane.FenceRejected) as e:
            call()
        assert e.value.reason == "stale_fence"
        assert isinstance(e.value, cplane.Error)
        assert "fence" in str(e.value)
    assert log_size(store) == before
    verdict = store.check_fence(first.item_id, first.fence)
    assert not verdict and verdict.reason == "stale_fence"
    with pytest.raises(cplane.FenceRejected):
        cplane.require(verdict)
    assert store.check_fence(second.item_id, second.fence)


def test_every_fence_refusal_names_its_reason(store):
    ready = store.enqueue("alpha", {}, now=T0)
    with pytest.raises(cplane.FenceRejected) as e:
        store.finish(ready, fence=1, status="done")
    assert e.value.reason == "not_claimed"
    with pytest.raises(cplane.FenceRejected) as e:
        store.finish("no-such-item", fence=1, status="done")
    assert e.value.reason == "unknown_item"
    item = store.claim("w", now=T0)
    store.finish(item.item_id, fence=item.fence, status="failed", detail="boom")
    with pytest.raises(cplane.FenceRejected) as e:
        store.finish(item.item_id, fence=item.fence, status="done")
    assert e.value.reason == "terminal"
    other = store.enqueue("alpha", {}, now=T0)
    claimed = store.claim("w", now=T0)
    store.cancel(other, "not wanted")
    with pytest.raises(cplane.FenceRejected) as e:
        store.finish(claimed.item_id, fence=claimed.fence)
    assert e.value.reason == "cancelled"


def test_not_found_and_invalid_argument_carry_their_reasons(store):
    with pytest.raises(cplane.NotFound) as e:
        store.enqueue("nowhere", {})
    assert e.value.reason == "unknown_project"
    with pytest.raises(cplane.NotFound) as e:
        store.item("no-such-item")
    assert e.value.reason == "unknown_item"
    with pytest.raises(cplane.NotFound) as e:
        store.session_heartbeat("no-such-session")
    assert e.value.reason == "unknown_session"
    with pytest.raises(cplane.InvalidArgument) as e:
        store.create_project("alpha", "again")
    assert e.value.reason == "already_exists"
    assert isinstance(e.value, ValueError)


def test_a_scoped_actor_sees_only_its_projects(store):
    store.create_project("beta", "Project Beta", now=T0)
    store.grant("alpha", "alice", now=T0)
    store.assign("beta", "bob", now=T0)
    assert store.visible_projects() == ["alpha", "beta"]
    assert store.visible_projects("alice") == ["alpha"]
    assert store.visible_projects(actor_id="bob") == ["beta"]
    beta_item = store.enqueue("beta", {}, now=T0)
    before = log_size(store)
    with pytest.raises(cplane.ScopeDenied) as e:
        store.enqueue("beta", {}, actor_id="alice")
    assert e.value.reason == "out_of_scope"
    assert "beta" not in str(e.value)
    with pytest.raises(cplane.ScopeDenied):
        store.enqueue("nowhere", {}, actor_id="alice")  # unknown and foreign look alike
    with pytest.raises(cplane.ScopeDenied):
        store.item(beta_item, actor_id="alice")
    with pytest.raises(cplane.ScopeDenied):
        store.events(beta_item, actor_id="alice")
    assert store.claim("alice-worker", actor_id="alice") is None
    assert log_size(store) == before
    mine = store.enqueue("alpha", {"x": 1}, actor_id="alice", now=T0)
    item = store.claim("alice-worker", actor_id="alice", now=T0)
    assert item.item_id == mine
    assert store.item(mine, actor_id="alice")["status"] == "claimed"


def test_verify_names_a_tampered_row(backend, url):
    with cplane.ControlStore(url) as store:
        store.create_project("alpha", "Project Alpha")
        item_id = store.enqueue("alpha", {})
        item = store.claim("worker-1")
        store.finish(item.item_id, fence=item.fence)
        assert cplane.verify_ledger(store) == []
    backend.execute(url, "UPDATE items SET owner = ? WHERE item_id = ?", "mallory", item_id)
    with cplane.ControlStore(url) as store:
        problems = cplane.verify_ledger(store)
        assert [(p.kind, p.item_id, p.project_id) for p in problems] == [
            ("owner_disagrees", item_id, "alpha")]
        assert "mallory" in problems[0].detail
        report = cplane.rebuild(store)
        assert report["changes_total"] == 1
        assert cplane.verify_ledger(store) == []


def test_export_and_audit_agree_with_the_store(tmp_path, store):
    store.enqueue("alpha", {}, now=T0)
    path = tmp_path / "log.export"
    summary = cplane.export(store, path)
    assert summary["events"] == 2
    report = cplane.audit(path, against=store)
    assert report["problems"] == [] and report["events"] == 2
    with pytest.raises(cplane.InvalidArgument):
        cplane.export(store, path)  # never over a file


def test_archive_with_redacted_payloads_audits_clean_and_holds_no_payload(tmp_path, store):
    for n in range(3):
        store.enqueue("alpha", {"email": f"person{n}@example.org"}, now=T0 + n)
    for n in range(2):
        item = store.claim("worker-1", now=T0 + 10 + n)
        store.finish(item.item_id, fence=item.fence, now=T0 + 20 + n)
    segment = tmp_path / "done.seg"
    report = cplane.archive(store, before=T0 + 100, to=segment, redact_payloads=True,
                            now=T0 + 1000)
    assert (report["streams"], report["redacted"], report["dry_run"]) == (2, 2, False)
    assert (report["items"], report["sessions"], report["schedules"]) == (2, 0, 0)
    assert b"example.org" not in segment.read_bytes()
    audit = cplane.audit(segment, against=store)
    assert audit["problems"] == []
    assert (audit["redacted_payloads"], audit["segment_id"]) == (2, report["segment_id"])
    assert cplane.verify_ledger(store) == []
    with pytest.raises(cplane.InvalidArgument):
        cplane.archive(store, before=T0 + 100, to=segment)  # never over a file


def test_archive_forget_keys_lets_a_released_key_make_a_new_item(tmp_path, store):
    first = store.enqueue("alpha", {"n": 1}, key="nightly-1", now=T0)
    item = store.claim("worker-1", now=T0 + 10)
    store.finish(item.item_id, fence=item.fence, now=T0 + 20)
    kept = cplane.archive(store, before=T0 + 100, to=tmp_path / "dry.seg", dry_run=True,
                          forget_keys=True, now=T0 + 1000)
    assert kept["keys_released"] == 1
    assert store.enqueue("alpha", {"n": 1}, key="nightly-1", now=T0 + 1000) == first
    report = cplane.archive(store, before=T0 + 100, to=tmp_path / "a.seg", forget_keys=True,
                            now=T0 + 1000)
    assert (report["items"], report["keys_released"]) == (1, 1)
    second = store.enqueue("alpha", {"n": 1}, key="nightly-1", now=T0 + 2000)
    assert second != first
    assert cplane.verify_ledger(store) == []


def test_a_refused_export_leaves_no_file_behind(tmp_path, url):
    # A file left by a refusal would block the retry ("never over a file").
    store = cplane.ControlStore(url)
    store.create_project("alpha", "Project Alpha")
    with pytest.raises(cplane.InvalidArgument):
        cplane.export(store, tmp_path / "f.export", since=-5)
    assert not (tmp_path / "f.export").exists()
    store.close()
    with pytest.raises(cplane.InvalidArgument):
        cplane.export(store, tmp_path / "e.export")
    assert not (tmp_path / "e.export").exists()
    with cplane.ControlStore(url) as again:
        assert cplane.export(again, tmp_path / "e.export")["events"] == 1


@pytest.mark.parametrize("call", [
    lambda s: s.enqueue("alpha", "\udcff"),
    lambda s: s.enqueue("alpha", {"k": "\udcff"}),
    lambda s: s.enqueue("alpha", {"\ud800": 1}),
    lambda s: s.create_project("\udcff", "t"),
    lambda s: s.item("\udcff"),
])
def test_text_with_a_lone_surrogate_is_invalid_argument(store, call):
    before = log_size(store)
    with pytest.raises(cplane.InvalidArgument) as e:
        call(store)
    assert "surrogate" in str(e.value)
    assert log_size(store) == before


def test_lengths_of_time_past_ten_years_are_refused_with_their_name(store, url):
    before = log_size(store)
    for delay in (1e300, 9.3e12):
        with pytest.raises(cplane.InvalidArgument) as e:
            store.enqueue("alpha", {}, delay_seconds=delay)
        assert "delay_seconds" in str(e.value) and "ten years" in str(e.value)
    assert log_size(store) == before
    for timeout in (1e300, 1e-9):
        with pytest.raises(cplane.InvalidArgument) as e:
            cplane.ControlStore(url, lock_timeout=timeout)
        assert "lock_timeout" in str(e.value)


def test_an_unserialisable_payload_is_named_in_one_line(store):
    with pytest.raises(cplane.InvalidArgument) as e:
        store.enqueue("alpha", {"x": float("nan")})
    assert "\n" not in str(e.value) and "ValueError" in str(e.value)


def test_a_payload_edited_into_bad_json_is_a_corruption_error(backend, url):
    with cplane.ControlStore(url) as store:
        store.create_project("alpha", "Project Alpha")
        item_id = store.enqueue("alpha", {"a": 1})
    backend.execute(url, "UPDATE items SET payload = ? WHERE item_id = ?", "{bad", item_id)
    with cplane.ControlStore(url) as store:
        with pytest.raises(cplane.StorageError) as e:
            store.item(item_id)
        assert e.value.category == "corruption"




@pytest.mark.parametrize("lease", [0, -1, -0.5, float("nan"), float("inf"), "900", True, [900]])
def test_a_lease_that_is_not_a_positive_finite_number_is_refused(store, lease):
    store.enqueue("alpha", {}, now=T0)
    before = log_size(store)
    with pytest.raises(cplane.InvalidArgument) as e:
        store.claim("w", lease_seconds=lease)
    assert "lease_seconds" in str(e.value)
    assert log_size(store) == before
    with pytest.raises(cplane.InvalidArgument):
        cplane.ControlStore(store.url, lease_seconds=lease)


class NotJson:
    pass


@pytest.mark.parametrize("payload", [{"x": NotJson()}, {"x": float("nan")}, {1j: 2}, b"{}",
                                     "{not json", "", {"x": {1, 2}}])
def test_a_payload_that_is_not_json_is_refused_and_writes_nothing(store, payload):
    before = log_size(store)
    with pytest.raises(cplane.InvalidArgument) as e:
        store.enqueue("alpha", payload)
    assert e.value.reason == "invalid_input"
    with pytest.raises(cplane.InvalidArgument):
        store.enqueue_batch("alpha", [{"ok": 1}, payload])
    assert log_size(store) == before
    assert store.status_counts()["ready"] == 0


def test_a_circular_payload_is_refused(store):
    loop = {}
    loop["self"] = loop
    with pytest.raises(cplane.InvalidArgument):
        store.enqueue("alpha", loop)
    assert log_size(store) == 1


@pytest.mark.parametrize("fence", [1.0, "1", True, None, -1, 2**70])
def test_a_fence_that_is_not_an_int_is_refused(store, fence):
    store.enqueue("alpha", {}, now=T0)
    item = store.claim("w", now=T0)
    before = log_size(store)
    for call in (lambda: store.finish(item.item_id, fence=fence, status="done"),
                 lambda: store.heartbeat(item.item_id, fence),
                 lambda: store.release(item.item_id, fence)):
        with pytest.raises(cplane.InvalidArgument) as e:
            call()
        assert "fence" in str(e.value)
    assert log_size(store) == before
    store.finish(item.item_id, fence=item.fence, status="done")


@pytest.mark.parametrize("status", ["ok", "DONE", "", 1, None, "cancelled"])
def test_a_status_outside_done_and_failed_is_refused(store, status):
    store.enqueue("alpha", {}, now=T0)
    item = store.claim("w", now=T0)
    before = log_size(store)
    with pytest.raises(cplane.InvalidArgument) as e:
        store.finish(item.item_id, fence=item.fence, status=status)
    assert "status" in str(e.value)
    assert log_size(store) == before
    assert store.item(item.item_id)["status"] == "claimed"


def test_a_closed_store_raises_invalid_argument_and_writes_nothing(url):
    store = cplane.ControlStore(url)
    store.create_project("alpha", "Project Alpha")
    store.close()
    store.close()  # idempotent
    assert store.closed and "closed" in repr(store)
    for call in (lambda: store.enqueue("alpha", {}), lambda: store.claim("w"),
                 lambda: store.finish("x", fence=1), lambda: cplane.verify_ledger(store)):
        with pytest.raises(cplane.InvalidArgument) as e:
            call()
        assert e.value.reason == "misuse" and "closed" in str(e.value)
    with cplane.ControlStore(url) as again:
        assert again.log_end() == 1


def test_refusals_pickle_with_their_reason():
    e = pickle.loads(pickle.dumps(cplane.FenceRejected("stale", "stale_fence")))
    assert isinstance(e, cplane.FenceRejected) and e.reason == "stale_fence" and str(e) == "stale"
    s = pickle.loads(pickle.dumps(cplane.StorageError("locked", "busy")))
    assert s.category == "busy"


def test_threads_share_one_store_and_take_turns(store):
    store.enqueue_batch("alpha", [{"i": i} for i in range(400)])
    done = []

    def work(name):
        while (item := store.claim(name)) is not None:
            store.finish(item.item_id, fence=item.fence)
            done.append(item.item_id)

    threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(done) == 400 and len(set(done)) == 400
    assert store.status_counts()["done"] == 400
    assert cplane.verify_ledger(store) == []


def test_a_store_inherited_through_fork_is_refused_in_the_child(store):
    store.enqueue("alpha", {}, now=T0)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's store must not be used, nor closed
        code = 1
        try:
            store.claim("child")
        except cplane.InvalidArgument as e:
            code = 0 if e.reason == "misuse" and "fork" in str(e) else 2
        except BaseException:
            code = 3
        os.write(w, bytes([code]))
        os._exit(0)
    os.close(w)
    code = os.read(r, 1)
    os.waitpid(pid, 0)
    assert code == bytes([0])
    item = store.claim("parent", now=T0)  # the parent's connection is intact
    store.finish(item.item_id, fence=item.fence)


def test_sessions_and_the_gate(store):
    pr = store.enqueue("alpha", {}, kind="pr", head="abc", now=T0)
    store.open_session("agent-1", now=T0)
    store.open_session("agent-2", now=T0)
    a = store.assign_and_lease("agent-1", pr, ["push"], 300, now=T0)
    assert a["outcome"] == "assigned" and a["expected_head"] == "abc"
    assert store.assign_and_lease("agent-2", pr, ["push"], now=T0)["outcome"] == "wait"
    ok = store.require_valid_assignment("agent-1", pr, a["fence"], "push", now=T0)
    assert ok and cplane.require(ok) is None
    assert store.record_mutation("agent-1", pr, a["fence"], "push", now=T0)
    before = store.log_end()
    with pytest.raises(cplane.MutationDenied) as e:
        store.require_valid_assignment("agent-1", pr, a["fence"], "merge", now=T0)
    assert e.value.reason == "action_not_allowed"
    with pytest.raises(cplane.MutationDenied) as e:
        store.record_mutation("agent-2", pr, a["fence"], "push", now=T0)
    assert e.value.reason == "no_live_lease"
    assert store.log_end() == before  # a denial records nothing
    denied = store.check_assignment("agent-1", pr, a["fence"], "merge", now=T0)
    assert not denied and denied.reason == "action_not_allowed"
    store.observe_head(pr, "def", now=T0 + 1)
    drift = store.check_assignment("agent-1", pr, a["fence"], "push", now=T0 + 2)
    with pytest.raises(cplane.MutationDenied) as e:
        cplane.require(drift)
    assert e.value.reason == "head_drift"
    with pytest.raises(cplane.MutationDenied) as e:
        store.require_valid_assignment("agent-1", pr, a["fence"], "push", now=T0 + 2)
    assert e.value.reason == "head_drift"
    assert store.close_session("agent-1", now=T0 + 3) == [pr]
    assert [s["session_id"] for s in store.sessions(now=T0 + 3)] == ["agent-1", "agent-2"]


def test_the_allocator_and_the_terminal_path(store):
    low = store.enqueue("alpha", {}, priority=5, now=T0)
    urgent = store.enqueue("alpha", {}, now=T0)
    assert store.enter_terminal_path(urgent, "release blocker", now=T0)
    store.open_session("agent", now=T0)
    preview = store.allocate_next("agent", now=T0)
    assert preview["outcome"] == "preview" and preview["item_id"] == urgent
    got = store.allocate_next("agent", apply=True, actions=["push"], now=T0)
    assert got["outcome"] == "assigned" and got["item_id"] == urgent
    assert [r["item_id"] for r in store.terminal_path()] == [urgent]
    assert store.allocate_next("agent", now=T0)["item_id"] == low


def test_incident_links(store):
    item_id = store.enqueue("alpha", {}, kind="issue", now=T0)
    assert store.link_incident("sentry", "fp1", item_id, repo="o/r", event_count=3, now=T0)
    link = store.incident("sentry", "fp1", repo="o/r")
    assert link["target"] == item_id and link["event_count"] == 3
    assert [i["fingerprint"] for i in store.incidents(item_id)] == ["fp1"]
    with pytest.raises(cplane.NotFound) as e:
        store.incident("sentry", "nope")
    assert e.value.reason == "unknown_incident"


def test_the_lifecycle_and_flow_control(store):
    store.set_retry_policy("alpha", 2, "fixed:10s", now=T0)
    item_id = store.enqueue("alpha", {}, concurrency_key="gpu", now=T0)
    assert store.set_limit("gpu", concurrency=1, now=T0)
    item = store.claim("w", now=T0)
    store.finish(item.item_id, fence=item.fence, status="failed", now=T0 + 1)
    assert store.item(item_id)["status"] == "scheduled"
    assert store.why(item_id, now=T0 + 2)["reasons"][0]["kind"] == "scheduled"
    again = store.claim("w", now=T0 + 11 * SECOND)
    assert again.attempts == 2 and again.fence == item.fence + 1
    store.finish(again.item_id, fence=again.fence, status="failed", now=T0 + 12 * SECOND)
    assert store.item(item_id)["status"] == "failed"
    store.retry(item_id, now=T0 + 13 * SECOND)
    assert store.item(item_id)["status"] == "ready"
    assert store.pause_project("alpha", "maintenance", now=T0 + 14 * SECOND)
    assert store.claim("w", now=T0 + 15 * SECOND) is None
    assert store.resume_project("alpha", now=T0 + 16 * SECOND)
    assert [l["key"] for l in store.limits(now=T0 + 16 * SECOND)] == ["gpu"]
    assert store.claim("w", now=T0 + 17 * SECOND).item_id == item_id


def test_help_reads_well():
    doc = cplane.ControlStore.__doc__
    assert "path_or_url" in doc and "context manager" in doc
    assert "FenceRejected" in cplane.ControlStore.finish.__doc__
    assert "lease_seconds" in cplane.ControlStore.claim.__doc__


def test_a_store_that_cannot_be_opened_is_a_storage_error_with_its_category(tmp_path):
    with pytest.raises(cplane.StorageError) as e:
        cplane.ControlStore(str(tmp_path / "no-such-dir" / "x.db"))
    assert e.value.category in ("unavailable", "io")
    with pytest.raises(cplane.StorageError) as e:
        cplane.ControlStore(str(tmp_path / "missing.db"), create=False)
    assert e.value.category == "unavailable"


def test_a_read_only_store_refuses_writes(url, backend):
    if backend.name != "sqlite":
        pytest.skip("read_only is SQLite's")
    with cplane.ControlStore(url) as store:
        store.create_project("alpha", "Project Alpha")
    with cplane.ControlStore(url, read_only=True) as store:
        with pytest.raises(cplane.InvalidArgument) as e:
            store.enqueue("alpha", {})
        assert e.value.reason == "read_only"
        assert store.visible_projects() == ["alpha"]


def test_the_gil_is_released_while_a_call_waits(url):
    with cplane.ControlStore(url) as s:
        s.create_project("alpha", "Project Alpha")
    waited = {}

    def wait_for_work():
        with cplane.ControlStore(url) as store:
            t = time.monotonic()
            waited["item"] = store.claim("w", wait_seconds=1.0)
            waited["end"] = time.monotonic()
            waited["start"] = t

    t = threading.Thread(target=wait_for_work)
    t.start()
    time.sleep(0.3)
    mid = time.monotonic()  # reached only if the waiting claim let go of the GIL
    t.join()
    assert waited["item"] is None
    assert waited["end"] - waited["start"] >= 0.9
    assert mid < waited["end"] - 0.3
