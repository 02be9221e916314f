"""The network between the clusters of a local instance, where an outage is staged.

A cluster taken off the network refuses connections on its HTTP, WebSocket and binary ports,
and replication to and from it fails as in a network partition: its own doors are closed
(`LocalCluster` watches its flag), and the other clusters refuse its replicators' requests
(they name their cluster in a header). The flags are files in a directory every cluster
process of the instance shares, so any cluster's port can take any cluster off or bring it back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from magnetar.core.clusters import valid_cluster_name


@dataclass(frozen=True)
class LocalNetwork:
    directory: Path
    clusters: tuple[str, ...]

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

    def write_clusters(self) -> None:
        """The instance's cluster names, for the cluster processes (`read`)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "clusters").write_text("\n".join(self.clusters))

    @classmethod
    def read(cls, directory: str | Path) -> LocalNetwork:
        path = Path(directory)
        return cls(path, tuple(n for n in (path / "clusters").read_text().split() if n))
