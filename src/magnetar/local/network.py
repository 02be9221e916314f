"""The network between the clusters of a local instance, where an outage is staged.

A cluster taken off the network refuses connections on its HTTP, WebSocket and binary ports,
and replication to and from it fails as in a network partition: its own doors are closed
(`LocalCluster` watches its flag), and the other clusters refuse its replicators' requests
(they name their cluster in a header). Its region is cut off too: the AWS requests a cluster's
runtime makes to another cluster's region (the configuration store's home replica) fail with
botocore's own connection error while either of the two is off the network (`partition`), as
they would between two partitioned AWS regions. The flags are files in a directory every cluster
process of the instance shares, so any cluster's port can take any cluster off or bring it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import EndpointConnectionError

from magnetar.core.clusters import valid_cluster_name


@dataclass(frozen=True)
class LocalNetwork:
    directory: Path
    clusters: tuple[str, ...]
    regions: tuple[str, ...] = ()  # each cluster's region, in the order of `clusters`

    def _flag(self, cluster: str) -> Path:
        if not valid_cluster_name(cluster):
            raise ValueError(f"Invalid cluster name {cluster!r}")
        return self.directory / f"outage-{cluster}"

    def set_outage(self, cluster: str, on: bool) -> None:
        if cluster not in self.clusters:
            raise KeyError(cluster)
        flag = self._flag(cluster)
        if on:
            flag.touch()
        else:
            flag.unlink(missing_ok=True)

    def is_out(self, cluster: str) -> bool:
        return cluster in self.clusters and self._flag(cluster).exists()

    def cluster_in(self, region: str) -> str | None:
        """The cluster whose region `region` is (None: no cluster of the instance's)."""
        return dict(zip(self.regions, self.clusters, strict=False)).get(region)

    def region_of(self, cluster: str) -> str | None:
        return dict(zip(self.clusters, self.regions, strict=False)).get(cluster)

    def reachable(self, source: str, region: str) -> bool:
        """Whether the runtime of cluster `source` reaches AWS in `region`: always its own region;
        another cluster's region only while neither cluster is off the network."""
        target = self.cluster_in(region)
        if target is None or target == source:
            return True
        return not (self.is_out(source) or self.is_out(target))

    def partition(self, source: str) -> Any:
        """A hook for every AWS client of cluster `source`'s process (`clients.add_client_hook`): a
        client of another cluster's region fails its requests with botocore's connection error
        while the network separates the two regions (the SDK retries it, as any connection error)."""

        def hook(client: Any) -> None:
            region = client.meta.region_name
            if self.cluster_in(region) in (None, source):
                return

            def cut(request: Any = None, **_: Any) -> None:
                if not self.reachable(source, region):
                    raise EndpointConnectionError(endpoint_url=getattr(request, "url", region))

            client.meta.events.register_first("before-send", cut)

        return hook

    def write_clusters(self) -> None:
        """The instance's cluster names and regions, for the cluster processes (`read`)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "clusters").write_text(
            "\n".join(f"{name} {region}".strip() for name, region in
                      zip(self.clusters, self.regions or ("",) * len(self.clusters), strict=True)))

    @classmethod
    def read(cls, directory: str | Path) -> LocalNetwork:
        path = Path(directory)
        lines = [line.split() for line in (path / "clusters").read_text().splitlines() if line.strip()]
        return cls(path, tuple(parts[0] for parts in lines),
                   tuple(parts[1] for parts in lines) if all(len(parts) > 1 for parts in lines) else ())
