"""A local instance's network: a cluster off it is cut from the other clusters' regions, and
their AWS clients for its region fail as botocore fails on a partition."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError

from magnetar.local.network import LocalNetwork


def _network(tmp_path: Path) -> LocalNetwork:
    network = LocalNetwork(tmp_path, ("east", "west", "south"), ("us-east-1", "eu-west-1", "us-west-2"))
    network.write_clusters()
    return LocalNetwork.read(tmp_path)  # as a cluster process reads it


def test_a_cluster_off_the_network_is_cut_from_the_other_regions_both_ways(tmp_path: Path) -> None:
    network = _network(tmp_path)
    assert network.region_of("west") == "eu-west-1" and network.cluster_in("us-east-1") == "east"
    assert network.reachable("west", "us-east-1")
    network.set_outage("east", True)
    assert not network.reachable("west", "us-east-1")  # the home region, from west
    assert not network.reachable("east", "eu-west-1")  # and the other way
    assert network.reachable("east", "us-east-1")  # its own region: always
    assert network.reachable("west", "us-west-2")  # two regions both on the network
    network.set_outage("east", False)
    assert network.reachable("west", "us-east-1")


class _Body:
    def stream(self, **_: object) -> Iterator[bytes]:
        yield b"{}"


def _answered(request: AWSPreparedRequest, **_: object) -> AWSResponse:
    """DynamoDB's answer to a GetItem that found nothing (the request was sent)."""
    return AWSResponse(request.url, 200, {"x-amzn-requestid": "r"}, _Body())


def test_a_client_of_a_cut_off_region_gets_botocores_connection_error(tmp_path: Path) -> None:
    network = _network(tmp_path)
    home = boto3.session.Session().client(  # type: ignore[call-overload]
        "dynamodb", region_name="us-east-1", endpoint_url="http://127.0.0.1:9", aws_access_key_id="t",
        aws_secret_access_key="t", config=Config(retries={"max_attempts": 1}))
    network.partition("west")(home)
    home.meta.events.register("before-send", _answered)
    assert "Item" not in home.get_item(TableName="t", Key={"pk": {"S": "a"}})  # on the network: sent
    network.set_outage("east", True)
    with pytest.raises(EndpointConnectionError):
        home.get_item(TableName="t", Key={"pk": {"S": "a"}})
    network.set_outage("east", False)
    assert "Item" not in home.get_item(TableName="t", Key={"pk": {"S": "a"}})


def test_a_client_of_its_own_region_is_never_cut(tmp_path: Path) -> None:
    network = _network(tmp_path)
    own = boto3.session.Session().client(  # type: ignore[call-overload]
        "dynamodb", region_name="eu-west-1", endpoint_url="http://127.0.0.1:9", aws_access_key_id="t",
        aws_secret_access_key="t", config=Config(retries={"max_attempts": 1}))
    network.partition("west")(own)
    own.meta.events.register("before-send", _answered)
    network.set_outage("west", True)
    assert "Item" not in own.get_item(TableName="t", Key={"pk": {"S": "a"}})


def test_listening_ports_come_from_below_the_ephemeral_range_and_are_not_handed_out_twice() -> None:
    """The kernel gives outgoing connections ports of 32768-60999: a listener's port picked there
    could be taken by one of them before the listener binds it."""
    import socket

    from magnetar.local.cluster import free_port, free_run

    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == 300 and all(15_000 <= p < 32_768 for p in ports)
    base = free_run(3)
    assert not {base, base + 1, base + 2} & set(ports)
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[-1]))  # free to listen on
