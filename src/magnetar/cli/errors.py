"""The command line's errors, in one place: a user's error, an unreachable service, a refusal of
the broker or of AWS, a file that cannot be read or written, a run with nothing to show, is one
line on standard error (`error: ...`) and exit status 1; bad option values are typer's usage
errors (status 2). Anything else is a bug and keeps its traceback.

`CliGroup` is the `magnetar` app's command group: every command runs inside its `invoke`, which
turns the exceptions `user_error` knows into that line."""

from __future__ import annotations

import errno
import sys
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

err = Console(stderr=True, soft_wrap=True, highlight=False)

# An OSError with one of these is the environment's, not a bug: a path that is not there, not
# writable, not a directory; a port another process listens on.
ENVIRONMENT_ERRNOS = frozenset({errno.ENOENT, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR,
                                errno.EEXIST, errno.EROFS, errno.ENOSPC, errno.EADDRINUSE})


def one_line(text: str) -> str:
    """`text` with its line breaks and runs of blanks as single spaces."""
    return " ".join(text.split())


def fail(message: str, code: int = 1) -> NoReturn:
    """`error: message` on standard error, on one line, and exit with `code`."""
    err.print(f"[red]error:[/red] {escape(one_line(message))}")
    raise typer.Exit(code)


def user_error(exc: BaseException) -> str | None:
    """What the user needs to read about `exc` when it is theirs or their environment's (a refusal
    of the broker or of AWS, a service that cannot be reached, a path that is not there); None
    when it is a bug."""
    import httpx

    from magnetar.client.exceptions import PulsarException
    from magnetar.core.errors import MagnetarError

    if isinstance(exc, PulsarException | MagnetarError):
        return exc.reason
    pulsar = sys.modules.get("pulsar")  # the official client (perf --protocol pulsar), when a command loaded it
    if pulsar is not None and isinstance(exc, pulsar.PulsarException):
        return f"pulsar-client: {exc}"
    if isinstance(exc, httpx.TransportError):  # the CLI's own requests (perf's counters, local's doors)
        try:
            where = f"{exc.request.method} {exc.request.url}: "
        except RuntimeError:  # no request attached
            where = ""
        return f"cannot reach the service: {where}{exc}"
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:  # pragma: no cover - boto3 is a dependency
        pass
    else:
        if isinstance(exc, ClientError | BotoCoreError):  # refused by AWS, no credentials, no endpoint
            return f"AWS: {exc}"
    if isinstance(exc, OSError) and exc.errno in ENVIRONMENT_ERRNOS:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else (exc.strerror or str(exc))
    return None


class CliGroup(TyperGroup):
    """The `magnetar` command group: a user's error in any command is one line and exit status 1."""

    def invoke(self, ctx: Any) -> Any:  # typer's own click Context
        try:
            return super().invoke(ctx)
        except Exception as exc:  # only the errors user_error knows; the others keep their traceback
            message = user_error(exc)
            if message is None:
                raise
            fail(message)
