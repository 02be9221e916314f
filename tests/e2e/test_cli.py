"""The `magnetar` command line against the local cluster."""

from __future__ import annotations

import uuid

from typer.testing import CliRunner

from magnetar.cli.main import app

runner = CliRunner()


def run(cluster, *args: str) -> str:  # type: ignore[no-untyped-def]
    result = runner.invoke(app, [*args, "--service-url", cluster.url])
    assert result.exit_code == 0, result.output
    return result.output


def test_produce_then_consume(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    run(cluster, "admin", "topics", "create", f"persistent://public/default/{topic}")
    assert "3 messages successfully produced" in run(cluster, "produce", topic, "-m", "hello", "-n", "3")
    out = run(cluster, "consume", topic, "-s", "cli-sub", "-n", "3", "-p", "Earliest")
    assert out.count("content:hello") == 3 and "3 messages successfully consumed" in out


def test_admin_tenants_namespaces_topics(cluster) -> None:  # type: ignore[no-untyped-def]
    tenant = f"tenant-{uuid.uuid4().hex[:6]}"
    run(cluster, "admin", "tenants", "create", tenant)
    assert tenant in run(cluster, "admin", "tenants", "list")
    run(cluster, "admin", "namespaces", "create", f"{tenant}/ns1")
    assert f"{tenant}/ns1" in run(cluster, "admin", "namespaces", "list", tenant)
    run(cluster, "admin", "topics", "create", f"persistent://{tenant}/ns1/t1")
    assert f"persistent://{tenant}/ns1/t1" in run(cluster, "admin", "topics", "list", f"{tenant}/ns1")


def test_cli_errors_are_one_line_and_exit_1(cluster) -> None:  # type: ignore[no-untyped-def]
    result = runner.invoke(app, ["admin", "namespaces", "create", "ghost/ns", "--service-url", cluster.url])
    assert result.exit_code == 1
    assert "Tenant ghost does not exist" in result.output


def test_partitioned_topic_commands(cluster) -> None:  # type: ignore[no-untyped-def]
    topic = f"persistent://public/default/cli-part-{uuid.uuid4().hex[:8]}"
    run(cluster, "admin", "topics", "create-partitioned-topic", topic, "-p", "3")
    assert '"partitions": 3' in run(cluster, "admin", "topics", "get-partitioned-topic-metadata", topic)
    run(cluster, "admin", "topics", "update-partitioned-topic", topic, "-p", "5")
    assert '"partitions": 5' in run(cluster, "admin", "topics", "get-partitioned-topic-metadata", topic)
    result = runner.invoke(app, ["admin", "topics", "update-partitioned-topic", topic, "-p", "2",
                                 "--service-url", cluster.url])
    assert result.exit_code == 1 and "Partitions can only grow" in result.output
