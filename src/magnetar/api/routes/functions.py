"""Pulsar Functions' admin API (`/admin/v3/functions`): register, update, read, delete, list,
status, stats, start, stop, restart, trigger and the state API, on Pulsar's paths, multipart
bodies and status codes; Magnetar's own counters and registry record under `/magnetar/v1/functions`.

Every route needs the namespace's `functions` grant, a tenant admin or a superuser
(`Access.FUNCTIONS`). A registered function has a Lambda function of its own, created and sized
by the registry (core/functions/deployment.py), and is run by the dispatcher
(core/functions/dispatch.py) when its inputs have messages; status and stats answer Pulsar's shapes
with the dispatcher's figures (one instance: the dispatcher), status and get also the function's
Lambda function's ARN.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from magnetar.adapters.aws import build_broker
from magnetar.api import multipart
from magnetar.api.access import guarded
from magnetar.api.http import json_body, json_response, no_content, query
from magnetar.api.openapi import STRINGS, Content, Param
from magnetar.core.authz import Access
from magnetar.core.errors import InvalidInput
from magnetar.core.functions.registry import FunctionCode, state_json
from magnetar.core.functions.trigger import DEFAULT_TRIGGER_TIMEOUT_MS, trigger
from magnetar.core.ports.functions import FunctionRecord
from magnetar.functions.config import FunctionConfig

router = Router()  # type: ignore[no-untyped-call]
FUNCTIONS = "/admin/v3/functions/<tenant>/<namespace>"
FUNCTION = f"{FUNCTIONS}/<function>"
MAGNETAR_FUNCTION = "/magnetar/v1/functions/<tenant>/<namespace>/<function>"

_FORM = {"type": "object", "properties": {
    "functionConfig": {"type": "string", "description": "Pulsar's FunctionConfig, JSON."},
    "data": {"type": "string", "format": "binary", "description": "The code: a .py file or a .zip (up to 4 MiB)."}}}
REGISTER_FORM = Content("multipart/form-data", {**_FORM, "required": ["functionConfig"]})
UPDATE_FORM = Content("multipart/form-data", _FORM)
TRIGGER_FORM = Content("multipart/form-data", {"type": "object", "properties": {
    "data": {"type": "string", "description": "The value to publish (triggerValue)."},
    "dataStream": {"type": "string", "format": "binary", "description": "The value, as a file."},
    "topic": {"type": "string", "description": "The input topic to publish to (default: the first input)."}}})
FUNCTION_STATE = {"type": "object", "description": "Pulsar's FunctionState.", "properties": {
    "key": {"type": "string"}, "stringValue": {"type": "string"}, "byteValue": {"type": "string", "format": "byte"},
    "numberValue": {"type": "integer"}, "version": {"type": "integer"}}}
_INSTANCE_STATUS = {"type": "object", "properties": {name: {"type": kind} for name, kind in (
    ("running", "boolean"), ("error", "string"), ("numRestarts", "integer"), ("numReceived", "integer"),
    ("numSuccessfullyProcessed", "integer"), ("numUserExceptions", "integer"), ("numSystemExceptions", "integer"),
    ("averageLatency", "number"), ("lastInvocationTime", "integer"), ("workerId", "string"))}}
FUNCTION_STATUS = {"type": "object", "description": "Pulsar's FunctionStatus (one instance: the "
                   "dispatcher), the function's Lambda function's ARN and deployment.", "properties": {
    "numInstances": {"type": "integer"}, "numRunning": {"type": "integer"}, "functionArn": {"type": "string"},
    "deployment": {"type": "object", "properties": {
        "functionArn": {"type": "string"}, "state": {"type": "string"}, "lastUpdateStatus": {"type": "string"},
        "memoryMb": {"type": "integer"}, "timeoutS": {"type": "integer"},
        "reservedConcurrency": {"type": ["integer", "null"]}}},
    "instances": {"type": "array", "items": {"type": "object", "properties": {
        "instanceId": {"type": "integer"}, "status": _INSTANCE_STATUS}}}}}
_TOTALS = {name: {"type": "integer"} for name in (
    "receivedTotal", "processedSuccessfullyTotal", "systemExceptionsTotal", "userExceptionsTotal")}
FUNCTION_STATS = {"type": "object", "description": "Pulsar's FunctionStats (the dispatcher's "
                  "figures).", "properties": {
    **_TOTALS, "avgProcessLatency": {"type": ["number", "null"]}, "lastInvocation": {"type": ["integer", "null"]},
    "oneMin": {"type": "object"}, "instances": {"type": "array", "items": {"type": "object"}}}}
FUNCTION_RECORD = {"type": "object", "description": "The registry's record of a function.", "properties": {
    "functionConfig": {"type": "object"}, "version": {"type": "integer"}, "state": {"enum": ["RUNNING", "STOPPED"]},
    "createdAt": {"type": "integer"}, "updatedAt": {"type": "integer"}, "codeKey": {"type": "string"},
    "codeSize": {"type": "integer"}, "codeSha256": {"type": "string"}, "codeCluster": {"type": "string"},
    "dispatched": {"type": "boolean"}}}
COUNTER_REQUEST = {"type": "object", "properties": {"amount": {"type": "integer"}}}
COUNTER_RESPONSE = {"type": "object", "properties": {"value": {"type": "integer"}}, "required": ["value"]}


def _names(tenant: str, namespace: str, function: str) -> tuple[str, str, str]:
    return unquote(tenant), unquote(namespace), unquote(function)


def _form() -> tuple[dict[str, Any], FunctionCode | None]:
    """Pulsar's register/update form: `functionConfig` (JSON) and `data` (the code file)."""
    parts = multipart.request_parts()
    if "url" in parts:
        raise InvalidInput("Function package URLs are not supported: upload the code as the part `data`")
    config_part = parts.get("functionConfig")
    try:
        config = json.loads(config_part.text) if config_part is not None else {}
    except ValueError:
        raise InvalidInput("functionConfig is not valid JSON") from None
    if not isinstance(config, dict):
        raise InvalidInput("functionConfig must be a JSON object")
    data = parts.get("data")
    code = None if data is None else FunctionCode(data.filename or config.get("py") or "function.py", data.data)
    return config, code


