"""The schema registry: a topic's schema versions, Pulsar's rules for producers, consumers and
the admin API.

A topic's schemas are kept under its schema id (`tenant/namespace/topic`, a partitioned topic's
base name: its partitions share one schema, as in Pulsar; persistent and non-persistent topics of
one name too). Versions count from 0; a delete appends a marker version, after which the topic has
no schema and the next one starts a new history (the old versions stay readable by number, so the
messages written with them still decode). Each write is one conditional put of a new version
(`SchemaStore.put_schema`): two producers racing to register different schemas get one each
version in turn, each checked against the other's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from magnetar.core.errors import Conflict, NotFound, RetryableError
from magnetar.core.naming import TopicName
from magnetar.core.schema.compatibility import check_compatible, effective_strategy
from magnetar.core.schema.types import SchemaData, StoredSchema

if TYPE_CHECKING:
    from magnetar.core.ports import Clock
    from magnetar.core.ports.schema import SchemaStore

# Pulsar's Policies fields
STRATEGY = "schema_compatibility_strategy"
AUTO_UPDATE = "is_allow_auto_update_schema"
VALIDATION_ENFORCED = "schema_validation_enforced"
_PUT_ATTEMPTS = 5
CACHE_MS = 10_000  # publishes' checks re-read a topic's versions at most this often per container


class IncompatibleSchema(Conflict):
    """Pulsar's IncompatibleSchemaException (409): the client raises `IncompatibleSchema`."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"Incompatible schema: {reason}")


def schema_id(topic: TopicName) -> str:
    base = topic.partitioned_topic
    return f"{base.tenant}/{base.namespace}/{base.local_name}"


@dataclass(frozen=True)
class SchemaPolicy:
    """A namespace's schema policies (Pulsar's fields and defaults)."""

    strategy: str = "FULL"
    auto_update: bool = True
    validation_enforced: bool = False

    @classmethod
    def of(cls, policies: dict[str, Any]) -> SchemaPolicy:
        auto = policies.get(AUTO_UPDATE)
        return cls(effective_strategy(policies.get(STRATEGY)), True if auto is None else bool(auto),
                   bool(policies.get(VALIDATION_ENFORCED, False)))


