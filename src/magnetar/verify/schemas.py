"""`magnetar verify` over the schema registry: producers registering schemas at the same time.

During each run's workload (and its crash points), `REGISTRANTS` threads register
`SCHEMAS_EACH` schemas each on a side topic through the SDK's registration route, all at once.
Every schema is a record whose fields all have defaults, so any one may follow any other under
the default FULL strategy: each registration must succeed. After the run (`check`):
- the topic's versions are 0..n-1, each held by exactly one item (the conditional put: no two
  registrations took one version);
- no schema is stored twice (a registration that lost a race for a version finds the other's
  and, when it is its own, answers that one instead of adding it again);
- every registration's answer is a version that holds exactly its schema.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from magnetar.client.auth import Authentication
from magnetar.client.transport import Transport, topic_path
from magnetar.core.naming import TopicName
from magnetar.verify.history import History

REGISTRANTS = 4
SCHEMAS_EACH = 3


def _schema(registrant: int, n: int) -> str:
    fields = [{"name": f"f{registrant}_{i}", "type": "long", "default": 0} for i in range(n + 1)]
    return json.dumps({"type": "record", "name": "VerifyRecord", "fields": fields})


def start(url: str, authentication: Authentication | None, topic: str, history: History) -> tuple[str, Any]:
    """Start the registrations (threads); `check` waits for them."""
    side = TopicName.parse(topic).partitioned_topic
    name = str(TopicName.of(side.domain, side.tenant, side.namespace, f"{side.local_name}-schemas"))
    answers: list[tuple[str, int | None, str]] = []
    lock = threading.Lock()

    def register(registrant: int) -> None:
        transport = Transport(url, 60.0, authentication)
        try:
            for n in range(SCHEMAS_EACH):
                schema = _schema(registrant, n)
                body = {"type": "AVRO", "schema": schema, "properties": {}}
                try:
                    result = transport.call("POST", f"/magnetar/v1/schema/{topic_path(TopicName.parse(name))}/producer",
                                            body)
                    answer: tuple[str, int | None, str] = (schema, result.get("version"), "")
                except Exception as exc:  # recorded: a refused registration is a finding
                    answer = (schema, None, f"{type(exc).__name__}: {exc}")
                with lock:
                    answers.append(answer)
        finally:
            transport.close()

    threads = [threading.Thread(target=register, args=(r,), daemon=True) for r in range(REGISTRANTS)]
    for t in threads:
        t.start()
    return name, (threads, answers)


def check(url: str, authentication: Authentication | None, started: tuple[str, Any], history: History) -> None:
    name, (threads, answers) = started
    for t in threads:
        t.join(timeout=120)
    transport = Transport(url, 60.0, authentication)
    try:
        base = TopicName.parse(name)
        stored = transport.call("GET", f"/admin/v2/schemas/{base.tenant}/{base.namespace}/{base.local_name}/schemas")
    finally:
        transport.close()
    versions = {int(s["version"]): json.loads(s["data"]) for s in stored["getSchemaResponses"]}
    problems = history.schema_violations
    if sorted(versions) != list(range(len(versions))):
        problems.append(f"{name}: versions {sorted(versions)} are not 0..{len(versions) - 1}")
    texts = [json.dumps(v, sort_keys=True) for v in versions.values()]
    if len(set(texts)) != len(texts):
        problems.append(f"{name}: a schema is stored under two versions")
    if len(answers) != REGISTRANTS * SCHEMAS_EACH:
        problems.append(f"{name}: {len(answers)} of {REGISTRANTS * SCHEMAS_EACH} registrations finished")
    for schema, version, error in answers:
        if version is None:
            problems.append(f"{name}: a registration failed: {error or 'no version'}")
        elif versions.get(int(version)) != json.loads(schema):
            problems.append(f"{name}: version {version} does not hold the schema registered as it")