def record_json(record: FunctionRecord) -> dict[str, Any]:
    return {"functionConfig": json.loads(record.config), "version": record.version, "state": record.state,
            "createdAt": record.created_at, "updatedAt": record.updated_at, "codeKey": record.code_key,
            "codeSize": record.code_size, "codeSha256": record.code_sha256, "codeCluster": record.code_cluster,
            "dispatched": bool(record.code_key or json.loads(record.config).get("functionArn"))}


@guarded(router, "GET", FUNCTIONS, Access.FUNCTIONS, response=STRINGS)
def list_functions(tenant: str, namespace: str) -> Response[str]:
    """The names of the namespace's functions."""
    return json_response(build_broker().functions.list_functions(unquote(tenant), unquote(namespace)))


def _subscribe(config_json: str) -> None:
    """The function's subscription on its inputs, from now on (core/functions/inputs.py)."""
    from magnetar.core.functions.inputs import subscribe_inputs
    from magnetar.functions.config import FunctionConfig

    config = FunctionConfig.model_validate_json(config_json)
    try:
        subscribe_inputs(build_broker(), config)
    except Exception as exc:  # registered all the same: its first dispatch subscribes (an input that cannot be
        # created yet, a namespace limit): messages published before then are not its own at Latest
        logging.getLogger(__name__).warning("function %s: subscribing its inputs failed: %r", config.fqfn, exc)


@guarded(router, "POST", FUNCTION, Access.FUNCTIONS, request=REGISTER_FORM)
def register_function(tenant: str, namespace: str, function: str) -> Response[str]:
    """Register a function: its FunctionConfig and its code (multipart)."""
    names = _names(tenant, namespace, function)
    registry = build_broker().functions
    if not multipart.is_multipart():
        raise InvalidInput("Expected a multipart/form-data body with the parts functionConfig and data")
    data, code = _form()
    record = registry.create(registry.config_of(data, *names), code)
    _subscribe(record.config)
    return no_content()


@guarded(router, "PUT", FUNCTION, Access.FUNCTIONS, request=UPDATE_FORM)
def update_function(tenant: str, namespace: str, function: str) -> Response[str]:
    """Update a function: the FunctionConfig fields given replace the stored ones; new code (optional)."""
    if not multipart.is_multipart():
        raise InvalidInput("Expected a multipart/form-data body with the parts functionConfig and data")
    data, code = _form()
    record = build_broker().functions.update(*_names(tenant, namespace, function), data, code)
    _subscribe(record.config)
    return no_content()


