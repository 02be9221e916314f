"""The `magnetar` command line never answers a user's error, an unreachable service or an empty run
with a traceback: one `error: ...` line on standard error and exit status 1, or typer's usage error
(status 2) for a bad option value."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from magnetar.cli.main import app
from magnetar.local.cluster import free_port

runner = CliRunner()


def flat(text: str) -> str:
    """Output with typer's box borders and line wraps taken out (its usage errors wrap at 80)."""
    return " ".join(text.replace("│", " ").split())


def fails(*args: str, says: str) -> str:
    """The command exits 1 with one `error:` line on stderr that says `says`, and no traceback."""
    result = runner.invoke(app, list(args))
    assert isinstance(result.exception, SystemExit), repr(result.exception)  # not an exception escaping
    assert result.exit_code == 1, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and says in errors[0], result.stderr
    assert "Traceback" not in result.output
    return errors[0]


def refuses_usage(*args: str, says: str) -> None:
    """A bad option value: typer's usage error (status 2) naming the problem, no traceback."""
    result = runner.invoke(app, list(args))
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    assert says in flat(result.stderr) and "Traceback" not in result.output


def run_process(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "magnetar.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout)


# --- admin ------------------------------------------------------------------------------------
def test_admin_unknown_tenant_namespace_and_topic_are_the_brokers_404_reason(cluster: Any) -> None:
    fails("admin", "namespaces", "list", "ghost", "-u", cluster.url, says="Tenant ghost does not exist")
    fails("admin", "topics", "list", "ghost/ns", "-u", cluster.url, says="Namespace ghost/ns does not exist")
    fails("admin", "topics", "stats", f"persistent://public/default/none-{uuid.uuid4().hex[:8]}", "-u", cluster.url,
          says="not found")
    fails("admin", "topics", "create", "persistent://only-a-tenant", "-u", cluster.url, says="Invalid topic name")


def test_admin_bad_option_values_are_usage_errors(cluster: Any) -> None:
    refuses_usage("admin", "tenants", "list", "-u", "notaurl", says="The scheme part is missing: notaurl")
    refuses_usage("admin", "tenants", "list", "-u", "ftp://host", says="Invalid scheme: ftp")
    refuses_usage("admin", "namespaces", "set-retention", "public/default", "--time", "soon", "--size", "1",
                  "-u", cluster.url, says="'soon' is not a duration")


def test_a_service_that_is_not_up_is_one_line_within_seconds() -> None:
    """Connection refused: said after a few seconds, not after the SDK's 30 s of retries; in a real
    process, so that what reaches the terminal is checked (stderr, no traceback)."""
    url = f"http://127.0.0.1:{free_port()}"
    for command in (["admin", "tenants", "list"], ["produce", "t", "-m", "x"], ["consume", "t", "-s", "s"]):
        started = time.monotonic()
        done = run_process(*command, "-u", url)
        assert time.monotonic() - started < 25, command  # the interpreter's start is most of it
        assert done.returncode == 1, done.stdout + done.stderr
        assert "Traceback" not in done.stderr + done.stdout
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and f"cannot reach {url}" in errors[0], done.stderr


def test_local_up_on_a_port_in_use_says_so_and_starts_nothing(cluster: Any) -> None:
    done = run_process("local", "up", "--port", str(cluster.port), "--aws-port", str(free_port()),
                       "--pulsar-port", "0", "--maintenance-interval", "0", timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "Magnetar is up" not in done.stdout
    assert f"error: 127.0.0.1:{cluster.port} (the HTTP API, --port) is in use" in done.stderr


# --- tokens -----------------------------------------------------------------------------------
def test_tokens_bad_key_files_and_unwritable_outputs(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.key"
    garbage.write_bytes(b"not a key")
    fails("tokens", "create", "--subject", "app", "--private-key", str(garbage), says="Could not deserialize key data")
    fails("tokens", "create", "--subject", "app", "--secret-key", str(garbage), says="at least 32 bytes")
    fails("tokens", "validate", "--secret-key", str(tmp_path / "missing.key"), "--token", "x",
          says="cannot read the secret key")
    fails("tokens", "create", "--subject", "app", "--secret-key", f"file://{tmp_path / 'missing.key'}",
          says="cannot read the secret key")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    fails("tokens", "create-secret-key", "--output", str(a_file / "key"), says="cannot write")
    fails("tokens", "create-key-pair", "--output-private-key", str(a_file / "private.key"),
          "--output-public-key", str(tmp_path / "public.key"), says="cannot write")


# --- spark submit -----------------------------------------------------------------------------
def test_spark_submit_missing_script_bad_conf_and_a_refusal_of_aws(cluster: Any, tmp_path: Path) -> None:
    refuses_usage("spark", "submit", str(tmp_path / "missing.py"), says="does not exist")
    job = tmp_path / "job.py"
    job.write_text("print('hello')\n")
    aws = ["--application-id", "app", "--role-arn", "arn:aws:iam::000000000000:role/job", "--environment", "none"]
    refuses_usage("spark", "submit", *aws, "--bucket", "any", "--conf", "a b", str(job), says="--conf takes KEY=VALUE")
    # the session cluster's emulator is the AWS endpoint here: no such bucket
    fails("spark", "submit", *aws, "--bucket", f"none-{uuid.uuid4().hex[:8]}", str(job), says="NoSuchBucket")


# --- perf -------------------------------------------------------------------------------------
def test_perf_bad_options_unknown_namespace_and_an_unreachable_service(cluster: Any) -> None:
    common = ["--duration", "1", "--no-limits"]
    refuses_usage("perf", "e2e", "-u", cluster.url, "--subscription-type", "Bogus", *common,
                  says="subscription type must be one of Exclusive, Shared, Failover, Key_Shared")
    refuses_usage("perf", "e2e", "-u", cluster.url, "--compression", "BOGUS", *common, says="unknown compression")
    refuses_usage("perf", "e2e", "-u", "pulsar://127.0.0.1:6650", *common, says="Invalid scheme: pulsar")
    fails("perf", "e2e", "-u", cluster.url, "--topic", "persistent://ghost/ns/t", *common,
          says="Namespace ghost/ns does not exist")
    fails("perf", "produce", "-u", f"http://127.0.0.1:{free_port()}", *common, says="cannot reach")


def test_a_perf_run_that_delivers_nothing_is_one_line_and_status_1(cluster: Any) -> None:
    topic = f"persistent://public/default/empty-{uuid.uuid4().hex[:8]}"
    line = fails("perf", "consume", "-u", cluster.url, "--topic", topic, "--duration", "1", "--no-limits",
                 says="no message was delivered")
    assert f"{topic} had nothing to consume" in line


# --- verify -----------------------------------------------------------------------------------
def test_verify_bad_options_and_an_empty_run_are_refused() -> None:
    refuses_usage("verify", "--runs", "0", says="Input should be greater than or equal to 1")
    refuses_usage("verify", "--crash-points", "nowhere", says="unknown crash points ['nowhere']")
    refuses_usage("verify", "--delay-points", "nowhere", says="unknown delay points ['nowhere']")
    refuses_usage("verify", "--clusters", "2", "--crash-points", "all", says="not with --crash-points")
    refuses_usage("verify", "--aws-limits", "maybe", says="--aws-limits takes on or off")
