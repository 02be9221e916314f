"""`magnetar functions localrun`: run a Pulsar Function in the foreground on this machine, with
pulsar-admin's options, until Ctrl-C (`register(app)` adds it to a `functions` typer app).

State (`context.put_state`, counters) goes to `--state rest` (the default: the broker's function
state API, the function's state wherever it runs) or `--state memory` (this process only)."""

from __future__ import annotations

import json
import logging
import signal
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from magnetar.cli.common import (
    DEFAULT_URL,
    SERVICE_URL_ENV,
    AuthParams,
    AuthPlugin,
    authentication,
    split_list,
)
from magnetar.cli.errors import fail

console = Console()
_fail = fail


def _json(option: str, value: str | None) -> dict[str, Any]:
    if not value:
        return {}
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint=option) from None
    if not isinstance(parsed, dict):
        raise typer.BadParameter("a JSON object", param_hint=option)
    return parsed


def localrun(
    py: Annotated[Path, typer.Option("--py", help="The function's code: a .py file or a .zip.", exists=True,
                                     dir_okay=False)],
    classname: Annotated[str, typer.Option("--classname", help="module.Class or module.function.")],
    inputs: Annotated[list[str] | None, typer.Option("--inputs", help="Input topics (comma-separated, repeatable).")] = None,
    topics_pattern: Annotated[str | None, typer.Option("--topics-pattern", help="Input topics: a regex.")] = None,
    output: Annotated[str | None, typer.Option("--output", help="Output topic.")] = None,
    log_topic: Annotated[str | None, typer.Option("--log-topic", help="Topic of the function's log lines.")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Function name (default: the class's).")] = None,
    tenant: Annotated[str, typer.Option("--tenant")] = "public",
    namespace: Annotated[str, typer.Option("--namespace")] = "default",
    processing_guarantees: Annotated[str, typer.Option(
        "--processing-guarantees", help="ATLEAST_ONCE, ATMOST_ONCE or EFFECTIVELY_ONCE.")] = "ATLEAST_ONCE",
    user_config: Annotated[str | None, typer.Option("--user-config", help="User config (a JSON object).")] = None,
    secrets: Annotated[str | None, typer.Option(
        "--secrets", help='Secrets (JSON): name -> value, or {"env": "VAR"} to read an environment variable.')] = None,
    retain_ordering: Annotated[bool, typer.Option("--retain-ordering", help="Failover subscription.")] = False,
    retain_key_ordering: Annotated[bool, typer.Option("--retain-key-ordering", help="Key_Shared subscription.")] = False,
    max_message_retries: Annotated[int | None, typer.Option(
        "--max-message-retries", help="Redeliveries of a failing message before the dead-letter topic.")] = None,
    dead_letter_topic: Annotated[str | None, typer.Option("--dead-letter-topic")] = None,
    subs_name: Annotated[str | None, typer.Option("--subs-name", help="Subscription (default: the fqfn).")] = None,
    subs_position: Annotated[str, typer.Option("--subs-position", help="Latest or Earliest.")] = "Latest",
    timeout_ms: Annotated[int | None, typer.Option("--timeout-ms", help="Ack timeout of the inputs (ms).")] = None,
    auto_ack: Annotated[bool, typer.Option("--auto-ack/--no-auto-ack")] = True,
    state: Annotated[str, typer.Option(
        "--state", help="rest: the broker's function state API; memory: this process only.")] = "rest",
    service_url: Annotated[str, typer.Option(
        "--service-url", "--broker-service-url", "-u", envvar=SERVICE_URL_ENV, help="Broker URL.")] = DEFAULT_URL,
    auth_plugin: AuthPlugin = None,
    auth_params: AuthParams = None,
    instance_id: Annotated[int, typer.Option("--instance-id", hidden=True)] = 0,
) -> None:
    """Run a function locally (pulsar-admin functions localrun) until Ctrl-C."""
    from pydantic import ValidationError

    from magnetar.functions.config import FunctionConfig
    from magnetar.functions.instance import InstanceOptions, LocalInstance

    if state not in ("rest", "memory"):
        raise typer.BadParameter("rest or memory", param_hint="--state")
    fields: dict[str, Any] = {
        "tenant": tenant, "namespace": namespace, "name": name or classname.rpartition(".")[2],
        "className": classname, "py": py.name, "inputs": split_list(inputs), "topicsPattern": topics_pattern,
        "output": output, "logTopic": log_topic, "processingGuarantees": processing_guarantees.upper(),
        "userConfig": _json("--user-config", user_config), "secrets": _json("--secrets", secrets),
        "retainOrdering": retain_ordering, "retainKeyOrdering": retain_key_ordering,
        "deadLetterTopic": dead_letter_topic, "subName": subs_name, "subscriptionPosition": subs_position.capitalize(),
        "timeoutMs": timeout_ms, "autoAck": auto_ack,
    }
    if max_message_retries is not None:
        fields["maxMessageRetries"] = max_message_retries
    try:
        config = FunctionConfig.model_validate(fields)
    except ValidationError as exc:
        _fail("; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()))
    if not config.inputs and not config.topicsPattern:
        _fail("give --inputs or --topics-pattern")
    auth = authentication(auth_plugin, auth_params)
    store: Any
    if state == "memory":
        from magnetar.functions.state_stores import MemoryFunctionState

        store = MemoryFunctionState()
    else:
        from magnetar.client.transport import Transport
        from magnetar.functions.state_stores import RestFunctionState

        store = RestFunctionState(Transport(service_url, authentication=auth), config.tenant, config.namespace,
                                  config.name)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        instance = LocalInstance(config, py, InstanceOptions(service_url, auth, store, instance_id))
    except Exception as exc:
        _fail(f"cannot load {classname} from {py}: {exc!r}")
    # Ctrl-C stops the instance as SIGTERM does: a KeyboardInterrupt raised wherever the main thread
    # happens to be (a request's retry, a close) could be lost there and leave the instance running
    for stopping in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stopping, lambda *_: instance.stop())
    console.print(f"running {config.fqfn} ({config.processingGuarantees.value}) on "
                  f"{', '.join(config.inputs) or config.topicsPattern} -> {config.output or '(no output)'}; Ctrl-C to stop")
    try:
        instance.run()
    except KeyboardInterrupt:
        instance.stop()
    except Exception as exc:
        from magnetar.client import exceptions

        if isinstance(exc, exceptions.PulsarException):
            _fail(exc.reason)
        raise
    finally:
        stats = instance.runtime.stats() if instance.runtime else {}
        console.print("stopped; " + ", ".join(f"{k} {stats[k]}" for k in (
            "receivedTotal", "processedSuccessfullyTotal", "userExceptionsTotal", "systemExceptionsTotal") if k in stats))


def register(app: typer.Typer) -> None:
    """Add `localrun` to a `functions` typer app."""
    app.command("localrun")(localrun)
