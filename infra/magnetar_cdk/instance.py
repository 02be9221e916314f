"""A Pulsar instance across AWS regions: one MagnetarStack (one cluster) per region, sharing the
configuration store, a DynamoDB global table whose home replica is in the first region.

What a stack of an instance adds to the single-cluster stack (magnetar_stack.py composes it):

- the configuration table (home stack only): `TableV2` named `magnetar-config-<instance>`, a
  replica in every other region; every stack's functions get MAGNETAR_CONFIG_TABLE and
  MAGNETAR_CONFIG_REGION (the home region) and read/write it at the home replica and at their own
  region's replica (ARNs built from the name: CDK tokens do not cross regions);
- the journal consumer's role, named `magnetar-<instance>-<cluster>-replicator` so that every
  other cluster can list it in its MAGNETAR_SUPERUSER_ROLES and grant it nothing more, and allowed
  `execute-api:Invoke` on the other regions' IAM-authorized produce route (`POST /topics/*` of the
  `$default` stage);
- the cluster's registration in the configuration store (`pk=CLUSTERS`, `sk=<cluster>`, `data`:
  ClusterData JSON, see `cluster_data`) and its name in tenant `public`'s allowedClusters;
- alarms on the journal consumer's replication metrics per remote cluster.

Context (app.py): `-c regions=us-east-1,eu-west-1 [-c clusterNames=east,west] [-c instanceName=NAME]`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aws_cdk import Aws, Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from magnetar.config import DEFAULT_TENANT

from .nag import acknowledge
from .observability import JOURNAL_CONSUMER_SERVICE
from .settings import METRICS_NAMESPACE, pin_logical_id

DEFAULT_INSTANCE_NAME = "default"
CONFIG_TABLE_ID = "ConfigTable"  # pinned logical id of the global table (home stack)
CLUSTERS_PK = "CLUSTERS"  # the configuration store's partition of ClusterData items
AUTHENTICATION_PLUGIN = "aws-iam"  # ClusterData.authenticationPlugin: SigV4 for execute-api
# The routes a remote cluster's replicators call, on the IAM API's `$default` stage: Pulsar's REST
# producer (routes/producers.py; the path after `topics/` is the topic's domain, tenant, namespace,
# name) and a replicated subscription's acknowledgements (routes/replication.py).
REPLICATION_ROUTE = "$default/POST/topics/*"
REPLICATED_SUBSCRIPTIONS_ROUTE = "$default/POST/magnetar/v1/replicated-subscriptions/*"
REPLICATION_ROUTES = (REPLICATION_ROUTE, REPLICATED_SUBSCRIPTIONS_ROUTE)
# The journal consumer's replication metrics (Powertools Metrics, EMF, namespace Magnetar): per
# remote cluster (dimension RemoteCluster, beside Powertools' own `service` dimension).
REPLICATION_BACKLOG_METRIC = "ReplicationBacklog"  # messages not yet appended at the remote cluster
REPLICATION_DELAY_METRIC = "ReplicationDelay"  # ms from the local append to the remote append
REMOTE_CLUSTER_DIMENSION = "RemoteCluster"
DEFAULT_REPLICATION_BACKLOG_ALARM = 10_000  # messages
DEFAULT_REPLICATION_DELAY_ALARM_S = 60
REPLICATION_ALARM_MINUTES = 5  # the threshold must be crossed for this many consecutive minutes
# DynamoDB's data-plane actions the configuration store's client makes (dynamodb/base.py, catalog.py,
# schemas.py; TransactWriteItems is authorized per item as PutItem, UpdateItem, DeleteItem and
# ConditionCheckItem).
CONFIG_TABLE_ACTIONS = (
    "dynamodb:BatchGetItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:DeleteItem",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:Query",
    "dynamodb:UpdateItem",
)
MAX_ROLE_NAME = 64  # IAM's limit


@dataclass(frozen=True)
class Instance:
    """The instance a stack belongs to: every cluster's region and name, in order (the first region
    is home: its stack holds the global table and deploys first)."""

    regions: tuple[str, ...]
    cluster_names: tuple[str, ...] = ()  # default: the regions
    name: str = DEFAULT_INSTANCE_NAME
    # A remote cluster's IamHttpApi id, once known (`-c remoteApiIds=west=abc123`): its Invoke
    # statement names that API instead of any API of the region (see grant_replication).
    remote_api_ids: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.regions:
            raise ValueError("an instance needs at least one region")
        if not self.cluster_names:
            object.__setattr__(self, "cluster_names", tuple(self.regions))
        if len(self.cluster_names) != len(self.regions):
            raise ValueError(f"{len(self.regions)} regions but {len(self.cluster_names)} cluster names")
        for what, values in (("region", self.regions), ("cluster name", self.cluster_names)):
            if len(set(values)) != len(values):
                raise ValueError(f"each {what} of an instance must be unique: {list(values)}")
        for cluster in self.cluster_names:
            for name in (self.replicator_role_name(cluster), self.maintenance_role_name(cluster)):
                if len(name) > MAX_ROLE_NAME:
                    raise ValueError(f"role name {name!r} is over {MAX_ROLE_NAME} "
                                     "characters: shorten the instance or cluster name")

    @classmethod
    def parse(cls, regions: str, cluster_names: str = "", name: str = "", remote_api_ids: str = "") -> Instance:
        """From the context's comma-separated lists (`remote_api_ids`: `cluster=apiId,...`)."""
        ids = dict(pair.split("=", 1) for pair in _items(remote_api_ids))
        return cls(tuple(_items(regions)), tuple(_items(cluster_names)), name or DEFAULT_INSTANCE_NAME, ids)

    @property
    def home_region(self) -> str:
        return self.regions[0]

    @property
    def config_table_name(self) -> str:
        return f"magnetar-config-{self.name}"

    def cluster_of(self, region: str) -> str:
        return self.cluster_names[self.regions.index(region)]

    def remotes(self, region: str) -> list[tuple[str, str]]:
        """(cluster, region) of every other cluster of the instance."""
        return [(c, r) for c, r in zip(self.cluster_names, self.regions, strict=True) if r != region]

    def replicator_role_name(self, cluster: str) -> str:
        """The journal consumer's role of `cluster`, named so other clusters can name it too."""
        return f"magnetar-{self.name}-{cluster}-replicator"

    def maintenance_role_name(self, cluster: str) -> str:
        """The maintenance function's role of `cluster`: it sends what a replicator left behind and
        replicated subscriptions' acknowledgements, so other clusters name it too."""
        return f"magnetar-{self.name}-{cluster}-maintenance"

    def replicator_role_arn(self, cluster: str) -> str:
        return f"arn:{Aws.PARTITION}:iam::{Aws.ACCOUNT_ID}:role/{self.replicator_role_name(cluster)}"

    def replication_role_arns(self, cluster: str) -> list[str]:
        """The roles of `cluster` that call the other clusters: its journal consumer and its maintenance."""
        return [self.replicator_role_arn(cluster),
                f"arn:{Aws.PARTITION}:iam::{Aws.ACCOUNT_ID}:role/{self.maintenance_role_name(cluster)}"]

    def config_table_arn(self, region: str) -> str:
        return f"arn:{Aws.PARTITION}:dynamodb:{region}:{Aws.ACCOUNT_ID}:table/{self.config_table_name}"


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def config_table(scope: Construct, instance: Instance) -> dynamodb.TableV2:
    """The configuration store: a global table, home replica here, one replica per other region.

    As the metadata table: on-demand, point-in-time recovery (every replica), DynamoDB's default
    encryption, retained, and deletion protection besides (the whole instance's configuration)."""
    table = dynamodb.TableV2(
        scope,
        CONFIG_TABLE_ID,
        table_name=instance.config_table_name,
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
        billing=dynamodb.Billing.on_demand(),
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        deletion_protection=True,
        removal_policy=RemovalPolicy.RETAIN,
        replicas=[dynamodb.ReplicaTableProps(region=r) for r in instance.regions[1:]],
    )
    pin_logical_id(table, CONFIG_TABLE_ID)
    return table


