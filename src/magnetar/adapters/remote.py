"""RemoteClusters over the other clusters' HTTP APIs: a replicator appends to a remote cluster
as a producer of it would, at the `serviceUrl` and with the authentication its ClusterData
names (Pulsar's replicators connect to the remote cluster's service URL the same way).

One remote append is one publish of the SDK's `batches` shape (one group append there: one
reservation, one journal record), each batch carrying its origin; a chunk travels alone, as
the produce API requires. The replicator's producer is `pulsar.repl.<this cluster>`, so the
remote deduplicates a repeated append by the origin's entry ids.
"""

from __future__ import annotations

import base64
import time
from typing import Any
from urllib.parse import quote, urlparse

import httpx

from magnetar.client.auth import Authentication, AuthenticationAwsIam, AuthenticationToken
from magnetar.client.transport import tls_context
from magnetar.config import REPLICATED_SUBSCRIPTIONS_PATH, SOURCE_CLUSTER_HEADER
from magnetar.core.entry import Batch
from magnetar.core.naming import TopicName
from magnetar.core.ports import MetadataStore
from magnetar.core.replication import RemoteUnavailable, replicator_name

CLUSTER_CACHE_MS = 30_000  # a cluster's ClusterData is read again after this long
TIMEOUT_S = 10.0
_TOKEN_PLUGINS = ("token", "org.apache.pulsar.client.impl.auth.AuthenticationToken")
_IAM_PLUGINS = ("aws-iam", "sigv4")


def authentication_of(plugin: str, parameters: str, service_url: str) -> Authentication | None:
    """The authentication a ClusterData names (Pulsar's authenticationPlugin and its
    parameters): a token (`token:<jwt>`, or the JWT itself), AWS SigV4 for an IAM-authorized API
    (the region from the URL, else the process's), or none."""
    if not plugin:
        return None
    if plugin in _TOKEN_PLUGINS:
        token = parameters.removeprefix("token:").strip()
        return AuthenticationToken(token)
    if plugin in _IAM_PLUGINS:
        host = urlparse(service_url).hostname or ""
        parts = host.split(".")  # {api}.execute-api.{region}.amazonaws.com
        region = parts[2] if len(parts) > 3 and parts[1] == "execute-api" else None
        return AuthenticationAwsIam(region=region)
    raise RemoteUnavailable(f"the cluster's authentication plugin {plugin!r} is not supported")


class HttpRemoteClusters:
    def __init__(self, metadata: MetadataStore, local_cluster: str, http: httpx.Client | None = None) -> None:
        self.metadata = metadata
        self.local_cluster = local_cluster
        self.http = http or httpx.Client(timeout=httpx.Timeout(TIMEOUT_S, connect=3.0), verify=tls_context())
        self._clusters: dict[str, tuple[float, str, Authentication | None]] = {}

    def _target(self, cluster: str) -> tuple[str, Authentication | None]:
        cached = self._clusters.get(cluster)
        if cached is None or (time.monotonic() - cached[0]) * 1000 > CLUSTER_CACHE_MS:
            data = self.metadata.get_cluster(cluster)
            if data is None or not data.service_url:
                raise RemoteUnavailable(f"cluster {cluster} is not registered (no serviceUrl)")
            auth = authentication_of(data.authentication_plugin, data.authentication_parameters, data.service_url)
            cached = (time.monotonic(), data.service_url.rstrip("/"), auth)
            self._clusters[cluster] = cached
        return cached[1], cached[2]

    def append(self, cluster: str, topic: TopicName, batches: list[Batch]) -> None:
        for body in _requests(replicator_name(self.local_cluster), batches):
            self._post(cluster, "/topics/" + _topic_path(topic), body)

    def acknowledge(self, cluster: str, topic: TopicName, subscription: str, subscription_type: str,
                    origin_acked: dict[str, int]) -> None:
        self._post(cluster, f"{REPLICATED_SUBSCRIPTIONS_PATH}/{_topic_path(topic)}/{quote(subscription, safe='')}",
                   {"cluster": self.local_cluster, "subscriptionType": subscription_type, "originAcked": origin_acked})

    def _post(self, cluster: str, path: str, body: dict[str, Any]) -> None:
        base, auth = self._target(cluster)
        try:
            response = self.http.post(base + path, json=body, auth=auth or httpx.USE_CLIENT_DEFAULT,
                                      headers={SOURCE_CLUSTER_HEADER: self.local_cluster})
        except httpx.HTTPError as exc:
            raise RemoteUnavailable(f"cluster {cluster} unreachable: {exc}") from exc
        if response.status_code >= 300:
            raise RemoteUnavailable(f"cluster {cluster} answered {response.status_code}: {response.text[:200]}")


def _topic_path(topic: TopicName) -> str:
    return "/".join(quote(p, safe="") for p in (topic.domain.value, topic.tenant, topic.namespace, topic.local_name))


def _batch_body(batch: Batch) -> dict[str, Any]:
    body: dict[str, Any] = {
        "payload": base64.b64encode(batch.payload).decode(), "numMessages": batch.num_messages,
        "compression": batch.compression.value, "uncompressedSize": batch.uncompressed_size, "key": batch.key,
        "batched": batch.batched, "deliverAt": batch.deliver_at,
    }
    if batch.chunk is not None:
        c = batch.chunk
        body["chunk"] = {"uuid": c.uuid, "chunkId": c.chunk_id, "numChunks": c.num_chunks, "totalSize": c.total_size}
    if batch.replicate_to is not None:
        body["replicationClusters"] = list(batch.replicate_to)
    if batch.origin is not None:
        o = batch.origin
        body["origin"] = {"cluster": o.cluster, "ledgerId": o.ledger_id, "entryId": o.entry_id,
                          "producerName": o.producer_name, "sequenceId": o.sequence_id,
                          "highestSequenceId": o.highest_sequence_id, "publishTime": o.publish_time}
    return body


def _requests(producer: str, batches: list[Batch]) -> list[dict[str, Any]]:
    """The publishes carrying `batches` in order: runs of whole batches as one `batches` publish,
    each chunk alone as a `batch` publish (with the request's sequence ids)."""
    out: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []
    for batch in batches:
        body = _batch_body(batch)
        if batch.chunk is None:
            run.append({**body, "sequenceId": batch.sequence_id, "highestSequenceId": batch.highest_sequence_id})
            continue
        if run:
            out.append({"producerName": producer, "batches": run})
            run = []
        out.append({"producerName": producer, "sequenceId": batch.sequence_id,
                    "highestSequenceId": batch.highest_sequence_id, "batch": body})
    if run:
        out.append({"producerName": producer, "batches": run})
    return out