@guarded(router, "GET", FUNCTION, Access.FUNCTIONS, response=FunctionConfig)
def get_function(tenant: str, namespace: str, function: str) -> Response[str]:
    """A function's FunctionConfig (`functionArn`: its Lambda function's)."""
    config = build_broker().functions.describe(*_names(tenant, namespace, function))
    return json_response(config.model_dump(mode="json", exclude_none=True))


@guarded(router, "DELETE", FUNCTION, Access.FUNCTIONS)
def delete_function(tenant: str, namespace: str, function: str) -> Response[str]:
    """Deregister a function (its code and this cluster's state go with it)."""
    build_broker().functions.delete(*_names(tenant, namespace, function))
    return no_content()


@guarded(router, "GET", f"{FUNCTION}/status", Access.FUNCTIONS, response=FUNCTION_STATUS)
def function_status(tenant: str, namespace: str, function: str) -> Response[str]:
    """A function's status (Pulsar's FunctionStatus; one instance, the dispatcher)."""
    return json_response(build_broker().functions.status(*_names(tenant, namespace, function)))


@guarded(router, "GET", f"{FUNCTION}/stats", Access.FUNCTIONS, response=FUNCTION_STATS)
def function_stats(tenant: str, namespace: str, function: str) -> Response[str]:
    """A function's stats (Pulsar's FunctionStats, added up by the dispatcher)."""
    return json_response(build_broker().functions.stats(*_names(tenant, namespace, function)))


@guarded(router, "POST", f"{FUNCTION}/start", Access.FUNCTIONS)
def start_function(tenant: str, namespace: str, function: str) -> Response[str]:
    """Set a function's desired state to RUNNING."""
    build_broker().functions.start(*_names(tenant, namespace, function))
    return no_content()


@guarded(router, "POST", f"{FUNCTION}/stop", Access.FUNCTIONS)
def stop_function(tenant: str, namespace: str, function: str) -> Response[str]:
    """Set a function's desired state to STOPPED."""
    build_broker().functions.stop(*_names(tenant, namespace, function))
    return no_content()


@guarded(router, "POST", f"{FUNCTION}/restart", Access.FUNCTIONS)
def restart_function(tenant: str, namespace: str, function: str) -> Response[str]:
    """Restart a function: its Lambda function is deployed again, with new execution environments."""
    build_broker().functions.restart(*_names(tenant, namespace, function))
    return no_content()


def _trigger_request() -> tuple[bytes, str | None]:
    """Pulsar's trigger form (`data` the value, or `dataStream` a file; `topic`), or JSON
    `{"triggerValue", "topic"}`."""
    if multipart.is_multipart():
        parts = multipart.request_parts()
        value = parts.get("data") or parts.get("dataStream")
        if value is None:
            raise InvalidInput("Trigger value is empty: send the part data (or dataStream)")
        topic = parts["topic"].text if "topic" in parts else None
        return value.data, topic or None
    body = json_body() if multipart.raw_body().strip() else None
    if not isinstance(body, dict) or not isinstance(body.get("triggerValue"), str):
        raise InvalidInput('Expected a multipart form (data, topic) or JSON {"triggerValue": ..., "topic": ...}')
    topic = body.get("topic")
    return body["triggerValue"].encode(), topic if isinstance(topic, str) and topic else None


@guarded(router, "POST", f"{FUNCTION}/trigger", Access.FUNCTIONS, request=TRIGGER_FORM,
         response=Content("text/plain", {"type": "string"}), errors=(408,),
         query={"timeoutMs": Param({"type": "integer", "minimum": 1, "maximum": 25_000},
                                   description=f"How long to wait for the output (default {DEFAULT_TRIGGER_TIMEOUT_MS})")})
