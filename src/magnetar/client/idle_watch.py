"""An idle long-polling consumer waits for its topic's next seal on a WebSocket, not in a poll.

A long poll keeps a broker function waiting (billed Lambda duration, one unit of the account's
concurrency) for as long as nothing comes; a WebSocket connection waits in API Gateway and costs
its connection minutes. So a `Consumer` whose receives (`receive()`, `batch_receive()`) have found
nothing for `IDLE_S` opens a watch: a WebSocket reader of its topic from the latest message, one message of window
(`receiverQueueSize=1`). The journal consumer pushes to the reader as soon as it seals anything
new on the topic: the watch rings, and the consumer long-polls again (the watch closes; it opens
again the next time the consumer is idle). Meanwhile the consumer looks (a poll that does not
wait) every `LOOK_S`: the look renews its lease, as its heartbeat would, and brings what a seal
does not announce (entries another consumer released, redeliveries).

The reader starts after the topic's newest message when it connects: an entry published just
before that but sealed after it would not ring, so the consumer polls as before for
`CONNECT_POLL_MS` after each connect (a seal follows a publish within the seal latency target), and a seal
late beyond that is found by the next look. API Gateway closes a connection after 10 idle
minutes or 2 hours: the watch opens again when next needed. When the WebSocket API cannot be
reached (no `websocket_url` for it, a proxy that does not pass WebSockets), the consumer
long-polls as before and tries again after `RETRY_S`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.sync.client import ClientConnection

from magnetar.client import exceptions
from magnetar.client.push import open_websocket, websocket_base
from magnetar.client.transport import Transport, topic_path
from magnetar.core.naming import TopicName

if TYPE_CHECKING:
    from magnetar.client.consumer import Consumer

log = logging.getLogger(__name__)
IDLE_S = 40.0  # a receive() that found nothing for this long waits on a watch
LOOK_S = 9.0  # while watching, a look this often (inside the consumer's 10 s heartbeat: it replaces it)
CONNECT_POLL_MS = 2_000  # the long poll after each connect: what was published just before it
RETRY_S = 60.0  # after a connect that failed, long polls this long before trying again


class IdleWatch:
    """The WebSocket reader one consumer waits on while idle: `wait` returns True when the topic
    rang (had something new sealed) since `arm`; `wake` ends a wait without a ring."""

    def __init__(self, transport: Transport, topic: TopicName, consumer_name: str) -> None:
        self._transport = transport
        self._topic = topic
        self._name = consumer_name
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._ws: ClientConnection | None = None
        self._rung = False
        self._connected_at = 0.0
        self._closed = False
        self._connecting = False
        self._failed_at = -RETRY_S

    @property
    def connected(self) -> bool:
        return self._ws is not None

    def available(self) -> bool:
        """Whether a watch may be opened: not closed for good, not connecting already, and no
        connect failed in the last RETRY_S."""
        return not self._closed and not self._connecting and time.monotonic() - self._failed_at >= RETRY_S

    def settling_ms(self) -> int:
        """How much is left of the CONNECT_POLL_MS after the connect during which the consumer
        polls as before (what was published just before the connect is sealed meanwhile)."""
        return max(0, int((self._connected_at + CONNECT_POLL_MS / 1000 - time.monotonic()) * 1000))

    def connect(self) -> None:
        """Connect in the background (the consumer long-polls meanwhile): `connected` once done;
        a failed connect makes the watch unavailable for RETRY_S."""
        with self._lock:
            if self._closed or self._connecting or self._ws is not None:
                return
            self._connecting = True
        threading.Thread(target=self._connect, name=f"watch-connect-{self._name}", daemon=True).start()

    def _connect(self) -> None:
        params = urlencode({"messageId": "latest", "receiverQueueSize": "1",
                            "readerName": f"watch-{self._name}-{uuid.uuid4().hex[:8]}"})
        base = websocket_base(self._transport.websocket_url or self._transport.base)
        url = f"{base}/ws/v2/reader/{topic_path(self._topic)}?{params}"
        try:
            ws = open_websocket(self._transport, url)
        except exceptions.PulsarException as exc:
            log.info("consumer %s: no idle watch (%s): long polling", self._name, exc.reason)
            with self._lock:
                self._failed_at, self._connecting = time.monotonic(), False
            return
        with self._lock:
            self._connecting = False
            if self._closed:
                with contextlib.suppress(Exception):
                    ws.close()
                return
            self._ws, self._rung, self._connected_at = ws, False, time.monotonic()
        self._read(ws)

    def arm(self) -> None:
        """Start a wait: a `wake` before it is forgotten (a ring is not)."""
        with self._lock:
            if not self._rung:
                self._event.clear()

    def wait(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for a ring or a `wake`; True if the topic rang. A connection that
        rang is closed: the consumer long-polls while its topic is busy and opens a new watch when
        it is idle again."""
        self._event.wait(max(0.0, timeout_s))
        with self._lock:
            rung, self._rung = self._rung, False
        if rung:
            self.drop()
        return rung

    def wake(self) -> None:
        """End a wait without a ring (messages reached the consumer another way, or it closes)."""
        self._event.set()

    def drop(self) -> None:
        """Close the connection (a new watch may be opened)."""
        with self._lock:
            ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(Exception):
                ws.close()

    def close(self) -> None:
        """Close for good (the consumer closes)."""
        with self._lock:
            self._closed = True
        self.drop()
        self._event.set()

    def _read(self, ws: ClientConnection) -> None:
        """Any frame is a ring: something new was sealed on the topic. A closed connection (API
        Gateway's idle or lifetime limit, a client failover) is forgotten: the next wait opens another."""
        try:
            for _ in ws:
                with self._lock:
                    if self._ws is ws:
                        self._rung = True
                self._event.set()
                break
        except (ConnectionClosed, WebSocketException, OSError):
            pass
        except Exception:  # a frame it could not read: the consumer looks and long-polls as without a watch
            log.exception("consumer %s: idle watch failed", self._name)
        with self._lock:
            if self._ws is ws:
                self._ws = None
        with contextlib.suppress(Exception):
            ws.close()


