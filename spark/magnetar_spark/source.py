"""`spark.read.format("magnetar")`: the PySpark 4 data source over Magnetar's HTTP API.

`MagnetarDataSource` is what Spark finds (`pyspark_magnetar.DefaultSource`) or what
`magnetar_spark.register(spark)` registers, under the short name `magnetar`. It hands each kind of
query to the module that does it:

    spark.read        magnetar_spark.reading (`BatchReader`): each selected topic-partition from its
                      starting to its ending offset, fixed at planning; sealed segments straight
                      from S3 (magnetar_spark.direct), the rest through the broker's reader endpoint
    spark.readStream  magnetar_spark.stream (`MagnetarStreamReader`): micro-batches
    df.write, df.writeStream
                      magnetar_spark.sink: rows published to topics

The options: magnetar_spark.options (topics, offsets, failOnDataLoss, directReads, partitions)
and magnetar_spark.settings (service.url, paging, timeouts, retries, credentials). The columns:
magnetar_spark.columns; for a topic with a schema, its fields typed (magnetar_spark.typed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StructType

from magnetar.core.naming import TopicName
from magnetar_spark.broker import BrokerClient
from magnetar_spark.columns import SCHEMA
from magnetar_spark.errors import MagnetarSourceError
from magnetar_spark.settings import TopicSettings, text_option

SHORT_NAME = "magnetar"


def typed_topic(options: Mapping[str, str]) -> Any:
    """The topic's schema as typed columns (magnetar_spark/typed.py), asked once on the driver;
    None for a topic without schema (or of a type typed columns are not made of)."""
    from magnetar_spark.typed import TypedTopic

    name = text_option(options, "topic")
    if name is None:  # several topics: the binary value column
        return None
    settings = TopicSettings(options)
    base = TopicName.parse(name).partitioned_topic
    path = "/admin/v2/schemas/" + "/".join(quote(p, safe="") for p in (base.tenant, base.namespace, base.local_name))
    with BrokerClient(settings) as broker:
        try:
            return TypedTopic.fetch(lambda suffix: broker.call("GET", suffix, "schema", fail_fast=frozenset({404})),
                                    path)
        except MagnetarSourceError as exc:
            if exc.status == 404:
                return None
            raise


class MagnetarDataSource(DataSource):
    """`spark.read.format("magnetar")`, `readStream`, `write`, `writeStream`: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> StructType:
        """The connector's columns; for a topic with an AVRO, JSON or primitive schema, its fields
        (typed) instead of the binary value (magnetar_spark/typed.py)."""
        typed = self._typed()
        return typed.schema if typed is not None else SCHEMA

    def _typed(self) -> Any:
        if "_typed_topic" not in self.__dict__:
            self._typed_topic = typed_topic(self.options)
        return self._typed_topic

    def reader(self, schema: StructType) -> DataSourceReader:
        fixed = self.schema()
        if [f.name for f in schema.fields] != [f.name for f in fixed.fields]:
            raise ValueError(f"magnetar: the schema is fixed: {fixed.simpleString()}")
        # topic / topics / topicsPattern, offsets, failOnDataLoss: magnetar_spark.options and .reading
        from magnetar_spark.options import SourceOptions
        from magnetar_spark.reading import BatchReader

        reader = BatchReader(SourceOptions(self.options))
        reader.typed = self._typed()  # a topic with a schema: typed columns (magnetar_spark/typed.py)
        return reader

    def streamReader(self, schema: StructType) -> Any:
        """`spark.readStream.format("magnetar")`: magnetar_spark.stream."""
        from magnetar_spark.options import SourceOptions
        from magnetar_spark.stream import MagnetarStreamReader

        reader = MagnetarStreamReader(SourceOptions(self.options, streaming=True))
        reader.typed = self._typed()  # a topic with a schema: typed columns (magnetar_spark/typed.py)
        return reader

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        """`df.write.format("magnetar")`: magnetar_spark.sink."""
        from magnetar_spark.sink import MagnetarWriter

        return MagnetarWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        """`df.writeStream.format("magnetar")`: magnetar_spark.sink."""
        from magnetar_spark.sink import MagnetarStreamWriter

        return MagnetarStreamWriter(self.options, schema, overwrite)
