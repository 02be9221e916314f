"""`magnetar verify` over Pulsar Functions: a run with a function crash point runs two functions on
its topic, one ATLEAST_ONCE and one EFFECTIVELY_ONCE, while the dispatcher dies now and then.

Before the workload (`prepare`) both are registered on the run's topic from its earliest message,
each publishing `<input>!` to its own output topic (the broker deploys their Lambda functions, the
journal consumer starts their dispatchers). The crash points kill a dispatcher after the function
ran and before its outputs are stored (`function.after_invoke`), after storing some of them
(`function.mid_store`), or after storing all and before the inputs are acknowledged
(`function.after_store`); the batch comes back after the
dispatcher's ack timeout (shortened for the run) and the maintenance run's backlog sweep (sent to
the dispatcher during the run) serves it again.

Each output topic gets a subscription of the check's (`HOLD_SUBSCRIPTION`, from its earliest
message) before the functions start: an output topic nobody subscribes to has nothing to keep (as in
Pulsar, the maintenance run's retention trims what every subscription has passed, and with none,
everything), and in a namespace without retention its outputs would be gone before the check
reads them. The check unsubscribes it when it deletes the functions.

After the run (`check`), every output carries its input's message id (`__pfn_input_msg_id__`):
- no loss: every acknowledged message of the run's topic has an output in both output topics;
- no duplicate: the EFFECTIVELY_ONCE output has at most one output per input message (a batch
  stored again is dropped by the broker's deduplication); the ATLEAST_ONCE output may repeat
  some (counted, `function_repeats`);
- nothing else: every output is `<payload>!` of a message the run sent.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field

import httpx

import magnetar
from magnetar.client import exceptions
from magnetar.client.auth import Authentication
from magnetar.core import crashpoints
from magnetar.core.functions import dispatch, inputs
from magnetar.core.naming import TopicName
from magnetar.functions.config import FunctionConfig
from magnetar.verify.history import History

POINTS = ("function.after_invoke", "function.mid_store", "function.after_store")
GUARANTEES = ("ATLEAST_ONCE", "EFFECTIVELY_ONCE")
RUN_ACK_TIMEOUT_MS = 3_000  # a dead dispatcher's batch comes back this soon during a run
DEFAULT_ACK_TIMEOUT_MS = inputs.DISPATCH_ACK_TIMEOUT_MS
SWEEP_EVERY_S = 1.0
ARMED_S = 20.0  # the functions' crash points stay armed this long into the check (their dispatchers run late)
HOLD_SUBSCRIPTION = "verify-check"  # keeps an output topic's messages until the check has read them
CODE = b"def process(value):\n    return value + '!'\n"
TIMEOUT_MS = 5_000  # the run's functions' timeout
SLOT_LEASE_S = dispatch.slot_lease_ms(FunctionConfig(tenant="public", namespace="default", name="verify",
                                                     timeoutMs=TIMEOUT_MS)) / 1000


def runs_functions(crash_points: dict[str, int]) -> bool:
    return any(p.startswith("function.") for p in crash_points)


@dataclass
class Functions:
    """The run's functions: guarantee -> (fqfn, output topic)."""

    names: dict[str, tuple[str, str]] = field(default_factory=dict)
    killed_before: int = 0  # dispatchers the functions' crash points had killed before the run


def _killed() -> int:
    return sum(n for point, n in crashpoints.fired.items() if point in POINTS)


def _name(topic: str, guarantee: str) -> str:
    return f"{TopicName.parse(topic).local_name}-{'al' if guarantee == 'ATLEAST_ONCE' else 'eo'}"


def prepare(url: str, authentication: Authentication | None, topic: str) -> Functions:
    """Register the two functions on `topic` (from its earliest message), dispatcher's ack timeout shortened."""
    from magnetar.client.admin import AdminClient

    inputs.DISPATCH_ACK_TIMEOUT_MS = RUN_ACK_TIMEOUT_MS
    base = TopicName.parse(topic)
    admin = AdminClient(url, authentication)
    client = magnetar.Client(url, authentication)
    functions = Functions(killed_before=_killed())
    try:
        for guarantee in GUARANTEES:
            name = _name(topic, guarantee)
            output = str(TopicName.of(base.domain, base.tenant, base.namespace, f"{name}-out"))
            # the outputs are kept until the check reads them (the module's docstring)
            client.subscribe(output, HOLD_SUBSCRIPTION, initial_position=magnetar.InitialPosition.Earliest).close()
            admin.create_function({"tenant": base.tenant, "namespace": base.namespace, "name": name,
                                   "className": "verify_fn.process", "inputs": [topic], "output": output,
                                   "processingGuarantees": guarantee, "subscriptionPosition": "Earliest",
                                   "timeoutMs": TIMEOUT_MS}, CODE, "verify_fn.py")
            functions.names[guarantee] = (f"{base.tenant}/{base.namespace}/{name}", output)
    finally:
        client.close()
        admin.close()
    return functions


