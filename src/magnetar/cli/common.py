"""What every command that talks to the broker shares: its URL, its credentials, its errors.

Credentials follow `pulsar-client`/`pulsar-admin`: `--auth-plugin` (default: Pulsar's
`org.apache.pulsar.client.impl.auth.AuthenticationToken`) with `--auth-params token:XYZ` or
`--auth-params file:///path/to/token`; or `--auth-plugin aws-iam` (SigV4 with the AWS credentials
of the environment; `--auth-params region:NAME` optional). Without them, the environment:
`MAGNETAR_AUTH_PLUGIN` / `MAGNETAR_AUTH_PARAMS`, or just `MAGNETAR_AUTH_TOKEN=<token>`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from magnetar.cli.errors import fail

if TYPE_CHECKING:
    import magnetar
    from magnetar.client.admin import AdminClient
    from magnetar.client.auth import Authentication

T = TypeVar("T")
# a cluster that refuses connections and never answered: said after this long, not after the SDK's 30 s of retries
UNREACHABLE_AFTER_S = 3.0
SERVICE_URL_ENV = "MAGNETAR_SERVICE_URL"
DEFAULT_URL = "http://127.0.0.1:8080"
AUTH_TOKEN_ENV = "MAGNETAR_AUTH_TOKEN"
AUTH_PARAMS_ENV = "MAGNETAR_AUTH_PARAMS"
AUTH_PLUGIN_ENV = "MAGNETAR_AUTH_PLUGIN"


def checked_service_url(value: str | None) -> str | None:
    """The `--service-url` option's check: a URL the SDK takes (else a usage error, status 2)."""
    from magnetar.client.transport import check_service_url

    if value is not None:
        try:
            check_service_url(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    return value


ServiceUrl = Annotated[str, typer.Option("--service-url", "-u", envvar=SERVICE_URL_ENV, help="Broker URL.",
                                         callback=checked_service_url)]
AuthPlugin = Annotated[str | None, typer.Option(
    "--auth-plugin", envvar=AUTH_PLUGIN_ENV,
    help="org.apache.pulsar.client.impl.auth.AuthenticationToken (default) or aws-iam (SigV4).")]
AuthParams = Annotated[str | None, typer.Option(
    "--auth-params", envvar=AUTH_PARAMS_ENV,
    help=f"token:XYZ or file:///path/to/token (default: ${AUTH_TOKEN_ENV}); aws-iam: region:NAME.")]


def authentication(auth_plugin: str | None = None, auth_params: str | None = None) -> Authentication | None:
    """The credentials the options (or else the environment) name; None: anonymous."""
    from magnetar.client.auth import AuthenticationToken, from_params

    if not auth_plugin and not auth_params:
        token = os.environ.get(AUTH_TOKEN_ENV, "").strip()
        return AuthenticationToken(token) if token else None
    try:
        return from_params(auth_plugin, auth_params)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--auth-plugin/--auth-params") from None


def admin_client(service_url: str, auth_plugin: str | None = None, auth_params: str | None = None) -> AdminClient:
    from magnetar.client.admin import AdminClient

    return AdminClient(service_url, authentication(auth_plugin, auth_params), unreachable_after_s=UNREACHABLE_AFTER_S)


def client(service_url: str, credentials: Authentication | None) -> magnetar.Client:
    """An SDK client for a command: a cluster that is not up is said within seconds."""
    import magnetar

    made = magnetar.Client(service_url, credentials)
    made._transport.unreachable_after_s = UNREACHABLE_AFTER_S
    return made


def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run an SDK call; a refusal becomes a one-line error and exit code 1."""
    from magnetar.client import exceptions
    from magnetar.core.errors import InvalidInput

    try:
        return fn(*args, **kwargs)
    except (exceptions.PulsarException, InvalidInput) as exc:
        fail(exc.reason)


def split_list(values: list[str] | None) -> list[str]:
    """`--roles a,b --roles c` -> [a, b, c]."""
    return [item.strip() for value in values or [] for item in value.split(",") if item.strip()]


def on_off(option: str, value: str) -> bool:
    """An on|off option's value (`--aws-limits on`)."""
    if value not in ("on", "off"):
        raise typer.BadParameter(f"{option} takes on or off, not {value!r}")
    return value == "on"
