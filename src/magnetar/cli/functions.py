"""`magnetar functions`: pulsar-admin functions' verbs and options, on the admin v3 API.

    magnetar functions create --py exclamation.py --classname exclamation.process \\
        --inputs persistent://public/default/in --output persistent://public/default/out --name excl
    magnetar functions update --fqfn public/default/excl --parallelism 2 [--py new.py]
    magnetar functions get|status|stats|start|stop|restart|delete --fqfn public/default/excl
    magnetar functions list --tenant public --namespace default
    magnetar functions trigger --fqfn public/default/excl --trigger-value hello
    magnetar functions putstate --fqfn public/default/excl --state '{"key": "k", "stringValue": "v"}'
    magnetar functions querystate --fqfn public/default/excl --key k

Each registered function gets a Lambda function of its own (sized by --ram/--cpu, --timeout-ms and
--parallelism), which the dispatcher invokes when its inputs have messages; or, with
--function-arn, the dispatcher invokes a Lambda function of the user's (a MagnetarFunction).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from magnetar.cli import functions_localrun
from magnetar.cli.common import (
    DEFAULT_URL,
    AuthParams,
    AuthPlugin,
    ServiceUrl,
    admin_client,
    call,
    split_list,
)

console = Console()
functions_app = typer.Typer(help="Pulsar Functions: register, manage and run functions (pulsar-admin functions).",
                            no_args_is_help=True)
functions_localrun.register(functions_app)  # localrun: one instance in the foreground (cli/functions_localrun.py)

Fqfn = Annotated[str | None, typer.Option("--fqfn", help="The fully qualified function name: tenant/namespace/name.")]
Tenant = Annotated[str | None, typer.Option("--tenant", help="The function's tenant (default: public).")]
NamespaceOpt = Annotated[str | None, typer.Option("--namespace", help="The function's namespace (default: default).")]
Name = Annotated[str | None, typer.Option("--name", help="The function's name.")]
Py = Annotated[Path | None, typer.Option("--py", help="The function's code: a .py file or a .zip.")]
ClassName = Annotated[str | None, typer.Option("--classname", help="module.function or module.Class.")]
Inputs = Annotated[list[str] | None, typer.Option("--inputs", help="Input topics (comma-separated, repeatable).")]
TopicsPattern = Annotated[str | None, typer.Option("--topics-pattern", help="A regex of input topics.")]
Output = Annotated[str | None, typer.Option("--output", help="The output topic.")]
LogTopic = Annotated[str | None, typer.Option("--log-topic", help="The topic the function's logs go to.")]
Guarantees = Annotated[str | None, typer.Option(
    "--processing-guarantees", help="ATLEAST_ONCE, ATMOST_ONCE or EFFECTIVELY_ONCE.")]
Parallelism = Annotated[int | None, typer.Option(
    "--parallelism", help="At most this many invocations at once (the Lambda function's reserved concurrency).")]
UserConfig = Annotated[str | None, typer.Option("--user-config", help="The function's user config (JSON object).")]
RetainOrdering = Annotated[bool | None, typer.Option("--retain-ordering", help="Process messages in order.")]
RetainKeyOrdering = Annotated[bool | None, typer.Option("--retain-key-ordering", help="Keep the order per key.")]
MaxRetries = Annotated[int | None, typer.Option("--max-message-retries", help="Retries before the dead-letter topic.")]
DeadLetter = Annotated[str | None, typer.Option("--dead-letter-topic", help="Where messages go after the retries.")]
SubsName = Annotated[str | None, typer.Option("--subs-name", help="The subscription on the inputs (default: fqfn).")]
SubsPosition = Annotated[str | None, typer.Option("--subs-position", help="Latest or Earliest.")]
TimeoutMs = Annotated[int | None, typer.Option(
    "--timeout-ms", help="The Lambda function's timeout, in ms (at most 300000; default 60000).")]
Cpu = Annotated[float | None, typer.Option("--cpu", help="CPU cores: Lambda memory of 1,769 MB per core.")]
Ram = Annotated[int | None, typer.Option("--ram", help="Memory, in bytes: the Lambda function's memory (MB).")]
FunctionArn = Annotated[str | None, typer.Option(
    "--function-arn", help="A Lambda function of yours (a MagnetarFunction) that runs the function.")]


def _names(fqfn: str | None, tenant: str | None, namespace: str | None, name: str | None) -> tuple[str, str, str]:
    """(tenant, namespace, name) from --fqfn, or --tenant/--namespace/--name (public/default)."""
    if fqfn:
        parts = fqfn.split("/")
        if len(parts) != 3 or not all(parts):
            raise typer.BadParameter("expected tenant/namespace/name", param_hint="--fqfn")
        return parts[0], parts[1], parts[2]
    if not name:
        raise typer.BadParameter("give --fqfn tenant/namespace/name, or --name", param_hint="--name")
    return tenant or "public", namespace or "default", name


def _config(values: dict[str, Any]) -> dict[str, Any]:
    """Pulsar's FunctionConfig JSON of the options given."""
    config = {k: v for k, v in values.items() if v is not None and k not in ("cpu", "ram")}
    if values.get("cpu") is not None or values.get("ram") is not None:
        config["resources"] = {k: values[k] for k in ("cpu", "ram") if values.get(k) is not None}
    if isinstance(config.get("userConfig"), str):
        try:
            config["userConfig"] = json.loads(config["userConfig"])
        except ValueError:
            raise typer.BadParameter("not valid JSON", param_hint="--user-config") from None
    return config