class SchemaRegistry:
    def __init__(self, store: SchemaStore, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self._cached: dict[str, tuple[int, list[StoredSchema]]] = {}  # schema id -> (read at, versions)

    # --- reading ---------------------------------------------------------------------------
    def current(self, topic: TopicName) -> list[StoredSchema]:
        """The topic's versions since its last delete, oldest first (empty: no schema)."""
        history = self.store.get_schemas(schema_id(topic))
        last_delete = max((i for i, s in enumerate(history) if s.deleted), default=-1)
        return history[last_delete + 1:]

    def latest(self, topic: TopicName) -> StoredSchema:
        versions = self.current(topic)
        if not versions:
            raise NotFound(f"Schema not found for topic {topic.partitioned_topic}")
        return versions[-1]

    def version(self, topic: TopicName, version: int) -> StoredSchema:
        for stored in self.store.get_schemas(schema_id(topic)):
            if stored.version == version:
                if stored.deleted:
                    raise NotFound(f"Schema version {version} of {topic.partitioned_topic} is deleted")
                return stored
        raise NotFound(f"Schema version {version} not found for topic {topic.partitioned_topic}")

    def version_of(self, topic: TopicName, schema: SchemaData) -> int:
        """The version identical to `schema` (Pulsar's getVersionBySchema)."""
        found = self._identical(self.current(topic), schema)
        if found is None:
            raise NotFound(f"Schema not found for topic {topic.partitioned_topic}")
        return found.version

    @staticmethod
    def _identical(versions: list[StoredSchema], schema: SchemaData) -> StoredSchema | None:
        return next((s for s in reversed(versions) if s.schema.same_as(schema)), None)

    # --- checking and writing ----------------------------------------------------------------
    def compatibility(self, topic: TopicName, schema: SchemaData, strategy: str) -> str | None:
        """None when `schema` would be accepted under `strategy`, else why not."""
        versions = self.current(topic)
        if self._identical(versions, schema) is not None:
            return None
        return check_compatible(schema, [s.schema for s in versions], strategy)

    def put(self, topic: TopicName, schema: SchemaData, strategy: str) -> int:
        """Pulsar's putSchemaIfAbsent: the identical version's number, or a new version if the
        strategy accepts it (IncompatibleSchema otherwise)."""
        for _ in range(_PUT_ATTEMPTS):
            history = self.store.get_schemas(schema_id(topic))
            last_delete = max((i for i, s in enumerate(history) if s.deleted), default=-1)
            versions = history[last_delete + 1:]
            same = self._identical(versions, schema)
            if same is not None:
                return same.version
            why = check_compatible(schema, [s.schema for s in versions], strategy)
            if why:
                raise IncompatibleSchema(why)
            version = history[-1].version + 1 if history else 0
            if self.store.put_schema(schema_id(topic), StoredSchema(version, schema, self.clock.now_ms())):
                return version
        raise RetryableError(f"The schema of {topic.partitioned_topic} changed concurrently; retry")

    def delete(self, topic: TopicName) -> int:
        """Mark the topic's schema deleted; the marker's version (NotFound without a schema)."""
        for _ in range(_PUT_ATTEMPTS):
            history = self.store.get_schemas(schema_id(topic))
            if not history or history[-1].deleted:
                raise NotFound(f"Schema not found for topic {topic.partitioned_topic}")
            version = history[-1].version + 1
            marker = StoredSchema(version, SchemaData(history[-1].schema.type), self.clock.now_ms(), deleted=True)
            if self.store.put_schema(schema_id(topic), marker):
                return version
        raise RetryableError(f"The schema of {topic.partitioned_topic} changed concurrently; retry")

    # --- publishes (checked per message: cached, so that a publish costs no read) --------------
    def cached_current(self, topic: TopicName, fresh: bool = False) -> list[StoredSchema]:
        """`current`, read at most every CACHE_MS per container (a new version may take that long
        to be seen by a publish here; `fresh` reads now)."""
        key, now = schema_id(topic), self.clock.now_ms()
        cached = self._cached.get(key)
        if fresh or cached is None or now - cached[0] >= CACHE_MS:
            cached = (now, self.current(topic))
            self._cached[key] = cached
        return cached[1]

    def check_publish(self, topic: TopicName, version: int | None, enforced: bool) -> None:
        """A message written with `version` (None: without a schema): refused when that version
        is not the topic's (NotFound), or when it has none, the topic has a schema and
        schemaValidationEnforced is set (IncompatibleSchema). Nothing is read unless one of the
        two can apply."""
        if version is None:
            if enforced and self.cached_current(topic):
                raise IncompatibleSchema("Producers cannot connect or send messages without a schema to topics "
                                         "with a schema when schemaValidationEnforced is set")
            return
        for fresh in (False, True):  # a version registered since the cache was filled: read again
            if any(s.version == version for s in self.cached_current(topic, fresh)):
                return
        raise NotFound(f"Schema version {version} not found for topic {topic.partitioned_topic}")

    # --- producers and consumers (Pulsar's checks when they connect) ---------------------------
    def for_producer(self, topic: TopicName, schema: SchemaData | None, policy: SchemaPolicy) -> int | None:
        """The version a producer writes with (None: it has no schema, or BYTES on a topic
        without one). Refused (IncompatibleSchema) when the strategy rejects its schema, when
        auto-update is off and its schema is not one of the topic's, or when the topic has a
        schema, validation is enforced and the producer has none."""
        if schema is None or (schema.type == "BYTES" and not self.current(topic)):
            if policy.validation_enforced and self.current(topic):
                raise IncompatibleSchema("Producers cannot connect or send messages without a schema to topics "
                                         "with a schema when schemaValidationEnforced is set")
            return None
        if not policy.auto_update:
            versions = self.current(topic)
            same = self._identical(versions, schema)
            if same is not None:
                return same.version
            if versions:
                raise IncompatibleSchema("the schema is not one of the topic's and isAllowAutoUpdateSchema is false")
        return self.put(topic, schema, policy.strategy)

    def for_consumer(self, topic: TopicName, schema: SchemaData, policy: SchemaPolicy) -> int | None:
        """Check a consumer's (or reader's) schema: a topic without schema takes it (as Pulsar
        registers a consumer's schema on an idle topic); otherwise it must be one of the topic's
        versions or compatible under the strategy. BYTES reads anything."""
        if schema.type == "BYTES":
            return None
        versions = self.current(topic)
        same = self._identical(versions, schema)
        if same is not None:
            return same.version
        if not versions:
            return self.put(topic, schema, policy.strategy) if policy.auto_update else None
        why = check_compatible(schema, [s.schema for s in versions], policy.strategy)
        if why:
            raise IncompatibleSchema(why)
        return None