def sweep(url: str) -> None:
    """The maintenance run's functions part: a dispatcher for every function with a backlog."""
    from magnetar.config import DEFAULT_FUNCTION_DISPATCHER

    with contextlib.suppress(httpx.HTTPError):
        httpx.post(f"{url}/2015-03-31/functions/{DEFAULT_FUNCTION_DISPATCHER}/invocations",
                   content=json.dumps({"backlog": True}), headers={"x-amz-invocation-type": "Event"}, timeout=10)


def _outputs(client: magnetar.Client, topic: str) -> list[tuple[str, str]]:
    """(input message id, payload) of every message on `topic` (none while it does not exist)."""
    out: list[tuple[str, str]] = []
    reader = None
    try:
        reader = client.create_reader(topic, magnetar.MessageId.earliest)
        while reader.has_message_available():
            try:
                message = reader.read_next(timeout_millis=3000)
            except exceptions.Timeout:  # (a hole, or the tail not sealed yet): read again on the next round
                break
            out.append((message.properties().get("__pfn_input_msg_id__", ""), message.data().decode()))
    except exceptions.TopicNotFound:  # nothing stored yet
        return []
    finally:
        if reader is not None:
            reader.close()
    return out


def _input_id(topic: str, message_id: tuple[int, int, int, int]) -> str:
    ledger, entry, partition, batch = message_id
    return f"({ledger},{entry},{partition},{batch})"


def check(url: str, authentication: Authentication | None, topic: str, functions: Functions, history: History,
          drain_s: float = 90.0) -> None:
    """The module's docstring's checks, once both outputs hold an output for every acknowledged send
    (or `drain_s` passed: whatever is missing then is lost)."""
    acked = {_input_id(topic, s.message_id): s.payload for s in history.sends if s.message_id is not None}
    sent = {s.payload for s in history.sends}
    client = magnetar.Client(url, authentication)
    try:
        started = time.monotonic()
        while True:
            outputs = {g: _outputs(client, out) for g, (_, out) in functions.names.items()}
            missing = {g: set(acked) - {i for i, _ in got} for g, got in outputs.items()}
            # a dispatcher killed by a crash point holds its dispatch slot until the slot's lease runs
            # out (docs/functions.md): the check waits that long more for each one killed
            killed = _killed() - functions.killed_before
            if not any(missing.values()) or time.monotonic() > started + drain_s + killed * SLOT_LEASE_S:
                break
            if time.monotonic() > started + ARMED_S:  # the functions' crash points had their chance
                crashpoints.disable_all()
            sweep(url)
            time.sleep(SWEEP_EVERY_S)
        crashpoints.disable_all()
        for guarantee, got in outputs.items():
            seen: dict[str, int] = {}
            for input_id, payload in got:
                seen[input_id] = seen.get(input_id, 0) + 1
                if not payload.endswith("!") or payload[:-1] not in sent:
                    history.function_violations.append(f"{guarantee}: output {payload!r} of no message sent")
            for input_id in sorted(missing[guarantee])[:20]:
                history.function_violations.append(f"{guarantee}: {acked[input_id]} {input_id} has no output")
            repeated = [i for i, n in seen.items() if n > 1]
            if guarantee == "EFFECTIVELY_ONCE":
                history.function_violations.extend(f"{guarantee}: {i} output {seen[i]} times" for i in repeated[:20])
            else:
                history.function_repeats += len(repeated)
    finally:
        client.close()
        cleanup(url, authentication, functions)


def cleanup(url: str, authentication: Authentication | None, functions: Functions) -> None:
    from magnetar.client.admin import AdminClient

    admin = AdminClient(url, authentication)
    client = magnetar.Client(url, authentication)
    try:
        for fqfn, output in functions.names.values():
            with contextlib.suppress(Exception):
                admin.delete_function(*fqfn.split("/"))
            with contextlib.suppress(Exception):  # the outputs need not be kept any longer
                client.subscribe(output, HOLD_SUBSCRIPTION).unsubscribe()
    finally:
        client.close()
        admin.close()
        inputs.DISPATCH_ACK_TIMEOUT_MS = DEFAULT_ACK_TIMEOUT_MS