def _code(py: Path | None) -> tuple[bytes | None, str | None]:
    if py is None:
        return None, None
    if not py.is_file():
        raise typer.BadParameter(f"{py} is not a file", param_hint="--py")
    return py.read_bytes(), py.name


def _submit(verb: str, fqfn: str | None, tenant: str | None, namespace: str | None, name: str | None,
            py: Path | None, options: dict[str, Any], service_url: str, auth_plugin: str | None,
            auth_params: str | None) -> str:
    if name is None and fqfn is None and options.get("className"):  # Pulsar: the class's name
        name = str(options["className"]).rsplit(".", 1)[-1]
    t, ns, n = _names(fqfn, tenant, namespace, name)
    code, filename = _code(py)
    config = _config({"tenant": t, "namespace": ns, "name": n, **options, "py": filename})
    admin = admin_client(service_url, auth_plugin, auth_params)
    call(admin.create_function if verb == "create" else admin.update_function, config, code, filename)
    return f"{t}/{ns}/{n}"


def _options(classname: str | None, inputs: list[str] | None, topics_pattern: str | None, output: str | None,
             log_topic: str | None, processing_guarantees: str | None, parallelism: int | None,
             user_config: str | None, retain_ordering: bool | None, retain_key_ordering: bool | None,
             max_message_retries: int | None, dead_letter_topic: str | None, subs_name: str | None,
             subs_position: str | None, timeout_ms: int | None, cpu: float | None, ram: int | None,
             function_arn: str | None) -> dict[str, Any]:
    """pulsar-admin's options as FunctionConfig's fields (None: not given)."""
    return {"className": classname, "inputs": split_list(inputs) or None, "topicsPattern": topics_pattern,
            "output": output, "logTopic": log_topic, "processingGuarantees": processing_guarantees,
            "parallelism": parallelism, "userConfig": user_config, "retainOrdering": retain_ordering,
            "retainKeyOrdering": retain_key_ordering, "maxMessageRetries": max_message_retries,
            "deadLetterTopic": dead_letter_topic, "subName": subs_name, "subscriptionPosition": subs_position,
            "timeoutMs": timeout_ms, "cpu": cpu, "ram": ram, "functionArn": function_arn}