def grant_config(grantee: iam.IGrantable, instance: Instance, region: str) -> None:
    """Read/write on the configuration table at its home replica (every call goes there) and at
    this region's replica (the fallback copy), by ARN: the table's own ARN is a token of the home stack."""
    arns = dict.fromkeys([instance.config_table_arn(instance.home_region), instance.config_table_arn(region)])
    iam.Grant.add_to_principal(grantee=grantee, actions=list(CONFIG_TABLE_ACTIONS), resource_arns=list(arns))


def remote_route_arn(instance: Instance, cluster: str, region: str, route: str = REPLICATION_ROUTE) -> str:
    """execute-api:Invoke's resource for one of `cluster`'s replication routes. The API id is API
    Gateway's (random, assigned at creation, in another region's stack): `*` unless `remote_api_ids` names it."""
    api_id = instance.remote_api_ids.get(cluster, "*")
    return f"arn:{Aws.PARTITION}:execute-api:{region}:{Aws.ACCOUNT_ID}:{api_id}/{route}"


def grant_replication(callers: list[lambda_.Function], instance: Instance, region: str) -> None:
    """The journal consumer and the maintenance function may call the replication routes,
    SigV4-signed with their roles, of every other cluster's IamHttpApi."""
    remotes = instance.remotes(region)
    if not remotes:
        return
    arns = [remote_route_arn(instance, cluster, r, route) for cluster, r in remotes for route in REPLICATION_ROUTES]
    for caller in callers:
        caller.add_to_role_policy(iam.PolicyStatement(actions=["execute-api:Invoke"], resources=arns))
        assert caller.role is not None
        for cluster, r in remotes:
            api_id = instance.remote_api_ids.get(cluster, "*")
            for route in REPLICATION_ROUTES:
                acknowledge(
                    caller.role,
                    f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:{r}:<AWS::AccountId>:{api_id}/"
                    f"{route}]",
                    f"Replication to cluster {cluster}: Pulsar's produce route (POST /topics/<domain>/<tenant>/"
                    "<namespace>/<topic>) and replicated subscriptions' acknowledgements (POST /magnetar/v1/"
                    "replicated-subscriptions/...), topics created at run time, on the $default stage of the IAM "
                    f"API in {r}. That API's id is assigned by API Gateway in another region's stack, which CDK "
                    "cannot reference; unless remoteApiIds pins it, any API of that account and region is matched "
                    "on these routes only, and the remote broker grants nothing but to the roles it lists as "
                    "superusers.",
                )


