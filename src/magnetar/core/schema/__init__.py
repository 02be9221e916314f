"""Topic schemas (Pulsar's schema registry): types, compatibility strategies, the registry.

Plain Python, no AWS: `types` checks and normalizes a schema as Pulsar's REST API carries it,
`compatibility` decides whether a new schema may follow the ones a topic has (Avro's
schema-resolution rules per strategy), `registry` keeps versions behind the `SchemaStore` port.
"""

from magnetar.core.schema.compatibility import DEFAULT_STRATEGY, STRATEGIES, check_compatible
from magnetar.core.schema.registry import SchemaRegistry, schema_id
from magnetar.core.schema.types import SCHEMA_TYPES, SchemaData, StoredSchema, parse_schema

__all__ = ["DEFAULT_STRATEGY", "SCHEMA_TYPES", "STRATEGIES", "SchemaData", "SchemaRegistry", "StoredSchema",
           "check_compatible", "parse_schema", "schema_id"]
