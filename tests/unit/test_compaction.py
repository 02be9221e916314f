"""Topic compaction's core on in-memory ports: the view, steps that resume, generations,
retention, the threshold policy, crash points."""

from __future__ import annotations

import pytest

from magnetar.adapters.memory import memory_broker
from magnetar.adapters.memory_compaction import memory_compactor
from magnetar.core import crashpoints
from magnetar.core.acks import Acks
from magnetar.core.compaction import ERROR, NOT_RUN, RUNNING, SUCCESS
from magnetar.core.compaction import compactor as comp  # the run reads these limits
from magnetar.core.entry import Batch, Message
from magnetar.core.errors import Conflict
from magnetar.core.naming import NamespaceName, TopicName
from magnetar.core.policies import COMPACTION_THRESHOLD, RETENTION

T = TopicName.parse("compacted")
NS = NamespaceName("public", "default")


def publish(broker, *messages: tuple[str | None, bytes | None], batched: bool = False) -> None:  # type: ignore[no-untyped-def]
    """Each (key, value) one entry (or all one batch entry when `batched`); None value: a tombstone."""
    start = len(broker.journal.records)
    rows = [Message(v or b"", k, null_value=v is None) for k, v in messages]
    for batch in ([rows] if batched else [[r] for r in rows]):
        broker.writer.append(T, Batch.of(batch, batched=batched), "p")
    assert broker.sealer.seal(broker.journal.records[start:]).retry_from is None


def view(compactor) -> list[tuple[str | None, bytes, int]]:  # type: ignore[no-untyped-def]
    """(key, value, entry id) of the compacted view, in order."""
    out = []
    position = 0
    while True:
        page, position, _ = compactor.view.read(T, position, 3)
        for item in page:
            for i, m in enumerate(item.entry.messages):
                if i not in item.mask:
                    out.append((m.key, m.payload, item.entry.entry_id))
        if not page:
            return out


def test_latest_value_per_key_tombstones_and_keyless_messages_go() -> None:
    broker = memory_broker()
    compactor = memory_compactor(broker)
    assert compactor.status(T).status == NOT_RUN
    publish(broker, ("a", b"a1"), ("b", b"b1"), (None, b"nokey"), ("a", b"a2"), ("c", b"c1"), ("b", None))
    state = compactor.trigger(T)
    assert state.status == SUCCESS and state.horizon == 6 and state.progress is None
    assert view(compactor) == [("a", b"a2", 3), ("c", b"c1", 4)]
    assert compactor.view.kept(T, 0)[:2] == ([(3, ()), (4, ())], 6)  # the index alone agrees
    # a second run starts from the first's view and map: new values win, a deleted key comes back
    publish(broker, ("c", b"c2"), ("b", b"b2"), ("a", None))
    state = compactor.trigger(T)
    assert state.generation == 2 and state.horizon == 9
    assert view(compactor) == [("c", b"c2", 6), ("b", b"b2", 7)]
    # the first generation's objects and index are gone, the second's are there
    keys = [k for k in broker.segments.objects if k.startswith("compacted/")]
    assert keys and all("/g00000002/" in k for k in keys)
    assert all(g == 2 for g, _ in compactor.store.objects[str(T)])


def test_batches_keep_their_indexes_and_mask_the_superseded() -> None:
    broker = memory_broker()
    compactor = memory_compactor(broker)
    publish(broker, ("a", b"a1"), ("b", b"b1"), ("a", b"a2"), batched=True)
    compactor.trigger(T)
    page, _, _ = compactor.view.read(T, 0, 10)
    assert len(page) == 1 and page[0].mask == (0,)
    assert [m.payload for i, m in enumerate(page[0].entry.messages) if i not in page[0].mask] == [b"b1", b"a2"]


