"""`magnetar local up`'s option checks, before anything starts."""

from __future__ import annotations

from typer.testing import CliRunner

from magnetar.cli.main import app


def test_a_tls_port_without_its_certificate_is_refused_before_anything_starts() -> None:
    result = CliRunner().invoke(app, ["local", "up", "--pulsar-tls-port", "6651"])
    assert result.exit_code == 1
    assert "--pulsar-tls-port needs --pulsar-tls-cert and --pulsar-tls-key" in result.output


def test_the_tls_options_are_documented() -> None:
    result = CliRunner().invoke(app, ["local", "up", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "--pulsar-tls-port" in result.output and "--pulsar-tls-cert" in result.output


def test_a_bad_cluster_name_is_refused_before_anything_starts() -> None:
    result = CliRunner().invoke(app, ["local", "up", "--cluster-name", "east/1"])
    assert result.exit_code == 1
    assert "--cluster-name 'east/1'" in result.output
