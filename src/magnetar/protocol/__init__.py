"""Pulsar's binary protocol, served by a stateless proxy in front of Magnetar's core.

The official Pulsar clients (`pulsar://host:6650`) reach Magnetar through it unchanged:

- `pulsar_api.proto` / `pulsar_api_pb2`: the protocol's commands (Magnetar's own .proto, `make proto`);
- `frames`: the frame codec (sizes, payload checksums, message metadata);
- `messages`: Pulsar messages and batches to Magnetar batches and back;
- `server`: the asyncio TCP server (`ProxyServer`, `ProxyThread`);
- `connection`: one connection's handshake, keep-alive and routing;
- `lookups`: LOOKUP (proxy-style), partitioned metadata, a namespace's topics, schemas by topic;
- `producers` / `consumers` / `readers`: producers (SEND), consumers (FLOW, MESSAGE, ACK), readers;
- `schemas`: producers' and consumers' schemas through the schema registry;
- `errors`: the core's errors as Pulsar's ServerError codes.

docs/semantics.md ("Pulsar's binary protocol") says what is served and what is not yet.
"""

from magnetar.protocol.server import ProxyServer, ProxySettings, ProxyThread

__all__ = ["ProxyServer", "ProxySettings", "ProxyThread"]
