"""Push delivery over WebSocket connections (Pulsar's WebSocket API), and non-persistent topics.

`PushService` (service.py) is the facade every caller uses; the work is split by responsibility:

- `connections`: the connection lifecycle ($connect: authorize, open a producer, reader or
  consumer, evicting connections that closed without their $disconnect; $disconnect; after a
  seek) and the frames clients send ($default: produce, acknowledge, negative-acknowledge,
  permits, a reader's flow control);
- `dispatch`: pushing a persistent topic's entries to its consumers and readers, each push a
  dispatch step on the durable cursor like a long poll with no wait (after a journal batch, a
  frame, a connect, a disconnect, and the maintenance run's redispatch);
- `journal_batch`: the journal consumer's pushes after sealing a batch (the subscriptions' views
  of all its topics read at once, the new entries served from memory);
- `fanout`: non-persistent topics, a publish fanned out at once to the connections open then;
- `common`: what they share (the connections a container knows, letting one go, inbox codes).
"""

from magnetar.core.push.common import NON_PERSISTENT_POLL_REASON, inbox_acks, outstanding
from magnetar.core.push.dispatch import PushReport
from magnetar.core.push.journal_batch import JournalPlan
from magnetar.core.push.service import PushService

__all__ = ["NON_PERSISTENT_POLL_REASON", "JournalPlan", "PushReport", "PushService", "inbox_acks", "outstanding"]
