"""Copy a Magnetar topic to Parquet: a Spark 4 batch job, ready for `spark-submit` and EMR.

    spark-submit --py-files magnetar_spark.zip spark/jobs/topic_to_parquet.py \
        --service-url https://abc123.execute-api.us-east-1.amazonaws.com \
        --topic persistent://public/default/orders \
        --output s3://my-bucket/exports/orders/

The job reads every message present when it starts (the source's `lastMessageId` snapshot at
planning time), so rerunning it later exports a longer prefix of the topic. See docs/spark.md.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

log = logging.getLogger("topic_to_parquet")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Read a Magnetar topic with Spark and write it as Parquet.")
    parser.add_argument("--service-url", required=True, help="the HTTP API, e.g. http://127.0.0.1:8080")
    parser.add_argument("--topic", required=True, help="persistent://tenant/namespace/name or a short name")
    parser.add_argument("--output", required=True, help="where to write: a path, s3://bucket/prefix/ ...")
    parser.add_argument("--partitions", type=int, default=None, help="Spark input partitions (default 4)")
    parser.add_argument("--starting-entry-id", type=int, default=None, help="first entry id, inclusive")
    parser.add_argument("--ending-entry-id", type=int, default=None, help="last entry id, inclusive")
    parser.add_argument(
        "--mode",
        default="errorifexists",
        choices=["errorifexists", "overwrite", "append", "ignore"],
        help="what to do when the output exists (default errorifexists)",
    )
    parser.add_argument(
        "--partition-by-date",
        action="store_true",
        help="add a `publishDate` column (UTC date of __publishTime) and partition the output by it",
    )
    parser.add_argument(
        "--files",
        type=int,
        default=None,
        help="coalesce to at most this many output files (per date with --partition-by-date)",
    )
    return parser.parse_args(argv)


def run(spark, args: argparse.Namespace) -> int | None:  # type: ignore[no-untyped-def]
    """Reads the topic and writes it; returns how many messages the output holds (None on append)."""
    from pyspark.sql import functions as F

    from magnetar_spark import register

    register(spark)  # (harmless when Spark found the installed source)
    reader = spark.read.format("magnetar").option("service.url", args.service_url).option("topic", args.topic)
    if args.partitions is not None:
        reader = reader.option("partitions", str(args.partitions))
    if args.starting_entry_id is not None:
        reader = reader.option("startingEntryId", str(args.starting_entry_id))
    if args.ending_entry_id is not None:
        reader = reader.option("endingEntryId", str(args.ending_entry_id))

    # One action only: each action plans again, with a new lastMessageId snapshot.
    df = reader.load()
    if args.files is not None:
        df = df.coalesce(max(1, args.files))
    writer = df
    if args.partition_by_date:
        session_tz = spark.conf.get("spark.sql.session.timeZone")
        writer = df.withColumn("publishDate", F.to_date(F.to_utc_timestamp("__publishTime", session_tz)))
    out = writer.write.mode(args.mode)
    if args.partition_by_date:
        out = out.partitionBy("publishDate")
    out.parquet(args.output)
    if args.mode not in ("overwrite", "errorifexists"):
        log.info("wrote %s to %s (%s)", args.topic, args.output, args.mode)
        return None
    count: int = spark.read.parquet(args.output).count()  # from the Parquet footers: cheap
    log.info("wrote %d messages of %s to %s", count, args.topic, args.output)
    return count


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.appName(f"magnetar-topic-to-parquet:{args.topic}")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    try:
        count = run(spark, args)
    finally:
        spark.stop()
    what = args.topic if count is None else f"{count} messages of {args.topic}"
    print(f"wrote {what} to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
