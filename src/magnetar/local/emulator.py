"""The embedded AWS emulator: moto's server, in its own process.

`python -m magnetar.local.emulator --port 4566` serves S3, DynamoDB, Kinesis, ... on one port,
like LocalStack. One difference from `moto_server`: requests are applied one at a time. Moto's
backends are not thread-safe (its Kinesis put_record says so; its DynamoDB conditional updates
read and write in two steps), while AWS applies each write atomically per item and per shard —
the very property Magnetar's coordination relies on. Serializing requests gives the emulator
that atomicity; its throughput is GIL-bound anyway. `magnetar.local.moto_fixes` mends moto where a
long run needs it (TransactWriteItems' rollback copied whole tables, a Query sorted the whole table).

Served by waitress, not werkzeug's development server: werkzeug 3 closes the connection after every
response (and starts a thread for every connection), so each AWS call paid a TCP handshake and a
thread start; waitress keeps HTTP/1.1 connections alive and runs the app on a fixed pool of threads
(docs/architecture.md, "The emulator's server").

`--limits on` enforces AWS's service limits with AWS's errors and `--latency` adds modeled AWS
latency (`magnetar.local.aws_limits`: a WSGI middleware around the serialized app; the modeled
wait happens outside the lock).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Any

import waitress
from moto.moto_server.threaded_moto_server import ThreadedMotoServer  # noqa: F401 - keeps moto's server deps loaded
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app


class SerializedApp:
    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        # Buffer the response inside the lock: the iterable may still touch backend state.
        with self.lock:
            return list(self.app(environ, start_response))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Magnetar's embedded AWS emulator (moto server)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4566)
    parser.add_argument("--limits", choices=("on", "off"), default="off",
                        help="Enforce AWS's service limits with AWS's errors (magnetar.local.fidelity).")
    parser.add_argument("--latency", action="store_true", help="Add modeled AWS latency per operation.")
    parser.add_argument("--seed", type=int, default=None, help="The latency model's random seed.")
    parser.add_argument("--threads", type=int, default=64,
                        help="Threads serving requests (they wait for one another: moto is serialized, but a "
                             "modeled latency is waited out outside the lock, side by side).")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    logging.getLogger("waitress").setLevel(logging.ERROR)  # no banner, no "task queue depth" warnings
    from magnetar.local import moto_fixes

    moto_fixes.apply()  # transactions roll back their items, not a copy of every table
    serialized = SerializedApp(DomainDispatcherApplication(create_backend_app))
    app: Any = serialized
    if args.limits == "on" or args.latency:  # off: moto as is, not one more call per request
        from magnetar.local.aws_latency import LatencyModel
        from magnetar.local.aws_limits import AwsEndpoint

        app = AwsEndpoint(serialized, limits=args.limits == "on",
                          latency=LatencyModel(args.seed) if args.latency else None, backend_lock=serialized.lock)
    # connection_limit: every boto3 client of the runtime keeps up to 10 connections; poll(), not
    # select(), past 1,024 sockets; the channel timeout closes a client's idle connection after 5 min.
    waitress.serve(app, host=args.host, port=args.port, threads=args.threads, connection_limit=4000,
                   backlog=2048, asyncore_use_poll=True, channel_timeout=300, ident="magnetar-emulator",
                   _quiet=True)


if __name__ == "__main__":
    main()