def test_a_large_topic_is_compacted_in_steps_that_resume(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = memory_broker()
    compactor = memory_compactor(broker)
    monkeypatch.setattr(comp, "READ_PAGE", 7)
    monkeypatch.setattr(comp, "OBJECT_ENTRIES", 4)
    publish(broker, *[(f"k{i % 15}", f"v{i}".encode()) for i in range(60)])
    state = compactor.trigger(T, budget_s=0)  # started; every later step does one page or one object
    steps = 0
    while state.progress is not None:
        assert state.status == RUNNING
        state = compactor.run(T, budget_s=0)
        steps += 1
    assert steps > 5 and state.status == SUCCESS and state.objects == 4
    assert view(compactor) == [(f"k{i % 15}", f"v{i}".encode(), i) for i in range(45, 60)]
    maps = [k for k in broker.segments.objects if k.endswith(".map")]
    assert len(maps) == 1, "each step's map replaced the one before"
    ids, position, pages = [], 0, 0
    while position < state.horizon:  # the index alone, in pages
        page, position, _ = compactor.view.kept(T, position, limit=1)
        ids += [e for e, _ in page]
        pages += 1
    assert ids == list(range(45, 60)) and pages == 2


def test_a_run_in_flight_refuses_another_trigger() -> None:
    broker = memory_broker()
    compactor = memory_compactor(broker)
    publish(broker, ("a", b"1"))
    compactor.trigger(T, budget_s=0)
    with pytest.raises(Conflict):
        compactor.trigger(T)


@pytest.mark.parametrize("point", ["compaction.after_write", "compaction.after_commit"])
def test_a_crash_during_compaction_leaves_a_consistent_state(point: str) -> None:
    broker = memory_broker()
    compactor = memory_compactor(broker)
    publish(broker, ("a", b"a1"), ("b", b"b1"), ("a", b"a2"))
    compactor.trigger(T)
    publish(broker, ("b", b"b2"), ("c", b"c1"))
    before = view(compactor)
    crashpoints.enable(point)
    try:
        with pytest.raises(crashpoints.SimulatedCrash):
            compactor.trigger(T)
    finally:
        crashpoints.disable_all()
    state = compactor.status(T)
    if point == "compaction.after_write":  # the old view still serves, the run resumes
        assert state.generation == 1 and view(compactor) == before and state.progress is not None
    else:  # the new view serves; the old generation is trash until the next run deletes it
        assert state.generation == 2 and state.trash_generation == 1
    state = compactor.run(T)
    assert state.status == SUCCESS and state.generation == 2 and state.trash_generation == 0
    assert view(compactor) == [("a", b"a2", 2), ("b", b"b2", 3), ("c", b"c1", 4)]
    # every index item points to an object that exists, and no object is left unindexed
    indexed = {o.key for o in compactor.store.objects[str(T)].values()}
    stored = {k for k in broker.segments.objects if k.endswith(".cmp")}
    assert indexed == stored


def test_retention_keeps_the_uncompacted_tail_and_the_view_outlives_trimmed_segments() -> None:
    broker = memory_broker()
    compactor = memory_compactor(broker)
    broker.admin.set_policy(NS, RETENTION, {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0})
    broker.subscriptions.subscribe(T, "s", "c", "Exclusive", "Earliest")
    publish(broker, ("a", b"a1"), ("b", b"b1"))
    compactor.trigger(T)
    publish(broker, ("a", b"a2"), ("c", b"c1"))
    broker.subscriptions.receive(T, "s", "c", max_messages=100)
    broker.subscriptions.acknowledge(T, "s", Acks(cumulative=(3, 1, -1)))  # everything acknowledged
    broker.maintenance.run()
    seal, _ = broker.metadata.get_topic_state(T)
    assert seal.first_entry == 2, "trimmed up to the horizon, not past it"
    assert view(compactor) == [("a", b"a1", 0), ("b", b"b1", 1)], "the view outlives the trimmed segments"
    compactor.trigger(T)  # the tail is still there to compact
    assert view(compactor) == [("b", b"b1", 1), ("a", b"a2", 2), ("c", b"c1", 3)]
    broker.maintenance.run()
    assert broker.metadata.get_topic_state(T)[0].first_entry == 4


def test_the_threshold_starts_compaction_from_the_maintenance_run() -> None:
    broker = memory_broker()
    compactor = memory_compactor(broker)
    publish(broker, ("a", b"x" * 100), ("a", b"y" * 100))
    broker.maintenance.run()
    assert compactor.status(T).status == NOT_RUN, "no threshold: no compaction"
    broker.admin.set_policy(NS, COMPACTION_THRESHOLD, 1_000)
    broker.maintenance.run()
    assert compactor.status(T).status == NOT_RUN, "under the threshold"
    publish(broker, *[("a", b"z" * 100) for _ in range(10)])
    broker.maintenance.run()
    state = compactor.status(T)
    assert state.status == SUCCESS and state.horizon == 12
    assert view(compactor) == [("a", b"z" * 100, 11)]


def test_an_error_is_reported_as_pulsar_does() -> None:
    broker = memory_broker()
    compactor = memory_compactor(broker)
    publish(broker, ("a", b"1"))
    compactor.trigger(T, budget_s=0)
    state = compactor.status(T)
    broker.segments.objects[state.progress.map_key] = b"\xc1not msgpack"  # a corrupt map
    state = compactor.run(T)
    assert state.status == ERROR and state.last_error and state.progress is None
    assert state.status_body() == {"status": "ERROR", "lastError": state.last_error}


def test_a_run_after_an_error_never_takes_the_failed_runs_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = memory_broker()
    compactor = memory_compactor(broker)
    monkeypatch.setattr(comp, "OBJECT_ENTRIES", 2)
    publish(broker, ("a", b"a1"), ("b", b"b1"), ("c", b"c1"), ("d", b"d1"))
    state = compactor.trigger(T, budget_s=0)
    while state.progress is not None and state.progress.objects == 0:
        state = compactor.run(T, budget_s=0)
    assert state.progress is not None and state.progress.objects == 1  # objects of generation 1 written
    broker.segments.objects[state.progress.map_key] = b"\xc1"  # then the run fails
    assert compactor.run(T).status == ERROR
    publish(broker, ("a", b"a2"))  # the next run keeps other entries in the same id range
    state = compactor.trigger(T)
    assert state.status == SUCCESS and state.generation == 2, "the failed run's number is not reused"
    assert view(compactor) == [("b", b"b1", 1), ("c", b"c1", 2), ("d", b"d1", 3), ("a", b"a2", 4)]
    assert all(g == 2 for g, _ in compactor.store.objects[str(T)]), "the failed run's objects went as trash"
    assert not [k for k in broker.segments.objects if "/g00000001/" in k]


def test_a_maintenance_run_shares_one_compaction_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = memory_broker()
    compactor = memory_compactor(broker)
    broker.admin.set_policy(NS, COMPACTION_THRESHOLD, 1)
    publish(broker, ("a", b"1"))
    monkeypatch.setattr(comp, "RUN_BUDGET_S", 0.0)
    broker.maintenance.run()
    assert compactor.status(T).status == NOT_RUN, "no budget left: the topic waits for the next run"
    monkeypatch.setattr(comp, "RUN_BUDGET_S", 60.0)
    broker.maintenance.run()
    assert compactor.status(T).status == SUCCESS


def test_a_trigger_compacts_what_was_published_before_it_sealed_or_not() -> None:
    """Pulsar's compaction compacts up to the last message published when it is triggered: the
    horizon is the writer's end, not the sealer's (messages sent just before the trigger count)."""
    broker = memory_broker()
    compactor = memory_compactor(broker)
    for value in (b"a1", b"a2"):  # appended, not sealed yet (read from the journal tail)
        broker.writer.append(T, Batch.of([Message(value, "a")], batched=False), "p")
    assert broker.metadata.get_topic_state(T)[0].next_entry == 0
    state = compactor.trigger(T)
    assert state.status == SUCCESS and state.horizon == 2
    assert view(compactor) == [("a", b"a2", 1)]


def test_a_trigger_waits_for_published_entries_to_be_readable() -> None:
    """Without journal-tail reads an entry is readable once sealed: the run waits for it within its
    budget, then goes on from where it stopped (the maintenance run, or another step)."""
    broker = memory_broker(tail_reads=False)
    compactor = memory_compactor(broker)
    start = len(broker.journal.records)
    for value in (b"b1", b"b2"):
        broker.writer.append(T, Batch.of([Message(value, "b")], batched=False), "p")
    state = compactor.trigger(T, budget_s=0.05)
    assert state.status == RUNNING and state.progress is not None and state.progress.horizon == 2
    broker.sealer.seal(broker.journal.records[start:])
    state = compactor.run(T)
    assert state.status == SUCCESS and view(compactor) == [("b", b"b2", 1)]