def superuser_roles(instance: Instance, region: str, roles: str) -> str:
    """`roles` (MAGNETAR_SUPERUSER_ROLES) plus every other cluster's replicating roles' ARNs."""
    remote = [arn for cluster, _ in instance.remotes(region) for arn in instance.replication_role_arns(cluster)]
    return ",".join([r for r in (roles.split(",") if roles else []) if r] + remote)


def cluster_data(scope: Construct, iam_service_url: str, broker_service_url: str | None) -> str:
    """The cluster's ClusterData (JSON), as Pulsar's admin API has it (`/admin/v2/clusters/<name>`).

    `serviceUrl` is the IAM-authorized HTTP API (the token API would need a token the replicator
    does not hold); `authenticationPlugin: aws-iam` tells the replicator to sign with SigV4 for
    `execute-api` in the region of the URL's host. `brokerServiceUrl`, or `brokerServiceUrlTls` when it
    is `pulsar+ssl://` (the load balancer terminating TLS): the binary protocol proxy's URL when the
    stack has one, which the HTTP lookup (`/lookup/v2/topic/...`) answers clients with."""
    data: dict[str, str] = {"serviceUrl": iam_service_url}
    if broker_service_url:
        tls = broker_service_url.startswith("pulsar+ssl://")
        data["brokerServiceUrlTls" if tls else "brokerServiceUrl"] = broker_service_url
    data["authenticationPlugin"] = AUTHENTICATION_PLUGIN
    return Stack.of(scope).to_json_string(data)


def register_cluster(
    bootstrap: Construct,
    instance: Instance,
    cluster: str,
    data: str,
    provider_role: iam.IRole,
    provider_logs: logs.ILogGroup,
) -> list[cr.AwsCustomResource]:
    """Write this cluster's ClusterData into the configuration store (every deploy: the URLs may
    change) and add it to tenant `public`'s allowedClusters once (the condition makes it idempotent,
    a second deploy or a user's own change keeps the list as it is)."""
    home = instance.home_region
    table = instance.config_table_name
    policy = cr.AwsCustomResourcePolicy.from_sdk_calls(resources=[instance.config_table_arn(home)])
    put_cluster = _put_cluster(table, home, cluster, data)
    allow_cluster = cr.AwsSdkCall(
        service="DynamoDB",
        action="updateItem",
        region=home,
        parameters={
            "TableName": table,
            "Key": {"pk": {"S": "TENANTS"}, "sk": {"S": DEFAULT_TENANT}},
            "UpdateExpression": "SET allowedClusters = list_append(if_not_exists(allowedClusters, :none), :c), "
            "adminRoles = if_not_exists(adminRoles, :none)",
            "ConditionExpression": "NOT contains(allowedClusters, :name)",
            "ExpressionAttributeValues": {
                ":c": {"L": [{"S": cluster}]},
                ":name": {"S": cluster},
                ":none": {"L": []},
            },
        },
        physical_resource_id=cr.PhysicalResourceId.of(f"magnetar-allowed-cluster:{DEFAULT_TENANT}/{cluster}"),
        # Already in the list (a previous deploy, or the user put it there): nothing to do.
        ignore_error_codes_matching="ConditionalCheckFailedException",
    )
    return [_on_every_deploy(bootstrap, construct_id, call, policy, provider_role, provider_logs)
            for construct_id, call in (("Cluster", put_cluster), ("AllowedCluster", allow_cluster))]


