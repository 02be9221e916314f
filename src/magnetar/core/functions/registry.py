"""Pulsar Functions' registry and state on the ports (plain Python).

A function is instance-wide configuration (the configuration store, as Pulsar keeps it in its
function metadata topic): its FunctionConfig, a version bumped by each update, its desired state
(RUNNING or STOPPED), and where its code is. The code is one object in this cluster's bucket
(the SegmentStore's write-once put), under `functions/<tenant>/<ns>/<name>/<version>/<sha256
prefix>/<file name>` — the hash keeps a retried or concurrent upload of other bytes from taking
another's key. An index entry per input topic (and per topics pattern) lets the system find,
for a topic, the functions consuming it (`consumers_of`): what dispatch will use.

A function's state (Pulsar's state API: values and counters by key) lives in this cluster's table,
one item per key; a counter moves with one atomic write.

Registered functions are run by the dispatcher (`core/functions/dispatch.py`) when their inputs
have messages; `status` and `stats` report its figures (added up in this cluster's table).

Each registered function with code gets a Lambda function of its own through the
`FunctionDeployer` port (core/ports/functions.py), sized from its configuration
(core/functions/deployment.py): created when it is registered (the registration is undone when
Lambda refuses), brought to the new settings before an update is stored, created again or given new
execution environments by `restart`, removed with it. A function registered with a `functionArn`
(a Lambda function of the user's, for example a MagnetarFunction construct) is not deployed: the
dispatcher invokes that ARN.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any

from pydantic import ValidationError

from magnetar.core.errors import Conflict, InvalidInput, NotFound, PayloadTooLarge
from magnetar.core.functions.deployment import check_resources, deployment_of
from magnetar.core.naming import NamespaceName, TopicName, check_entity
from magnetar.core.ports import Clock, MetadataStore, SegmentStore
from magnetar.core.ports.functions import DeployedFunction, FunctionDeployer, FunctionRecord, StateValue
from magnetar.functions.config import FunctionConfig

log = logging.getLogger(__name__)

RUNNING, STOPPED = "RUNNING", "STOPPED"
# The HTTP API's request reaches the broker through API Gateway (10 MB) and a synchronous Lambda
# invocation (6 MB, the body base64-encoded: about 4.5 MB of multipart body): code up to 4 MiB.
MAX_CODE_BYTES = 4 * 1024 * 1024
MAX_INPUTS = 50  # a create writes the function and its index entries in one transaction (100 items)
CODE_SUFFIXES = (".py", ".zip", ".whl", ".pex")
# set at creation and never changed by an update (Pulsar's FunctionConfigUtils.validateUpdate)
IMMUTABLE = {"processingGuarantees": "Processing Guarantees", "retainOrdering": "Retain Ordering",
             "retainKeyOrdering": "Retain Key Ordering", "subName": "Subscription Name"}
DISPATCHER_WORKER = "magnetar-function-dispatcher"  # the "worker" of a function without a Lambda function
# a Lambda function's ARN (a version or alias may follow its name)
LAMBDA_ARN = re.compile(r"arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9$_-]{1,128})?")


@dataclass(frozen=True)
class FunctionCode:
    """A function's code as uploaded (multipart `data`): its file name and bytes."""

    filename: str
    data: bytes


def pattern_namespace(record: FunctionRecord) -> str:
    """The namespace a topics pattern is matched in (its own prefix; a short one: public/default,
    as Pulsar's TopicName)."""
    return str(TopicName.parse(record.topics_pattern).namespace_name)


def _dump(config: FunctionConfig) -> dict[str, Any]:
    return config.model_dump(mode="json", exclude_none=True)