@functions_app.command("create")
def create(fqfn: Fqfn = None, tenant: Tenant = None, namespace: NamespaceOpt = None, name: Name = None,
           py: Py = None, classname: ClassName = None, inputs: Inputs = None, topics_pattern: TopicsPattern = None,
           output: Output = None, log_topic: LogTopic = None, processing_guarantees: Guarantees = None,
           parallelism: Parallelism = None, user_config: UserConfig = None, retain_ordering: RetainOrdering = None,
           retain_key_ordering: RetainKeyOrdering = None, max_message_retries: MaxRetries = None,
           dead_letter_topic: DeadLetter = None, subs_name: SubsName = None, subs_position: SubsPosition = None,
           timeout_ms: TimeoutMs = None, cpu: Cpu = None, ram: Ram = None, function_arn: FunctionArn = None,
           service_url: ServiceUrl = DEFAULT_URL,
           auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
    """Register a function (its code: --py; or --function-arn, a Lambda function of yours)."""
    options = _options(classname, inputs, topics_pattern, output, log_topic, processing_guarantees, parallelism,
                       user_config, retain_ordering, retain_key_ordering, max_message_retries, dead_letter_topic,
                       subs_name, subs_position, timeout_ms, cpu, ram, function_arn)
    created = _submit("create", fqfn, tenant, namespace, name, py, options, service_url, auth_plugin, auth_params)
    console.print(f"Created {created} successfully")


@functions_app.command("update")
def update(fqfn: Fqfn = None, tenant: Tenant = None, namespace: NamespaceOpt = None, name: Name = None,
           py: Py = None, classname: ClassName = None, inputs: Inputs = None, topics_pattern: TopicsPattern = None,
           output: Output = None, log_topic: LogTopic = None, processing_guarantees: Guarantees = None,
           parallelism: Parallelism = None, user_config: UserConfig = None, retain_ordering: RetainOrdering = None,
           retain_key_ordering: RetainKeyOrdering = None, max_message_retries: MaxRetries = None,
           dead_letter_topic: DeadLetter = None, subs_name: SubsName = None, subs_position: SubsPosition = None,
           timeout_ms: TimeoutMs = None, cpu: Cpu = None, ram: Ram = None, function_arn: FunctionArn = None,
           service_url: ServiceUrl = DEFAULT_URL,
           auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
    """Update a function: the options given replace the stored ones (new code: --py)."""
    options = _options(classname, inputs, topics_pattern, output, log_topic, processing_guarantees, parallelism,
                       user_config, retain_ordering, retain_key_ordering, max_message_retries, dead_letter_topic,
                       subs_name, subs_position, timeout_ms, cpu, ram, function_arn)
    updated = _submit("update", fqfn, tenant, namespace, name, py, options, service_url, auth_plugin, auth_params)
    console.print(f"Updated {updated} successfully")


def _one(verb: str):  # type: ignore[no-untyped-def]
    """A verb on one function, printing the JSON it answers (or a confirmation)."""

    def command(fqfn: Fqfn = None, tenant: Tenant = None, namespace: NamespaceOpt = None, name: Name = None,
                service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                auth_params: AuthParams = None) -> None:
        names = _names(fqfn, tenant, namespace, name)
        admin = admin_client(service_url, auth_plugin, auth_params)
        result = call(getattr(admin, {"get": "get_function", "status": "function_status", "stats": "function_stats",
                                      "delete": "delete_function", "start": "start_function",
                                      "stop": "stop_function", "restart": "restart_function"}[verb]), *names)
        if result is None:
            past = {"delete": "Deleted", "start": "Started", "stop": "Stopped", "restart": "Restarted"}[verb]
            console.print(f"{past} {'/'.join(names)} successfully")
        else:
            console.print_json(data=result)

    return command


for _verb, _help in (("get", "A function's FunctionConfig."), ("status", "A function's status and its Lambda function."),
                     ("stats", "A function's stats (the dispatcher's figures)."),
                     ("delete", "Deregister a function."), ("start", "Start a function (desired state RUNNING)."),
                     ("stop", "Stop a function (desired state STOPPED)."), ("restart", "Restart a function (its Lambda function deployed again).")):
    functions_app.command(_verb, help=_help)(_one(_verb))


@functions_app.command("list")
def list_functions(tenant: Tenant = None, namespace: NamespaceOpt = None, service_url: ServiceUrl = DEFAULT_URL,
                   auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
    """The functions of a namespace."""
    for name in call(admin_client(service_url, auth_plugin, auth_params).functions, tenant or "public",
                     namespace or "default"):
        console.print(name, highlight=False)


@functions_app.command("trigger")
def trigger(fqfn: Fqfn = None, tenant: Tenant = None, namespace: NamespaceOpt = None, name: Name = None,
            trigger_value: Annotated[str | None, typer.Option("--trigger-value", help="The value to publish.")] = None,
            trigger_file: Annotated[Path | None, typer.Option("--trigger-file", help="A file whose bytes to publish.")] = None,
            topic: Annotated[str | None, typer.Option("--topic", help="The input to publish to.")] = None,
            service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
    """Publish a value to the function's input and print the output's next message."""
    if (trigger_value is None) == (trigger_file is None):
        raise typer.BadParameter("give one of --trigger-value or --trigger-file", param_hint="--trigger-value")
    value: str | bytes = trigger_value if trigger_value is not None else Path(str(trigger_file)).read_bytes()
    admin = admin_client(service_url, auth_plugin, auth_params)
    result = call(admin.trigger_function, *_names(fqfn, tenant, namespace, name), value, topic)
    console.print(result if result is not None else "(published; the function has no output topic)", highlight=False)


@functions_app.command("querystate")
def querystate(fqfn: Fqfn = None, tenant: Tenant = None, namespace: NamespaceOpt = None, name: Name = None,
               key: Annotated[str, typer.Option("--key", "-k", help="The state key.")] = "",
               service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
               auth_params: AuthParams = None) -> None:
    """A key of the function's state (Pulsar's FunctionState JSON)."""
    if not key:
        raise typer.BadParameter("give the state key", param_hint="--key")
    admin = admin_client(service_url, auth_plugin, auth_params)
    console.print_json(data=call(admin.get_function_state, *_names(fqfn, tenant, namespace, name), key))


@functions_app.command("putstate")
def putstate(fqfn: Fqfn = None, tenant: Tenant = None, namespace: NamespaceOpt = None, name: Name = None,
             state: Annotated[str, typer.Option("--state", "-s", help='FunctionState JSON: {"key": "k", '
                                                '"stringValue": "v"} (or byteValue, numberValue).')] = "",
             service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
    """Set a key of the function's state."""
    try:
        value = json.loads(state)
    except ValueError:
        raise typer.BadParameter("not valid JSON", param_hint="--state") from None
    if not isinstance(value, dict) or not isinstance(value.get("key"), str) or not value["key"]:
        raise typer.BadParameter('expected a JSON object with a "key"', param_hint="--state")
    names = _names(fqfn, tenant, namespace, name)
    call(admin_client(service_url, auth_plugin, auth_params).put_function_state, *names, value)
    console.print(f"state {value['key']} of {'/'.join(names)} put successfully", highlight=False)