def record_cluster(
    bootstrap: Construct,
    table: dynamodb.ITable,
    cluster: str,
    data: str,
    provider_role: iam.IRole,
    provider_logs: logs.ILogGroup,
) -> cr.AwsCustomResource:
    """Write a single cluster's ClusterData into its own table (every deploy), as an instance's
    clusters write theirs into the configuration store: what the HTTP lookup answers."""
    put_cluster = _put_cluster(table.table_name, Stack.of(bootstrap).region, cluster, data)
    policy = cr.AwsCustomResourcePolicy.from_sdk_calls(resources=[table.table_arn])
    return _on_every_deploy(bootstrap, "Cluster", put_cluster, policy, provider_role, provider_logs)


def _on_every_deploy(scope: Construct, construct_id: str, call: cr.AwsSdkCall, policy: cr.AwsCustomResourcePolicy,
                     provider_role: iam.IRole, provider_logs: logs.ILogGroup) -> cr.AwsCustomResource:
    """A custom resource making `call` on every deploy (create and update)."""
    return cr.AwsCustomResource(scope, construct_id, on_create=call, on_update=call, policy=policy, role=provider_role,
                                log_group=provider_logs, install_latest_aws_sdk=False)


def _put_cluster(table: str, region: str, cluster: str, data: str) -> cr.AwsSdkCall:
    return cr.AwsSdkCall(
        service="DynamoDB",
        action="putItem",
        region=region,
        parameters={
            "TableName": table,
            "Item": {"pk": {"S": CLUSTERS_PK}, "sk": {"S": cluster}, "data": {"S": data}},
        },
        physical_resource_id=cr.PhysicalResourceId.of(f"magnetar-cluster:{cluster}"),
    )


def replication_alarms(
    scope: Construct,
    instance: Instance,
    region: str,
    backlog_threshold: int,
    delay_threshold: Duration,
) -> list[cloudwatch.Alarm]:
    """Per remote cluster: its replication backlog and its replication delay above the thresholds
    for REPLICATION_ALARM_MINUTES minutes (no data, no replication traffic: not breaching; a stopped
    journal consumer is the iterator-age alarm's)."""
    alarms = []
    for cluster, _ in instance.remotes(region):
        dimensions = {"service": JOURNAL_CONSUMER_SERVICE, REMOTE_CLUSTER_DIMENSION: cluster}
        for metric_name, threshold, what in (
            (REPLICATION_BACKLOG_METRIC, backlog_threshold, f"over {backlog_threshold} messages"),
            (REPLICATION_DELAY_METRIC, delay_threshold.to_milliseconds(),
             f"over {delay_threshold.to_seconds()} s"),
        ):
            alarm = cloudwatch.Alarm(
                scope,
                f"{metric_name}Alarm-{cluster}",
                alarm_description=(
                    f"Replication to cluster {cluster} is behind: {metric_name} {what} for "
                    f"{REPLICATION_ALARM_MINUTES} minutes (the remote cluster's IamHttpApi refuses or is "
                    "unreachable, or the journal consumer cannot keep up)."
                ),
                metric=cloudwatch.Metric(
                    namespace=METRICS_NAMESPACE,
                    metric_name=metric_name,
                    dimensions_map=dimensions,
                    statistic=cloudwatch.Stats.MAXIMUM,
                    period=Duration.minutes(1),
                ),
                threshold=threshold,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=REPLICATION_ALARM_MINUTES,
                datapoints_to_alarm=REPLICATION_ALARM_MINUTES,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            alarms.append(alarm)
    return alarms
