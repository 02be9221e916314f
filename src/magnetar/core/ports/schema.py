"""The port of the schema registry (`magnetar.core.schema`): a topic's schema versions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from magnetar.core.schema.types import StoredSchema


class SchemaStore(Protocol):
    """A topic's schema versions (the schema registry, `magnetar.core.schema`)."""

    def get_schemas(self, schema_id: str) -> list[StoredSchema]:
        """Every version of the schema id, deleted markers included, oldest first (one query)."""
        ...

    def put_schema(self, schema_id: str, schema: StoredSchema) -> bool:
        """Store a new version; False (nothing written) when that version exists already."""
        ...