def trigger_function(tenant: str, namespace: str, function: str) -> Response[str]:
    """Publish a value to the function's input and answer the output's next message."""
    broker = build_broker()
    config = broker.functions.get(*_names(tenant, namespace, function))
    value, topic = _trigger_request()
    raw_timeout = query("timeoutMs")
    timeout_ms = DEFAULT_TRIGGER_TIMEOUT_MS
    if raw_timeout:
        if not raw_timeout.isdigit() or not 1 <= int(raw_timeout) <= 25_000:
            raise InvalidInput("timeoutMs must be an integer from 1 to 25000")
        timeout_ms = int(raw_timeout)
    output = trigger(broker, config, value, topic, timeout_ms)
    if output is None:
        return no_content()
    return Response(status_code=200, content_type="text/plain", body=output.decode("utf-8", errors="replace"))


# --- state (Pulsar's FunctionState) and counters ------------------------------------------------
@guarded(router, "GET", f"{FUNCTION}/state/<key>", Access.FUNCTIONS, response=FUNCTION_STATE)
def get_function_state(tenant: str, namespace: str, function: str, key: str) -> Response[str]:
    """A key of the function's state: its value (string or base64 bytes) or counter, and version."""
    value = build_broker().functions.get_state(*_names(tenant, namespace, function), unquote(key))
    return json_response(state_json(value))


def _state_body() -> dict[str, Any]:
    if multipart.is_multipart():
        part = multipart.request_parts().get("state")
        if part is None:
            raise InvalidInput("Expected the form field state (a FunctionState JSON)")
        try:
            state = json.loads(part.text)
        except ValueError:
            raise InvalidInput("state is not valid JSON") from None
    else:
        state = json_body()
    if not isinstance(state, dict):
        raise InvalidInput("The state must be a JSON object (Pulsar's FunctionState)")
    return state


@guarded(router, "POST", f"{FUNCTION}/state/<key>", Access.FUNCTIONS, request=FUNCTION_STATE)
def put_function_state(tenant: str, namespace: str, function: str, key: str) -> Response[str]:
    """Set a key of the function's state: stringValue, byteValue (base64) or numberValue (a counter)."""
    state = _state_body()
    name = unquote(key)
    if state.get("key") not in (None, name):
        raise InvalidInput(f"The state's key {state.get('key')!r} does not match the path's {name!r}")
    value: bytes | None = None
    number = state.get("numberValue")
    if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
        raise InvalidInput("numberValue must be an integer")
    if isinstance(state.get("stringValue"), str):
        value = state["stringValue"].encode()
    elif state.get("byteValue") is not None:
        try:
            value = base64.b64decode(str(state["byteValue"]), validate=True)
        except (binascii.Error, ValueError):
            raise InvalidInput("byteValue must be base64") from None
    if value is None and number is None:
        raise InvalidInput("State value must be one of stringValue, byteValue or numberValue")
    build_broker().functions.put_state(*_names(tenant, namespace, function), name, value,
                                       number if value is None else None)
    return no_content()


@guarded(router, "POST", f"{MAGNETAR_FUNCTION}/counters/<key>", Access.FUNCTIONS,
         request=Content("application/json", COUNTER_REQUEST, required=False), response=COUNTER_RESPONSE)
def increment_counter(tenant: str, namespace: str, function: str, key: str) -> Response[str]:
    """Add `amount` (default 1) to a counter of the function's state, atomically; its value after."""
    body = json_body() if multipart.raw_body().strip() else {}
    amount = body.get("amount", 1) if isinstance(body, dict) else None
    if not isinstance(amount, int) or isinstance(amount, bool):
        raise InvalidInput('Expected {"amount": <integer>}')
    value = build_broker().functions.incr_counter(*_names(tenant, namespace, function), unquote(key), amount)
    return json_response({"value": value})


@guarded(router, "DELETE", f"{MAGNETAR_FUNCTION}/counters/<key>", Access.FUNCTIONS)
def delete_counter(tenant: str, namespace: str, function: str, key: str) -> Response[str]:
    """Delete a counter (or any key) of the function's state."""
    build_broker().functions.delete_counter(*_names(tenant, namespace, function), unquote(key))
    return no_content()


@guarded(router, "GET", MAGNETAR_FUNCTION, Access.FUNCTIONS, response=FUNCTION_RECORD)
def function_record(tenant: str, namespace: str, function: str) -> Response[str]:
    """The registry's record of a function: config, version, desired state, code location."""
    return json_response(record_json(build_broker().functions.record(*_names(tenant, namespace, function))))