class FunctionRegistry:
    """Create, update, delete, read, start, stop functions; their state and counters."""

    def __init__(self, metadata: MetadataStore, segments: SegmentStore, clock: Clock,
                 cluster_name: str = "standalone", deployer: FunctionDeployer | None = None) -> None:
        self.metadata = metadata
        self.segments = segments
        self.clock = clock
        self.cluster_name = cluster_name
        self.deployer = deployer  # None: functions are not deployed (they run where the invoker runs them)

    # --- reading ------------------------------------------------------------------------------
    def record(self, tenant: str, namespace: str, name: str) -> FunctionRecord:
        record = self.metadata.get_function(check_entity("tenant", tenant), check_entity("namespace", namespace),
                                            check_entity("function", name))
        if record is None:
            raise NotFound(f"Function {tenant}/{namespace}/{name} doesn't exist")
        return record

    def get(self, tenant: str, namespace: str, name: str) -> FunctionConfig:
        return FunctionConfig.model_validate_json(self.record(tenant, namespace, name).config)

    def list_functions(self, tenant: str, namespace: str) -> list[str]:
        ns = NamespaceName.of(tenant, namespace)
        return sorted(self.metadata.list_functions(ns.tenant, ns.namespace))

    def code(self, record: FunctionRecord) -> bytes:
        """The function's code (its object in this cluster's bucket)."""
        if not record.code_key:
            raise NotFound(f"Function {record.fqfn} has no code (it names a Lambda function: functionArn)")
        return self.segments.get_range(record.code_key, 0, record.code_size)

    def consumers_of(self, topic: str) -> list[str]:
        """The functions (fqfn) whose inputs name `topic` or whose topics pattern matches it."""
        name = TopicName.parse(topic).partitioned_topic
        found = set(self.metadata.functions_of_input(str(name)))
        for fqfn, pattern in self.metadata.function_patterns(str(name.namespace_name)).items():
            if re.fullmatch(pattern, str(name)) or re.fullmatch(pattern, name.local_name):
                found.add(fqfn)
        return sorted(found)

    # --- checks -------------------------------------------------------------------------------
    def _check_namespace(self, tenant: str, namespace: str) -> None:
        """Pulsar's registerFunction: an unknown tenant or namespace is a bad request (400)."""
        if self.metadata.get_tenant(tenant) is None:
            raise InvalidInput(f"Tenant {tenant} does not exist")
        if self.metadata.get_namespace(NamespaceName.of(tenant, namespace)) is None:
            raise InvalidInput(f"Namespace {tenant}/{namespace} does not exist")

    @staticmethod
    def config_of(data: dict[str, Any], tenant: str, namespace: str, name: str) -> FunctionConfig:
        """A FunctionConfig from its JSON, the path naming the function: a tenant, namespace or
        name the body leaves out is the path's; one that differs is refused (400)."""
        if not isinstance(data, dict):
            raise InvalidInput("functionConfig must be a JSON object")
        for field, value in (("tenant", tenant), ("namespace", namespace), ("name", name)):
            given = data.get(field)
            if given is None:
                data = {**data, field: value}
            elif given != value:
                raise InvalidInput(f"functionConfig {field} {given!r} does not match the path's {value!r}")
        try:
            return FunctionConfig.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "functionConfig"
            raise InvalidInput(f"Invalid functionConfig: {where}: {first.get('msg')}") from None

    @staticmethod
    def _check(config: FunctionConfig) -> FunctionConfig:
        """Pulsar's FunctionConfigUtils.validate (the rules that apply here); inputs and output
        become full topic names."""
        if not config.className and not config.functionArn:
            raise InvalidInput("Function classname cannot be null")
        inputs = list(dict.fromkeys(str(TopicName.parse(t)) for t in config.inputs))
        if not inputs and not config.topicsPattern:
            raise InvalidInput("No input topic(s) specified for the function")
        if len(inputs) > MAX_INPUTS:
            raise InvalidInput(f"A function takes at most {MAX_INPUTS} input topics ({len(inputs)} given)")
        if config.topicsPattern:
            try:
                re.compile(config.topicsPattern)
                TopicName.parse(config.topicsPattern)
            except (re.error, InvalidInput) as exc:
                raise InvalidInput(f"Invalid topicsPattern {config.topicsPattern!r}: {exc}") from None
        output = str(TopicName.parse(config.output)) if config.output else None
        if output is not None and output in inputs:
            raise InvalidInput(f"Output topic {output} is also being used as an input topic "
                               "(topics must be one or the other)")
        log_topic = str(TopicName.parse(config.logTopic)) if config.logTopic else None
        dead_letter = str(TopicName.parse(config.deadLetterTopic)) if config.deadLetterTopic else None
        if config.retainOrdering and config.retainKeyOrdering:
            raise InvalidInput("Only one of retain ordering or retain key ordering can be set")
        if dead_letter is not None and config.maxMessageRetries < 0:
            raise InvalidInput("Dead Letter Topic specified, however max retries is set to infinity")
        if config.py is not None and not config.py.endswith(CODE_SUFFIXES):
            raise InvalidInput(f"py must name a Python file or package ({', '.join(CODE_SUFFIXES)}): {config.py!r}")
        if config.functionArn is not None and not LAMBDA_ARN.fullmatch(config.functionArn):
            raise InvalidInput(f"functionArn must be a Lambda function's ARN "
                               f"(arn:aws:lambda:<region>:<account>:function:<name>): {config.functionArn!r}")
        check_resources(config)
        return config.model_copy(update={"inputs": inputs, "output": output, "logTopic": log_topic,
                                         "deadLetterTopic": dead_letter})

    @staticmethod
    def _check_code(code: FunctionCode | None) -> None:
        if code is None:
            return
        if len(code.data) > MAX_CODE_BYTES:
            raise PayloadTooLarge(f"Function code of {len(code.data)} bytes exceeds {MAX_CODE_BYTES} bytes "
                                  "(API Gateway and Lambda's request limits)")
        if not code.data:
            raise InvalidInput("Function package is empty")

    def _store_code(self, config: FunctionConfig, version: int, code: FunctionCode) -> tuple[str, str]:
        digest = hashlib.sha256(code.data).hexdigest()
        filename = PurePosixPath(code.filename.replace("\\", "/")).name or config.py or "function.py"
        key = f"functions/{config.tenant}/{config.namespace}/{config.name}/{version}/{digest[:16]}/{filename}"
        self.segments.put_if_absent(key, code.data)  # the same bytes when it exists (the hash is in the key)
        return key, digest

    # --- writing ------------------------------------------------------------------------------
    def create(self, config: FunctionConfig, code: FunctionCode | None) -> FunctionRecord:
        """Pulsar's registerFunction: 400 bad config (or tenant, namespace), 409 when it exists."""
        config = self._check(config)
        self._check_namespace(config.tenant, config.namespace)
        if code is None and not config.functionArn:
            raise InvalidInput("Function package is not provided (the multipart part `data`)")
        self._check_code(code)
        if self.metadata.get_function(config.tenant, config.namespace, config.name) is not None:
            raise Conflict(f"Function {config.fqfn} already exists")
        if code is not None and config.py is None:
            config = config.model_copy(update={"py": PurePosixPath(code.filename).name or None})
        now = self.clock.now_ms()
        key, digest = self._store_code(config, 1, code) if code is not None else ("", "")
        record = FunctionRecord(config.tenant, config.namespace, config.name, json.dumps(_dump(config)), 1, RUNNING,
                                now, now, key, len(code.data) if code else 0, digest,
                                self.cluster_name if code else "", tuple(config.inputs), config.topicsPattern or "")
        if not self.metadata.create_function(record):
            if key:
                self.segments.delete([key])
            raise Conflict(f"Function {config.fqfn} already exists")
        if self._deployed(config):
            assert self.deployer is not None
            try:
                self.deployer.deploy(deployment_of(config))
            except Exception:  # not registered after all: the function would have nowhere to run
                self.metadata.delete_function(record)
                if key:
                    self.segments.delete([key])
                raise
        return record

    def _deployed(self, config: FunctionConfig) -> bool:
        """Whether the function has a Lambda function of ours (none with a functionArn of the user's)."""
        return self.deployer is not None and not config.functionArn

    def update(self, tenant: str, namespace: str, name: str, changes: dict[str, Any],
               code: FunctionCode | None) -> FunctionRecord:
        """Pulsar's updateFunction: the fields given replace the stored ones (the others stay);
        new code (optional) becomes the next version's. 404 unknown, 400 bad config or a change of
        what cannot change, 409 when another update came in between."""
        current = self.record(tenant, namespace, name)
        stored = json.loads(current.config)
        if not isinstance(changes, dict):
            raise InvalidInput("functionConfig must be a JSON object")
        given = self.config_of(changes, tenant, namespace, name)  # checks the names and the types
        before = FunctionConfig.model_validate(stored)
        if "functionArn" in given.model_fields_set and given.functionArn and not before.functionArn \
                and self._managed_arn(current.fqfn) == given.functionArn:
            given.model_fields_set.discard("functionArn")  # `get`'s answer sent back: our own Lambda function
        for field, label in IMMUTABLE.items():
            if field in given.model_fields_set and getattr(given, field) != getattr(before, field):
                raise InvalidInput(f"{label} cannot be altered")
        merged = self._check(FunctionConfig.model_validate(
            {**stored, **{k: v for k, v in _dump(given).items() if k in given.model_fields_set}}))
        self._check_code(code)
        if code is not None and "py" not in given.model_fields_set:
            merged = merged.model_copy(update={"py": PurePosixPath(code.filename).name or merged.py})
        if self._deployed(merged):  # settings Lambda refuses are refused before anything is stored
            assert self.deployer is not None
            self.deployer.deploy(deployment_of(merged))
        version = current.version + 1
        key, digest, size = current.code_key, current.code_sha256, current.code_size
        if code is not None:
            key, digest = self._store_code(merged, version, code)
            size = len(code.data)
        record = replace(current, config=json.dumps(_dump(merged)), version=version, updated_at=self.clock.now_ms(),
                         code_key=key, code_size=size, code_sha256=digest,
                         code_cluster=self.cluster_name if code is not None else current.code_cluster,
                         inputs=tuple(merged.inputs), topics_pattern=merged.topicsPattern or "")
        if not self.metadata.update_function(record, current):
            if key != current.code_key:
                self.segments.delete([key])
            if self.metadata.get_function(current.tenant, current.namespace, current.name) is None:
                raise NotFound(f"Function {current.fqfn} doesn't exist")
            raise Conflict(f"Function {current.fqfn} was updated concurrently; retry")
        if current.code_key and key != current.code_key and current.code_cluster == self.cluster_name:
            self.segments.delete([current.code_key])  # the former version's code (best effort)
        if self.deployer is not None and merged.functionArn and not before.functionArn:
            self.deployer.remove(current.fqfn)  # the user's Lambda function runs it from now on
        return record

    def _managed_arn(self, fqfn: str) -> str | None:
        deployed = self.deployer.describe(fqfn) if self.deployer is not None else None
        return deployed.arn if deployed is not None else None

    def delete(self, tenant: str, namespace: str, name: str) -> None:
        """Pulsar's deregisterFunction: the function, its index entries, its code and its state
        (this cluster's) are gone."""
        record = self.record(tenant, namespace, name)
        if self.deployer is not None:  # first: a failure leaves the function registered, to delete again
            self.deployer.remove(record.fqfn)
        if not self.metadata.delete_function(record):
            raise NotFound(f"Function {record.fqfn} doesn't exist")
        if record.code_key and record.code_cluster == self.cluster_name:
            self.segments.delete([record.code_key])
        self.metadata.clear_function_state(record.fqfn)
        self.metadata.clear_function_state(record.fqfn + "#stats")  # the dispatcher's figures

    def _set_state(self, tenant: str, namespace: str, name: str, state: str) -> None:
        record = self.record(tenant, namespace, name)
        if not self.metadata.set_function_state(record.tenant, record.namespace, record.name, state):
            raise NotFound(f"Function {record.fqfn} doesn't exist")

    def start(self, tenant: str, namespace: str, name: str) -> None:
        self._set_state(tenant, namespace, name, RUNNING)

    def stop(self, tenant: str, namespace: str, name: str) -> None:
        self._set_state(tenant, namespace, name, STOPPED)

    def restart(self, tenant: str, namespace: str, name: str) -> None:
        """Pulsar restarts the instances. Here: the function's Lambda function is deployed again (created
        if it is missing, brought to the configuration) with new execution environments, which load
        the code anew (after a stack upgrade, this also moves it to the new runtime)."""
        record = self.record(tenant, namespace, name)
        config = FunctionConfig.model_validate_json(record.config)
        if self._deployed(config):
            assert self.deployer is not None
            self.deployer.deploy(deployment_of(config, restart=str(self.clock.now_ms())))

    def deployment(self, fqfn: str) -> DeployedFunction | None:
        """The function's Lambda function as it is now (None: not deployed, or no deployer)."""
        return self.deployer.describe(fqfn) if self.deployer is not None else None

    def describe(self, tenant: str, namespace: str, name: str) -> FunctionConfig:
        """`get`, with `functionArn` the ARN of the function's Lambda function (ours or the user's)."""
        config = self.get(tenant, namespace, name)
        if config.functionArn or not self._deployed(config):
            return config
        arn = self._managed_arn(config.fqfn)
        return config.model_copy(update={"functionArn": arn}) if arn else config

    # --- status and stats (Pulsar's shapes; the dispatcher's figures, core/functions/stats.py) -----
    def _figures(self, fqfn: str) -> dict[str, Any]:
        from magnetar.core.functions.stats import FunctionStats

        return FunctionStats(self.metadata, fqfn).read()

    def status(self, tenant: str, namespace: str, name: str) -> dict[str, Any]:
        """One instance: the dispatcher, which runs the function when its inputs have messages
        ("running" while the function is RUNNING, though nothing runs while it is idle)."""
        record = self.record(tenant, namespace, name)
        figures = self._figures(record.fqfn)
        latency = figures["latencyUsTotal"] / 1000 / figures["latencyCount"] if figures["latencyCount"] else 0.0
        config = FunctionConfig.model_validate_json(record.config)
        deployment, error = self._deployment_status(config)
        arn = config.functionArn or (deployment or {}).get("functionArn")
        running = record.state == RUNNING and not error
        instance = {"running": running, "error": error, "numRestarts": 0, "numReceived": figures["received"],
                    "numSuccessfullyProcessed": figures["processed"],
                    "numUserExceptions": figures["userExceptions"],
                    "latestUserExceptions": figures["latestUserExceptions"] or [],
                    "numSystemExceptions": figures["systemExceptions"],
                    "latestSystemExceptions": figures["latestSystemExceptions"] or [], "averageLatency": latency,
                    "lastInvocationTime": figures["lastInvocation"] or 0, "workerId": arn or DISPATCHER_WORKER}
        status: dict[str, Any] = {"numInstances": 1, "numRunning": 1 if running else 0,
                                  "instances": [{"instanceId": 0, "status": instance}]}
        if arn:
            status["functionArn"] = arn
        if deployment is not None:
            status["deployment"] = deployment
        return status

    def _deployment_status(self, config: FunctionConfig) -> tuple[dict[str, Any] | None, str]:
        """The function's Lambda function for `status`, and the error that keeps it from running."""
        if not self._deployed(config):
            return None, ""
        try:
            deployed = self.deployment(config.fqfn)
        except Exception as exc:  # the status still answers
            log.warning("%s: describing its Lambda function failed: %r", config.fqfn, exc)
            return None, f"Its Lambda function could not be described: {exc}"
        if deployed is None:
            return None, "Its Lambda function does not exist: `functions restart` creates it"
        error = "" if deployed.ready or deployed.state == "Pending" else \
            f"Its Lambda function is {deployed.state} (last update {deployed.last_update}): {deployed.reason}"
        return {"functionArn": deployed.arn, "state": deployed.state, "lastUpdateStatus": deployed.last_update,
                "memoryMb": deployed.memory_mb, "timeoutS": deployed.timeout_s,
                "reservedConcurrency": deployed.concurrency}, error

    def stats(self, tenant: str, namespace: str, name: str) -> dict[str, Any]:
        record = self.record(tenant, namespace, name)
        figures = self._figures(record.fqfn)
        window = {"receivedTotal": figures["received"], "processedSuccessfullyTotal": figures["processed"],
                  "systemExceptionsTotal": figures["systemExceptions"],
                  "userExceptionsTotal": figures["userExceptions"],
                  "avgProcessLatency": figures["latencyUsTotal"] / 1000 / figures["latencyCount"]
                  if figures["latencyCount"] else None}
        # oneMin: no per-minute window is kept (the totals are counters): zeros, as an idle minute
        one_min = {"receivedTotal": 0, "processedSuccessfullyTotal": 0, "systemExceptionsTotal": 0,
                   "userExceptionsTotal": 0, "avgProcessLatency": None}
        last = figures["lastInvocation"]
        metrics = {**window, "lastInvocation": last, "oneMin": dict(one_min), "userMetrics": {}}
        return {**window, "lastInvocation": last, "oneMin": dict(one_min),
                "instances": [{"instanceId": 0, "metrics": metrics}]}

    # --- state --------------------------------------------------------------------------------
    def get_state(self, tenant: str, namespace: str, name: str, key: str) -> StateValue:
        record = self.record(tenant, namespace, name)
        value = self.metadata.get_function_state(record.fqfn, _state_key(key))
        if value is None:
            raise NotFound(f"key '{key}' doesn't exist.")
        return value

    def put_state(self, tenant: str, namespace: str, name: str, key: str, value: bytes | None = None,
                  number: int | None = None) -> int:
        """Set a value or (`number`) a counter; the key's new version."""
        record = self.record(tenant, namespace, name)
        if number is not None:
            return self.metadata.set_function_counter(record.fqfn, _state_key(key), number)
        if value is None:
            raise InvalidInput("State value must be one of stringValue, byteValue or numberValue")
        if len(value) > MAX_STATE_BYTES:
            raise PayloadTooLarge(f"State value of {len(value)} bytes exceeds {MAX_STATE_BYTES} bytes")
        return self.metadata.put_function_state(record.fqfn, _state_key(key), value)

    def incr_counter(self, tenant: str, namespace: str, name: str, key: str, amount: int) -> int:
        record = self.record(tenant, namespace, name)
        return self.metadata.incr_function_counter(record.fqfn, _state_key(key), amount)

    def delete_counter(self, tenant: str, namespace: str, name: str, key: str) -> None:
        record = self.record(tenant, namespace, name)
        self.metadata.delete_function_state(record.fqfn, _state_key(key))

    def state_of(self, fqfn: str) -> FunctionStateStore:
        """The state API a running function uses (`magnetar.functions.state.FunctionState`)."""
        return FunctionStateStore(self.metadata, fqfn)


