"""Reading the options (`text_option`, `int_option`, `bool_option`) and the settings of the
requests to one topic (`TopicSettings`): where the broker is, paging, timeouts, retries and
credentials. magnetar_spark.options adds the topics and offsets of a read or write.

    service.url        the HTTP API, e.g. http://127.0.0.1:8080 (required)
    pageSize           entries per read request, 1..1000 (default 1000)
    requestTimeoutMs   timeout of one HTTP request (default 30000)
    maxRetries         retries of a transient failure: connection error, 408, 429, 5xx (default 5)
    readTimeoutMs      how long a task waits for entries below the snapshot that are not
                       readable yet before failing (default 30000)
    pulsar.client.authPluginClassName
                       org.apache.pulsar.client.impl.auth.AuthenticationToken (the Pulsar
                       connector's option), or aws-iam (SigV4 with the node's AWS credentials)
    pulsar.client.authParams
                       token:XYZ or file:///path/to/token (read on each node, at each request);
                       for aws-iam optionally region:NAME

Credentials go on every request, from the driver (planning) and the executors (reading).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from magnetar.core.errors import InvalidInput
from magnetar.core.naming import TopicName
from magnetar_spark.errors import MagnetarSourceError

MAX_PAGE_SIZE = 1000  # the read endpoint's limit on maxEntries
AUTH_PLUGIN_OPTION = "pulsar.client.authPluginClassName"
AUTH_PARAMS_OPTION = "pulsar.client.authParams"
TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"


# --- options -----------------------------------------------------------------------------------
def text_option(options: Mapping[str, str], name: str) -> str | None:
    """An option by its name, case-insensitively (Spark's options are; a plain dict is not);
    None when absent or blank."""
    value = options.get(name)
    if value is None:
        lowered = name.lower()
        value = next((v for k, v in options.items() if str(k).lower() == lowered), None)
    return None if value is None or str(value).strip() == "" else str(value).strip()


def int_option(
    options: Mapping[str, str], name: str, default: int, minimum: int, maximum: int | None = None
) -> int:
    raw = options.get(name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"magnetar: option {name!r} must be an integer, got {raw!r}") from None
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f">= {minimum}" if maximum is None else f"between {minimum} and {maximum}"
        raise ValueError(f"magnetar: option {name!r} must be {bounds}, got {value}")
    return value


def bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = text_option(options, name)
    if raw is None:
        return default
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"magnetar: option {name!r} must be true or false, got {raw!r}")


# --- credentials -------------------------------------------------------------------------------
class TokenAuth:
    """`Authorization: Bearer` from Pulsar's token parameters: `token:XYZ` or `file:///path` (read at
    each request on the node making it, so a rotated file is used at once); other text is the
    token. A callable `auth=` for httpx (which is imported on the executors only when used)."""

    def __init__(self, params: str) -> None:
        text = params.strip()
        self._token = text[len("token:"):].strip() if text.startswith("token:") else None
        self._path: str | None = None
        if text.startswith("file:"):
            from urllib.parse import unquote, urlsplit

            self._path = unquote(urlsplit(text).path) if text.startswith("file://") else text[len("file:"):]
        elif self._token is None:
            self._token = text

    def token(self) -> str:
        if self._path is None:
            return self._token or ""
        from pathlib import Path

        try:
            return Path(self._path).expanduser().read_text().strip()
        except OSError as exc:
            raise MagnetarSourceError(f"magnetar: cannot read the token file {self._path}: {exc}",
                                      status=401, reason=str(exc)) from None

    def __call__(self, request: Any) -> Any:  # httpx calls it for every request it sends
        request.headers["Authorization"] = f"Bearer {self.token()}"
        return request


# --- the settings of requests to one topic ----------------------------------------------------
class TopicSettings:
    """The validated options of the requests to one topic; plain attributes, so it pickles to the
    executors (magnetar_spark.options points a copy at each topic-partition)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        url = options.get("service.url") or options.get("serviceUrl")
        if not url:
            raise ValueError("magnetar: option 'service.url' is required (e.g. http://127.0.0.1:8080)")
        self.service_url = str(url).rstrip("/")
        topic = options.get("topic")
        if not topic:
            raise ValueError("magnetar: option 'topic' is required (e.g. persistent://public/default/orders)")
        try:
            self.topic = TopicName.parse(str(topic).strip())
        except InvalidInput as exc:
            raise ValueError(f"magnetar: {exc.reason}") from None
        self.page_size = int_option(options, "pageSize", MAX_PAGE_SIZE, 1, MAX_PAGE_SIZE)
        self.request_timeout_s = int_option(options, "requestTimeoutMs", 30_000, 1) / 1000
        self.max_retries = int_option(options, "maxRetries", 5, 0)
        self.read_timeout_s = int_option(options, "readTimeoutMs", 30_000, 0) / 1000
        # the credentials as given (strings pickle; each node builds its own signer from them)
        self.auth_plugin = text_option(options, AUTH_PLUGIN_OPTION)
        self.auth_params = text_option(options, AUTH_PARAMS_OPTION)
        self.authentication()  # a bad plugin or parameters fail here, on the driver

    def authentication(self) -> Any:
        """A fresh `httpx.Auth` for the options' credentials, or None."""
        plugin, params = self.auth_plugin or "", self.auth_params
        if not plugin and params is None:
            return None
        if plugin.lower() in ("aws-iam", "awsiam", "sigv4") or plugin.endswith("AuthenticationAwsIam"):
            try:  # the SDK's signer: needs the magnetar wheel (not only the --py-files zip) and botocore
                from magnetar.client.auth import from_params
            except ImportError as exc:
                raise ValueError(f"magnetar: {AUTH_PLUGIN_OPTION}={plugin} needs the magnetar package installed "
                                 f"on every node (the wheel) and botocore: {exc}") from None
            return from_params(plugin, params)
        if plugin and plugin not in (TOKEN_PLUGIN, "token", "AuthenticationToken"):
            raise ValueError(f"magnetar: option {AUTH_PLUGIN_OPTION} must be {TOKEN_PLUGIN} or aws-iam, got {plugin!r}")
        if params is None:
            raise ValueError(f"magnetar: option {AUTH_PARAMS_OPTION} is required with {AUTH_PLUGIN_OPTION}: "
                             "token:XYZ or file:///path/to/token")
        return TokenAuth(params)

    @property
    def topic_path(self) -> str:
        t = self.topic
        return "/".join(
            quote(part, safe="") for part in (t.domain.value, t.tenant, t.namespace, t.local_name)
        )
