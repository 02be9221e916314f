"""MetadataStore on one DynamoDB table (pk, sk).

| item                 | pk                       | sk                 |
|----------------------|--------------------------|--------------------|
| tenant               | TENANTS                  | <tenant>           |
| cluster              | CLUSTERS                 | <cluster>          |
| namespace            | NAMESPACES#<tenant>      | <namespace>        |
| topic (listing)      | TOPICS#<tenant>/<ns>     | <topic>            |
| writer counter       | TP#<topic>               | WRITER (a deletion's fence too) |
| seal state           | TP#<topic>               | SEAL               |
| segment              | TP#<topic>               | SEG#<last entry>   |
| cursor               | TP#<topic>               | SUB#<subscription> |
| schema version       | SCHEMA#<tenant>/<ns>/<topic> | V#<version>    |
| replicated subscription snapshot | RSUB#<topic> | <subscription>#<cluster> |
| function             | FUNCTIONS#<tenant>/<ns>  | <name>             |
| function input index | FNINPUT#<topic> / FNPATTERNS#<tenant>/<ns> | <fqfn> |
| function state key   | FNSTATE#<fqfn>           | <key>              |

Everything a dispatch step needs about one topic partition sits under one partition key, so it
is read with one BatchGetItem; every change is a single-item conditional write or one
transaction, so any Lambda may run any step and a crash leaves either all or nothing.
"""

from __future__ import annotations

from magnetar.adapters.aws.dynamodb.base import DynamoBase
from magnetar.adapters.aws.dynamodb.catalog import CatalogItems
from magnetar.adapters.aws.dynamodb.clusters import ClusterItems
from magnetar.adapters.aws.dynamodb.cursors import CursorItems
from magnetar.adapters.aws.dynamodb.deletion import DeletionItems
from magnetar.adapters.aws.dynamodb.functions import FunctionItems
from magnetar.adapters.aws.dynamodb.schemas import SchemaItems
from magnetar.adapters.aws.dynamodb.sealer import SealerItems
from magnetar.adapters.aws.dynamodb.snapshots import SnapshotItems
from magnetar.adapters.aws.dynamodb.writer import WriterItems

__all__ = ["DynamoMetadataStore"]


class DynamoMetadataStore(CatalogItems, ClusterItems, WriterItems, SealerItems, CursorItems, SchemaItems,
                          FunctionItems, DeletionItems, SnapshotItems, DynamoBase):
    """MetadataStore on one DynamoDB table: each mixin keeps the items of one responsibility."""