MAX_STATE_BYTES = 350 * 1024  # one DynamoDB item (400 KB) with its key and attributes
MAX_STATE_KEY = 1024


def _state_key(key: str) -> str:
    if not key or len(key.encode()) > MAX_STATE_KEY:
        raise InvalidInput(f"Invalid state key: {key[:40]!r} (1 to {MAX_STATE_KEY} bytes)")
    return key


def state_json(value: StateValue) -> dict[str, Any]:
    """Pulsar's FunctionState: `key`, one of `stringValue` (UTF-8 text), `byteValue` (base64) or
    `numberValue` (a counter), and `version`."""
    import base64

    out: dict[str, Any] = {"key": value.key}
    if value.counter is not None:
        out["numberValue"] = value.counter
    elif value.value is not None:
        try:
            out["stringValue"] = value.value.decode("utf-8")
        except UnicodeDecodeError:
            out["byteValue"] = base64.b64encode(value.value).decode()
    out["version"] = value.version
    return out


class FunctionStateStore:
    """`magnetar.functions.state.FunctionState` on the MetadataStore, for one function (no check
    that it exists: a running function's calls cost one request each)."""

    def __init__(self, metadata: MetadataStore, fqfn: str) -> None:
        self.metadata = metadata
        self.fqfn = fqfn

    def get_state(self, key: str) -> bytes | None:
        value = self.metadata.get_function_state(self.fqfn, _state_key(key))
        return None if value is None else value.value

    def put_state(self, key: str, value: bytes) -> None:
        self.metadata.put_function_state(self.fqfn, _state_key(key), value)

    def incr_counter(self, key: str, amount: int) -> int:
        return self.metadata.incr_function_counter(self.fqfn, _state_key(key), amount)

    def get_counter(self, key: str) -> int:
        value = self.metadata.get_function_state(self.fqfn, _state_key(key))
        return value.counter or 0 if value is not None else 0

    def del_counter(self, key: str) -> None:
        self.metadata.delete_function_state(self.fqfn, _state_key(key))
