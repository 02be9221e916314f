"""The embedded AWS emulator: moto's server, in its own process.

`python -m magnetar.local.emulator --port 4566` serves S3, DynamoDB, Kinesis, ... on one port,
like LocalStack. One difference from `moto_server`: requests are applied one at a time. Moto's
backends are not thread-safe (its Kinesis put_record says so; its DynamoDB conditional updates
read and write in two steps), while AWS applies each write atomically per item and per shard —
the very property Magnetar's coordination relies on. Serializing requests gives the emulator
that atomicity; its throughput is GIL-bound anyway. `magnetar.local.moto_fixes` mends moto where a
long run needs it (TransactWriteItems' rollback copied whole tables).

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

from moto.moto_server.threaded_moto_server import ThreadedMotoServer  # noqa: F401 - keeps moto's server deps loaded
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import WSGIRequestHandler, run_simple


class SerializedApp:
    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        # Buffer the response inside the lock: the iterable may still touch backend state.
        with self.lock:
            return list(self.app(environ, start_response))


class _QuietHandler(WSGIRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: boto3 reuses connections

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Magnetar's embedded AWS emulator (moto server)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4566)
    parser.add_argument("--limits", choices=("on", "off"), default="off",
                        help="Enforce AWS's service limits with AWS's errors (magnetar.local.fidelity).")
    parser.add_argument("--latency", action="store_true", help="Add modeled AWS latency per operation.")
    parser.add_argument("--seed", type=int, default=None, help="The latency model's random seed.")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no dev-server banner, no access log
    from magnetar.local import moto_fixes

    moto_fixes.apply()  # transactions roll back their items, not a copy of every table
    serialized = SerializedApp(DomainDispatcherApplication(create_backend_app))
    app: Any = serialized
    if args.limits == "on" or args.latency:  # off: moto as is, not one more call per request
        from magnetar.local.aws_latency import LatencyModel
        from magnetar.local.aws_limits import AwsEndpoint

        app = AwsEndpoint(serialized, limits=args.limits == "on",
                          latency=LatencyModel(args.seed) if args.latency else None, backend_lock=serialized.lock)
    run_simple(args.host, args.port, app, threaded=True, request_handler=_QuietHandler)


if __name__ == "__main__":
    main()