def receive_poll(consumer: Consumer, wait_ms: int, deadline: float | None, min_messages: int = 1,
                 max_messages: int | None = None) -> None:
    """A receive's poll (`receive`, `batch_receive`): a long poll; once nothing has come for
    IDLE_S, a wait on the consumer's idle watch until the topic rings (then a long poll), the
    deadline, or the next look."""
    watch = consumer._watch
    if watch is None or not consumer._idle(wait_ms):
        consumer._poll(wait_ms, min_messages, max_messages)
        return
    if not watch.connected:
        if watch.available():
            watch.connect()  # in the background: this long poll meanwhile
        consumer._poll(wait_ms, min_messages, max_messages)
        return
    settling_ms = watch.settling_ms()
    if settling_ms > 0:
        consumer._poll(min(wait_ms, settling_ms), min_messages, max_messages)
        return
    watch.arm()
    if consumer._queue:
        return
    look_at = consumer._answered_at + LOOK_S
    if watch.wait((look_at if deadline is None else min(look_at, deadline)) - time.monotonic()):
        consumer._active_at = time.monotonic()
        consumer._poll(wait_ms, min_messages, max_messages)
    elif not consumer._queue and time.monotonic() >= look_at:
        consumer._poll(0, 1, max_messages)


def watch_ready(consumer: Consumer, wait_ms: int) -> bool:
    """Whether a `batch_receive` goes by the consumer's idle watch now: idle, connected, settled.
    An idle consumer whose watch is not connected starts connecting; its batch receives look as
    before meanwhile (a look after the batch timeout, not a poll held for it)."""
    watch = consumer._watch
    if watch is None or not consumer._idle(wait_ms):
        return False
    if not watch.connected:
        if watch.available():
            watch.connect()
        return False
    return watch.settling_ms() == 0
