"""`python -m magnetar.protocol`: the proxy alone, as its container runs it on ECS Fargate.

Configured from the environment, as the functions are (`magnetar.config`: the table, bucket,
stream, WebSocket endpoint, authentication and token-key secret variables the stack sets), plus
`MAGNETAR_PULSAR_HOST` (default 0.0.0.0), `MAGNETAR_PULSAR_PORT` (default 6650) and
`MAGNETAR_PULSAR_APPEND_INTERVAL_MS` (default 250: a streaming producer's appends). TLS is the
load balancer's (a TLS listener on 6651 in front of this plain port; docs/architecture.md).
SIGTERM (a task stopping) drops the connections: the clients reconnect to another task.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal

from magnetar.protocol.server import ProxyServer, ProxySettings

ENV_HOST = "MAGNETAR_PULSAR_HOST"
ENV_PORT = "MAGNETAR_PULSAR_PORT"
ENV_APPEND_INTERVAL = "MAGNETAR_PULSAR_APPEND_INTERVAL_MS"  # ProxySettings.append_interval_ms


async def serve(settings: ProxySettings) -> None:
    server = ProxyServer(settings)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()


def main() -> None:
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"))
    settings = ProxySettings(host=os.environ.get(ENV_HOST, "0.0.0.0"),  # every interface: a container's port
                             port=int(os.environ.get(ENV_PORT, "6650")),
                             append_interval_ms=int(os.environ.get(ENV_APPEND_INTERVAL, "250")))
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
