"""Push delivery (WebSocket API) and non-persistent topics on in-memory ports."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from magnetar.adapters.memory import ManualClock, memory_broker
from magnetar.adapters.memory_push import MemoryConnectionRegistry, MemoryPushGateway
from magnetar.core.entry import Batch, Message, MessageIdData
from magnetar.core.errors import ConsumerBusy, InvalidInput, NotFound, RetryableError
from magnetar.core.naming import TopicName
from magnetar.core.push import PushService
from magnetar.core.push.dispatch import CONNECT_WINDOW_MS
from magnetar.core.websocket import decode_message_id, encode_message_id

TOPIC = "persistent://public/default/push"
NP_TOPIC = "non-persistent://public/default/live"


class Harness:
    def __init__(self) -> None:
        self.clock = ManualClock()
        self.broker = memory_broker(self.clock)
        self.registry = MemoryConnectionRegistry()
        self.gateway = MemoryPushGateway()
        self.push = PushService(self.broker, self.registry, self.gateway, workers=1)
        self._ids = 0
        self._sealed = 0

    def open(self, path: str, **params: Any) -> str:
        self._ids += 1
        cid = f"c{self._ids}="
        self.push.connect(cid, path, {k: str(v) for k, v in params.items()})
        self.gateway.opened(cid)  # API Gateway opens it once $connect returned
        self.push.deliver_backlog(cid)
        return cid

    def vanish(self, cid: str) -> None:
        """The connection closes without its $disconnect, past the window in which a refused push
        may mean a connection still opening."""
        self.clock.advance(CONNECT_WINDOW_MS)
        self.gateway.close(cid)

    def consumer(self, sub: str = "s", topic: str = TOPIC, **params: Any) -> str:
        return self.open(f"/ws/v2/consumer/{topic.replace('://', '/')}/{sub}", **params)

    def produce(self, *payloads: str, topic: str = TOPIC, key: str | None = None) -> None:
        name = TopicName.parse(topic)
        for p in payloads:
            self.broker.writer.append(name, Batch.of([Message(p.encode(), key=key)], batched=False), "p")

    def journal(self) -> None:
        """What the journal consumer does with the records it has not seen yet."""
        records = self.broker.journal.records[self._sealed:]
        self._sealed = len(self.broker.journal.records)
        self.seal_and_push(records, self.push.plan_journal_batch(records))

    def seal_and_push(self, records: list[Any], plan: Any) -> None:
        """Seal a planned batch and push; a batch refused (a push connection announced itself after
        the plan's read: its commit fails) is planned and sealed again, as the mapping retries it."""
        try:
            self.broker.sealer.seal(records, plan.states)
        except RetryableError:
            plan = self.push.plan_journal_batch(records)
            self.broker.sealer.seal(records, plan.states)
        self.push.dispatch_journal_batch(plan)

    def got(self, cid: str) -> list[dict[str, Any]]:
        return self.gateway.take(cid)

    def frame(self, cid: str, **body: Any) -> dict[str, Any] | None:
        answer = self.push.receive_frame(cid, json.dumps(body))
        return json.loads(answer) if answer else None


def payloads(frames: list[dict[str, Any]]) -> list[str]:
    return [base64.b64decode(f["payload"]).decode() for f in frames]


@pytest.fixture
def h() -> Harness:
    return Harness()


def test_message_ids_round_trip_in_the_sdk_format() -> None:
    from magnetar.client.message import MessageId

    mid = MessageIdData(3, 42, -1, 7)
    text = encode_message_id(mid)
    assert decode_message_id(text) == mid
    assert base64.b64decode(text) == MessageId(-1, 3, 42, 7).serialize()
    with pytest.raises(InvalidInput):
        decode_message_id("not base64!")


def test_producer_frames_are_answered_as_pulsar_does(h: Harness) -> None:
    cid = h.open("/ws/v2/producer/persistent/public/default/push")
    ok = h.frame(cid, payload=base64.b64encode(b"hi").decode(), context="1", properties={"a": "b"}, key="k")
    assert ok is not None and ok["result"] == "ok" and ok["context"] == "1"
    assert decode_message_id(ok["messageId"]).entry_id == 0
    bad = json.loads(h.push.receive_frame(cid, "{nope") or "")
    assert bad["result"] == "send-error:3"
    empty = h.frame(cid, payload="", context="2")  # an empty payload is a message, as in Pulsar
    assert empty is not None and empty["result"] == "ok" and empty["context"] == "2"


def test_backlog_is_pushed_after_connect_and_acks_open_the_window(h: Harness) -> None:
    h.produce("a", "b", "c", "d", "e")
    h.journal()  # pushes serve sealed entries
    cid = h.consumer(subscriptionInitialPosition="Earliest", receiverQueueSize=2)
    first = h.got(cid)
    assert payloads(first) == ["a", "b"]
    h.frame(cid, messageId=first[0]["messageId"])
    assert payloads(h.got(cid)) == ["c"]  # one ack, one more
    h.frame(cid, messageId=first[1]["messageId"])
    assert payloads(h.got(cid)) == ["d"]


def test_journal_batch_is_pushed_from_memory(h: Harness) -> None:
    cid = h.consumer()
    h.produce("x", "y")
    h.journal()
    frames = h.got(cid)
    assert payloads(frames) == ["x", "y"]
    assert frames[0]["redeliveryCount"] == 0 and "publishTime" in frames[0]


def test_pull_mode_pushes_no_more_than_the_permits(h: Harness) -> None:
    cid = h.consumer(pullMode="true", subscriptionInitialPosition="Earliest")
    h.produce("1", "2", "3", "4")
    h.journal()
    assert h.got(cid) == []
    h.frame(cid, type="permit", permitMessages=2)
    got = h.got(cid)
    assert payloads(got) == ["1", "2"]
    for f in got:  # acknowledgements give no permits back in pull mode
        h.frame(cid, messageId=f["messageId"])
    assert h.got(cid) == []
    h.frame(cid, type="permit", permitMessages=5)
    assert payloads(h.got(cid)) == ["3", "4"]
    h.produce("5")
    h.journal()
    assert payloads(h.got(cid)) == ["5"]


def test_shared_connections_get_each_message_once(h: Harness) -> None:
    a = h.consumer(subscriptionType="Shared")
    b = h.consumer(subscriptionType="Shared")
    h.produce(*[str(i) for i in range(20)])
    h.journal()
    got_a, got_b = payloads(h.got(a)), payloads(h.got(b))
    assert sorted(got_a + got_b, key=int) == [str(i) for i in range(20)]
    assert got_a and got_b  # the journal batch is shared out


def test_a_journal_batch_shares_out_to_every_shared_connection_in_one_cursor_write(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    members = [h.consumer(subscriptionType="Shared") for _ in range(10)]
    writes: list[str] = []
    real_put = h.broker.metadata.put_cursor

    def put_cursor(*args: Any, **kwargs: Any) -> bool:
        writes.append(args[1])
        return bool(real_put(*args, **kwargs))

    monkeypatch.setattr(h.broker.metadata, "put_cursor", put_cursor)
    h.produce(*[str(i) for i in range(30)])
    h.journal()
    frames = {cid: h.got(cid) for cid in members}
    shares = {cid: payloads(got) for cid, got in frames.items()}
    assert sorted((m for got in shares.values() for m in got), key=int) == [str(i) for i in range(30)]
    assert sorted(len(got) for got in shares.values()) == [3] * 10, "a fair share each"
    assert writes == ["s"], "the ten shares in one cursor write"
    for cid, got in frames.items():  # each acknowledgement goes to its connection's inbox
        for f in got[:2]:
            h.frame(cid, messageId=f["messageId"])
    writes.clear()
    h.produce("30")
    h.journal()  # the inboxes ride on the group's one write
    assert sum(len(h.got(cid)) for cid in members) == 1 and writes.count("s") == 1
    cursor = h.broker.metadata.get_subscription_view(TopicName.parse(TOPIC), "s").cursor
    assert cursor is not None
    acked = {i for a, b in cursor.acked for i in range(a, b)} | set(range(cursor.mark_delete))
    assert len(set(range(30)) - acked) == 10, "one message of each share left unacknowledged"


def test_a_backlog_behind_a_journal_batch_goes_out_in_rounds_of_fair_shares(h: Harness) -> None:
    a, b = h.consumer(subscriptionType="Shared"), h.consumer(subscriptionType="Shared")
    h.produce(*[str(i) for i in range(10)])
    records = h.broker.journal.records[h._sealed:]
    h._sealed = len(h.broker.journal.records)
    h.broker.sealer.seal(records)  # sealed, never pushed (a failed push, say)
    h.produce("10", "11")
    h.journal()  # two new messages, twelve ready: a share of one each, round after round
    got_a, got_b = payloads(h.got(a)), payloads(h.got(b))
    assert sorted(got_a + got_b, key=int) == [str(i) for i in range(12)]
    assert len(got_a) == len(got_b) == 6, (got_a, got_b)


def test_a_shared_connection_found_closed_during_the_group_push_releases_its_share(h: Harness) -> None:
    a, b = h.consumer(subscriptionType="Shared"), h.consumer(subscriptionType="Shared")
    h.vanish(a)  # closed without its $disconnect
    h.produce(*[str(i) for i in range(6)])
    h.journal()
    assert h.registry.current(h.registry.by_id[a]) is None, "detached: its share is released"
    got = payloads(h.got(b))
    h.produce("6")
    h.journal()  # the next batch hands b what a held, as a redelivery
    got += payloads(h.got(b))
    assert sorted(got, key=int) == [str(i) for i in range(7)]


def test_negative_ack_is_redelivered_after_the_delay(h: Harness) -> None:
    cid = h.consumer(negativeAckRedeliveryDelay=0)
    h.produce("m")
    h.journal()
    (f,) = h.got(cid)
    h.frame(cid, type="negativeAcknowledge", messageId=f["messageId"])
    (again,) = h.got(cid)
    assert again["messageId"] == f["messageId"] and again["redeliveryCount"] == 1
    slow = h.consumer(sub="slow", subscriptionInitialPosition="Earliest", negativeAckRedeliveryDelay=5000)
    (g,) = h.got(slow)
    h.frame(slow, type="negativeAcknowledge", messageId=g["messageId"])
    assert h.got(slow) == []
    h.clock.advance(6000)
    report = h.push.redispatch()  # the maintenance run
    assert report.pushed == 1 and h.got(slow)[0]["redeliveryCount"] == 1


def test_disconnect_releases_to_the_other_consumer_and_reconnect(h: Harness) -> None:
    a = h.consumer(subscriptionType="Shared")
    h.produce("1", "2")
    h.journal()
    assert len(h.got(a)) == 2
    b = h.consumer(subscriptionType="Shared")
    h.push.disconnect(a)
    assert sorted(payloads(h.got(b))) == ["1", "2"]
    h.vanish(b)  # closed without its $disconnect: the next push finds it gone
    h.produce("3")
    h.journal()
    assert h.registry.current(h.registry.by_id[b]) is None  # detached: what it held is released
    c = h.consumer(subscriptionType="Shared")
    got = h.got(c)
    assert sorted(payloads(got)) == ["1", "2", "3"]
    assert all(f["redeliveryCount"] >= 1 for f in got)


def connecting(h: Harness, sub: str = "s", **params: Any) -> str:
    """A consumer whose $connect has attached it and recorded the connection, but has not returned:
    API Gateway refuses pushes to it (410) until it opens."""
    h._ids += 1
    cid = f"c{h._ids}="
    h.push.connect(cid, f"/ws/v2/consumer/{TOPIC.replace('://', '/')}/{sub}", {k: str(v) for k, v in params.items()})
    return cid


def test_a_push_refused_while_the_connection_is_still_opening_keeps_it_and_its_messages(h: Harness) -> None:
    a = connecting(h, subscriptionType="Shared")
    h.produce("1", "2")
    h.journal()  # the batch's push meets `a` before API Gateway opened it
    assert h.registry.current(h.registry.by_id[a]) is not None, "still attached"
    h.gateway.opened(a)
    h.push.deliver_backlog(a)  # the post-connect dispatch, once it is open
    got = h.got(a)
    assert payloads(got) == ["1", "2"]
    assert [f["redeliveryCount"] for f in got] == [0, 0], "never delivered before: not a redelivery"


def test_a_reconnect_racing_its_own_disconnect_gets_what_the_old_connection_held(h: Harness) -> None:
    """The client closes and reconnects at once: the old connection's $disconnect releases what it
    held and pushes it to the new one while the new one's $connect is still running."""
    old = h.consumer(subscriptionType="Shared")
    h.produce("held")
    h.journal()
    assert payloads(h.got(old)) == ["held"]  # not acknowledged
    new = connecting(h, subscriptionType="Shared")
    h.push.disconnect(old)  # its push to `new` is refused: not open yet
    assert h.got(new) == []
    h.gateway.opened(new)
    h.push.deliver_backlog(new)
    (again,) = h.got(new)
    assert payloads([again]) == ["held"] and again["redeliveryCount"] == 1


def test_a_reader_refused_while_opening_is_pushed_from_where_it_was(h: Harness) -> None:
    h.produce("r0", "r1")
    h.journal()
    h._ids += 1
    cid = f"c{h._ids}="
    h.push.connect(cid, f"/ws/v2/reader/{TOPIC.replace('://', '/')}", {"messageId": "earliest"})
    h.push.dispatch_topic(TOPIC)  # another dispatch meets it before it opens
    h.gateway.opened(cid)
    h.push.deliver_backlog(cid)
    assert payloads(h.got(cid)) == ["r0", "r1"]


def test_exclusive_subscription_frees_a_connection_that_closed_without_disconnect(h: Harness) -> None:
    a = h.consumer()
    with pytest.raises(ConsumerBusy):
        h.push.connect("other=", f"/ws/v2/consumer/{TOPIC.replace('://', '/')}/s", {})
    h.gateway.close(a)
    h.consumer()  # a's connection is gone: it is detached and the new one attaches


def test_key_shared_keeps_keys_on_one_connection(h: Harness) -> None:
    a = h.consumer(subscriptionType="Key_Shared")
    b = h.consumer(subscriptionType="Key_Shared")
    for i in range(30):
        h.produce(f"{i}", key=f"k{i % 5}")
    h.journal()
    fa, fb = h.got(a), h.got(b)
    assert len(fa) + len(fb) == 30
    assert not {f["key"] for f in fa} & {f["key"] for f in fb}


def test_reader_reads_from_earliest_within_its_window(h: Harness) -> None:
    h.produce("1", "2", "3")
    h.journal()
    r = h.open("/ws/v2/reader/persistent/public/default/push", messageId="earliest", receiverQueueSize=2)
    first = h.got(r)
    assert payloads(first) == ["1", "2"]
    h.frame(r, messageId=first[0]["messageId"])
    assert payloads(h.got(r)) == ["3"]
    after = h.open("/ws/v2/reader/persistent/public/default/push", messageId=first[0]["messageId"])
    assert payloads(h.got(after)) == ["2", "3"]  # the start is exclusive, as Pulsar's
    latest = h.open("/ws/v2/reader/persistent/public/default/push")
    assert h.got(latest) == []
    h.produce("4")
    h.journal()
    assert payloads(h.got(latest)) == ["4"]


def test_batched_entries_are_pushed_message_by_message_and_acked_by_index(h: Harness) -> None:
    name = TopicName.parse(TOPIC)
    h.broker.writer.append(name, Batch.of([Message(b"a"), Message(b"b"), Message(b"c")]), "p")
    h.journal()
    cid = h.consumer(subscriptionInitialPosition="Earliest")
    frames = h.got(cid)
    assert payloads(frames) == ["a", "b", "c"] and frames[0]["batchSize"] == 3
    h.frame(cid, messageId=frames[1]["messageId"])  # a Pulsar client acks one message of the batch
    h.push.disconnect(cid)
    again = h.consumer(subscriptionInitialPosition="Earliest")
    assert payloads(h.got(again)) == ["a", "c"]  # redelivered without the acknowledged one


def test_non_persistent_fan_out(h: Harness) -> None:
    np = TopicName.parse(NP_TOPIC)
    assert h.push.publish_non_persistent(np, [Message(b"lost")], "p")[0] == MessageIdData(-1, -1, -1, -1)
    a = h.consumer(topic=NP_TOPIC)
    pull = h.consumer(sub="pull", topic=NP_TOPIC, pullMode="true")
    (mid,) = h.push.publish_non_persistent(np, [Message(b"hello")], "p")
    assert mid.entry_id >= 0
    assert payloads(h.got(a)) == ["hello"] and h.got(pull) == []  # no permits: dropped
    h.frame(pull, type="permit", permitMessages=1)
    h.push.publish_non_persistent(np, [Message(b"1"), Message(b"2")], "p")
    assert payloads(h.got(pull)) == ["1"] and payloads(h.got(a)) == ["1", "2"]
    with pytest.raises(ConsumerBusy):
        h.push.connect("x=", f"/ws/v2/consumer/{NP_TOPIC.replace('://', '/')}/s", {})
    producer = h.open("/ws/v2/producer/non-persistent/public/default/live")
    ok = h.frame(producer, payload=base64.b64encode(b"p").decode())
    assert ok is not None and ok["result"] == "ok" and payloads(h.got(a)) == ["p"]


def test_non_persistent_window_and_key_shared(h: Harness) -> None:
    np = TopicName.parse(NP_TOPIC)
    small = h.consumer(topic=NP_TOPIC, receiverQueueSize=1)
    h.push.publish_non_persistent(np, [Message(b"1"), Message(b"2")], "p")
    (f,) = h.got(small)
    h.frame(small, messageId=f["messageId"])  # the ack gives the permit back
    h.push.publish_non_persistent(np, [Message(b"3")], "p")
    assert payloads(h.got(small)) == ["3"]
    a = h.consumer(sub="ks", topic=NP_TOPIC, subscriptionType="Key_Shared")
    b = h.consumer(sub="ks", topic=NP_TOPIC, subscriptionType="Key_Shared")
    h.push.publish_non_persistent(np, [Message(b"x", key=f"k{i}") for i in range(20)], "p")
    fa, fb = h.got(a), h.got(b)
    assert len(fa) + len(fb) == 20 and not {f["key"] for f in fa} & {f["key"] for f in fb}


def test_unsealed_entries_wait_for_the_journal_consumer(h: Harness) -> None:
    h.produce("early")
    cid = h.consumer(subscriptionInitialPosition="Earliest")
    assert h.got(cid) == []  # in the journal only: never read from its tail by a push
    h.journal()
    assert payloads(h.got(cid)) == ["early"]


def test_acknowledgement_after_disconnect_still_counts(h: Harness) -> None:
    cid = h.consumer()
    h.produce("m")
    h.journal()
    (f,) = h.got(cid)
    h.push.disconnect(cid)
    h.frame(cid, messageId=f["messageId"])  # sent before closing, handled after $disconnect
    again = h.consumer()
    assert h.got(again) == []


def test_the_push_after_a_journal_batch_serves_only_topics_with_connections(h: Harness) -> None:
    h.produce("a", topic="persistent://public/default/quiet")
    cid = h.consumer()
    h.produce("b")
    records = list(h.broker.journal.records)
    plan = h.push.plan_journal_batch(records)
    h.broker.sealer.seal(records, plan.states)
    report = h.push.dispatch_journal_batch(plan)
    assert list(plan.connections) == [TOPIC] and report.topics == 1 and report.pushed == 1
    assert payloads(h.got(cid)) == ["b"]
    assert h.broker.cache.get(TOPIC, 0) is not None  # served from the batch, not read back from S3


def test_a_journal_batch_of_many_topics_reads_their_subscriptions_in_one_call_and_commits_together(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many low-rate topics in one journal batch: the seal commits go in one call, their
    connections are looked up in one call and the subscriptions pushed to are read in one call,
    not a commit, a lookup and a read per topic."""
    topics = [f"persistent://public/default/many-{i}" for i in range(12)]
    cids = [h.consumer(topic=t) for t in topics]
    h.consumer(sub="other", topic=topics[0])  # a second subscription on one topic
    calls: dict[str, list[int]] = {"views": [], "view": [], "commits": []}
    metadata = h.broker.metadata
    view, commits = metadata.get_subscription_view, metadata.commit_segments

    def views(keys):  # type: ignore[no-untyped-def]
        calls["views"].append(len(keys))
        return [view(t, s) for t, s in keys]

    monkeypatch.setattr(metadata, "get_subscription_views", views)
    monkeypatch.setattr(metadata, "get_subscription_view", lambda t, s: calls["view"].append(1) or view(t, s))
    monkeypatch.setattr(metadata, "commit_segments", lambda c: calls["commits"].append(len(c)) or commits(c))
    lookups, of_topics = [], h.registry.of_topics
    monkeypatch.setattr(h.registry, "of_topics", lambda topics: lookups.append(len(topics)) or of_topics(topics))
    for n, t in enumerate(topics):
        h.produce(f"m{n}", topic=t)
    h.journal()
    assert [payloads(h.got(cid)) for cid in cids] == [[f"m{n}"] for n in range(12)]
    assert calls["commits"] == [12]  # every topic's segment committed in one call
    assert calls["views"] == [13]  # the 13 subscriptions' views in one read
    assert calls["view"] == []  # and no subscription read its own
    assert lookups == [12]  # the 12 topics' connections in one lookup


def test_a_reader_that_connects_while_its_entry_is_being_sealed_gets_it_pushed(h: Harness) -> None:
    """The connection's own first read finds the entry not sealed yet; the journal batch's push
    must find the connection (looked up after the seal), or the entry waits for the next message."""
    h.produce("r0")
    records = list(h.broker.journal.records)
    plan = h.push.plan_journal_batch(records)  # before the seal: no connection yet
    cid = h.open(f"/ws/v2/reader/{TOPIC.replace('://', '/')}", messageId="earliest")
    assert h.got(cid) == []  # nothing sealed when it read
    with pytest.raises(RetryableError):  # planned before the connect: its seal cannot commit
        h.broker.sealer.seal(records, plan.states)
    h.seal_and_push(records, plan)  # the batch again, as the mapping retries it
    assert payloads(h.got(cid)) == ["r0"]


@pytest.mark.parametrize("path,params", [
    ("/ws/v2/consumer/persistent/public/default/t", {}),  # no subscription
    ("/ws/v2/consumer/persistent/public/default/t/s", {"subscriptionType": "Nope"}),
    ("/ws/v2/consumer/persistent/public/default/t/s", {"receiverQueueSize": "x"}),
    ("/ws/v2/producer/bogus/public/default/t", {}),
    ("/ws/v2/listener/persistent/public/default/t", {}),
    ("/ws/v2/reader/persistent/public/default/t", {"messageId": "zz"}),
    ("/admin/v2/t", {}),
])
def test_bad_paths_and_parameters_are_refused(h: Harness, path: str, params: dict[str, str]) -> None:
    with pytest.raises(InvalidInput):
        h.push.connect("bad=", path, params)
    assert h.registry.connections == {}


def test_unknown_namespace_is_refused(h: Harness) -> None:
    with pytest.raises(NotFound):
        h.push.connect("x=", "/ws/v2/consumer/non-persistent/public/nope/t/s", {})


def test_acknowledgements_wait_in_the_inbox_until_half_the_window(h: Harness) -> None:
    cid = h.consumer(receiverQueueSize=10, subscriptionInitialPosition="Earliest")
    h.produce(*[str(i) for i in range(20)])
    h.journal()
    window = h.got(cid)
    assert len(window) == 10
    name = TopicName.parse(TOPIC)

    def mark_delete() -> int:
        cursor = h.broker.metadata.get_subscription_view(name, "s").cursor
        assert cursor is not None
        return cursor.mark_delete

    for f in window[:4]:
        h.frame(cid, messageId=f["messageId"])
    assert mark_delete() == 0 and len(h.registry.connections[cid].acks) == 4  # no cursor write yet
    h.frame(cid, messageId=window[4]["messageId"])  # half the window: written, and refilled
    assert mark_delete() == 5  # (the inbox keeps them until INBOX_CLEAR_AT: applying them again is a no-op)
    assert payloads(h.got(cid)) == [str(i) for i in range(10, 15)]
    h.frame(cid, messageId=window[5]["messageId"])
    h.push.disconnect(cid)  # the inbox is written before the consumer is detached
    assert mark_delete() == 6
    again = h.consumer(receiverQueueSize=10)
    assert payloads(h.got(again)) == [str(i) for i in range(6, 16)]


def test_inbox_acknowledgements_written_to_the_cursor_are_taken_off_the_connection_in_one_write_later(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """A low-rate consumer: each journal batch's claim writes the inbox to the cursor, and the inbox
    is emptied once it holds INBOX_CLEAR_AT, or by a step with nothing to push (the maintenance
    run), not after every claim: one connection write per acknowledgement, not two."""
    from magnetar.core.push.common import INBOX_CLEAR_AT

    cid = h.consumer(subscriptionInitialPosition="Earliest")
    clears: list[int] = []
    clear = h.registry.clear_acks
    monkeypatch.setattr(h.registry, "clear_acks", lambda conn, acks: clears.append(len(acks)) or clear(conn, acks))
    name = TopicName.parse(TOPIC)
    for i in range(INBOX_CLEAR_AT + 8):
        h.produce(str(i))
        h.journal()
        [frame] = h.got(cid)
        assert payloads([frame]) == [str(i)]  # one message at a time, nothing pushed twice
        h.frame(cid, messageId=frame["messageId"])
    cursor = h.broker.metadata.get_subscription_view(name, "s").cursor
    assert cursor is not None and cursor.mark_delete == INBOX_CLEAR_AT + 7  # every claim wrote the inbox
    assert clears == [INBOX_CLEAR_AT]
    h.push.redispatch()  # the maintenance run: the last acknowledgement written, the inbox emptied
    cursor = h.broker.metadata.get_subscription_view(name, "s").cursor
    assert cursor is not None and cursor.mark_delete == INBOX_CLEAR_AT + 8
    assert clears == [INBOX_CLEAR_AT, 8] and h.registry.connections[cid].acks == frozenset()
    h.push.redispatch()
    assert clears == [INBOX_CLEAR_AT, 8]  # nothing left to write or clear


def test_the_maintenance_run_reads_every_topics_connections_and_views_at_once(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    topics = [f"persistent://public/default/idle-{i}" for i in range(5)]
    cids = [h.consumer(topic=t) for t in topics]
    calls: dict[str, list[int]] = {"of_topics": [], "of_topic": [], "views": [], "view": []}
    registry, metadata = h.registry, h.broker.metadata
    of_topic, view = registry.of_topic, metadata.get_subscription_view
    monkeypatch.setattr(registry, "of_topic", lambda t: calls["of_topic"].append(1) or of_topic(t))
    monkeypatch.setattr(registry, "of_topics", lambda ts: calls["of_topics"].append(len(ts)) or {
        t: of_topic(t) for t in ts if of_topic(t)})

    def views(keys):  # type: ignore[no-untyped-def]
        calls["views"].append(len(keys))
        return [view(t, s) for t, s in keys]

    monkeypatch.setattr(metadata, "get_subscription_views", views)
    monkeypatch.setattr(metadata, "get_subscription_view", lambda t, s: calls["view"].append(1) or view(t, s))
    h.produce("late", topic=topics[3])
    h.broker.sealer.seal(list(h.broker.journal.records))  # sealed, never pushed (a failed push)
    report = h.push.redispatch()
    assert calls["of_topics"] == [5] and calls["of_topic"] == [] and calls["views"] == [5]
    assert report.pushed == 1 and payloads(h.got(cids[3])) == ["late"]


def test_a_batch_index_acknowledged_again_after_its_entry_changes_nothing() -> None:
    from magnetar.core.cursor import CursorState

    state = CursorState("Shared", mark_delete=0, read_position=10)
    state.acknowledge([], {5: (3, [0, 1, 2])})  # all of entry 5's messages: acknowledged whole
    before = state.to_dict()
    state.acknowledge([], {5: (3, [0])})  # the inbox's code for one of them, applied again
    assert state.to_dict() == before


def test_seek_drops_the_inbox(h: Harness) -> None:
    cid = h.consumer(subscriptionInitialPosition="Earliest")
    h.produce("a", "b")
    h.journal()
    first = h.got(cid)
    h.frame(cid, messageId=first[0]["messageId"])
    name = TopicName.parse(TOPIC)
    h.broker.subscriptions.seek(name, "s", entry_id=0)
    h.push.after_seek(name, "s")
    assert payloads(h.got(cid)) == ["a", "b"]  # from the new position; the old ack is dropped


def test_a_journal_batch_for_many_topics_is_pushed_in_parallel() -> None:
    h = Harness()
    h.push = PushService(h.broker, h.registry, h.gateway, workers=4)
    topics = [f"persistent://public/default/many-{i}" for i in range(6)]
    cids = {t: [h.consumer(sub=s, topic=t) for s in ("a", "b", "c")] for t in topics}
    for t in topics:
        h.produce("x", "y", topic=t)
    h.journal()
    for t in topics:
        for cid in cids[t]:
            assert payloads(h.got(cid)) == ["x", "y"]
