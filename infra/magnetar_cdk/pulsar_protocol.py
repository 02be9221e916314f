"""Pulsar's binary protocol on AWS (optional): the stateless proxy (magnetar.protocol) on ECS Fargate.

Lambda cannot hold the official clients' TCP connections, so the proxy runs as Fargate tasks (ARM64)
behind a Network Load Balancer: a TLS listener on 6651 (`pulsar+ssl://<nlb>:6651`, the certificate
from the `pulsar_protocol_certificate_arn` prop or `-c pulsarProtocolCertificateArn=...`) in front of
the tasks' plain port 6650; without a certificate the listener is plain TCP on 6650 (a warning says
so). The tasks scale on CPU and on connections per task (the NLB's active flows over the running
tasks). Their role has the broker function's permissions (the same table, segment, journal and
WebSocket-connection grants) plus reading the token keys: with no API Gateway authorizer in front,
the proxy authenticates CONNECT itself. The image is built from infra/pulsar_protocol/Dockerfile
with the repository as its context; synthesis only fingerprints that context (nothing is built
before `cdk deploy`), so it works offline.

Off by default: `MagnetarStack(pulsar_protocol=True)` or `cdk synth|deploy -c pulsarProtocol=true`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_cdk import Annotations, CfnOutput, Duration, IgnoreMode, Stack
from aws_cdk import aws_applicationautoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from constructs import Construct

from magnetar.config import SEGMENT_BUCKET_ID, WEBSOCKET_API_ID
from magnetar_cdk.nag import acknowledge, acknowledge_all, region_account
from magnetar_cdk.observability import log_group
from magnetar_cdk.settings import REPO_ROOT, WEBSOCKET_STAGE_NAME, context_flag

if TYPE_CHECKING:
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_kinesis as kinesis
    from aws_cdk import aws_s3 as s3
    from aws_cdk import aws_secretsmanager as secretsmanager
    from aws_cdk.aws_apigatewayv2 import IWebSocketApi

PULSAR_PROTOCOL_ID = "PulsarProtocol"
PLAIN_PORT = 6650
TLS_PORT = 6651
DOCKERFILE = "infra/pulsar_protocol/Dockerfile"
# The image's context is the repository, but only what the Dockerfile copies (and the Dockerfile)
# is fingerprinted and staged: everything else is excluded before it is walked (.venv, node_modules).
IMAGE_EXCLUDES = [
    "*", ".*", "!pyproject.toml", "!README.md", "!src", "!src/**", "!infra", "!infra/pulsar_protocol",
    "!infra/pulsar_protocol/**", "**/__pycache__", "**/*.pyc", "**/*.egg-info",
]


@dataclass(frozen=True)
class PulsarProtocolSettings:
    """The proxy's service: its certificate (None: a plain TCP listener) and its scaling."""

    certificate_arn: str | None = None
    min_tasks: int = 2  # two zones: a task (or a zone) lost leaves clients somewhere to reconnect
    max_tasks: int = 10
    cpu: int = 1024  # 1 vCPU
    memory_mib: int = 2048
    target_cpu_percent: int = 60
    connections_per_task: int = 1000  # scale out above this many connections per task, in below a third


def resolve(scope: Construct, enabled: bool | None, certificate_arn: str | None) -> PulsarProtocolSettings | None:
    """The settings when the proxy is wanted (argument, else context `pulsarProtocol`), else None."""
    if enabled is None:
        enabled = context_flag(scope.node.try_get_context("pulsarProtocol") or "false")
    if not enabled:
        return None
    return PulsarProtocolSettings(certificate_arn or scope.node.try_get_context("pulsarProtocolCertificateArn"))


class PulsarProtocolProxy(Construct):
    """The VPC, the Fargate service running the proxy, the load balancer and the scaling."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: PulsarProtocolSettings,
                 environment: dict[str, str], table: dynamodb.ITable, bucket: s3.IBucket, stream: kinesis.IStream,
                 websocket_api: IWebSocketApi, token_keys: secretsmanager.ISecret, log_retention_days: int) -> None:
        super().__init__(scope, construct_id)
        self.vpc = ec2.Vpc(self, "Vpc", max_azs=2, nat_gateways=1, subnet_configuration=[
            ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
            ec2.SubnetConfiguration(name="tasks", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=22),
        ])
        # DynamoDB and S3 without the NAT gateway (their traffic is most of the proxy's)
        self.vpc.add_gateway_endpoint("DynamoDb", service=ec2.GatewayVpcEndpointAwsService.DYNAMODB)
        self.vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3)
        self.vpc.add_flow_log("FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(
            log_group(self, "FlowLogs", log_retention_days)))
        self.cluster = ecs.Cluster(self, "Cluster", vpc=self.vpc,
                                   container_insights_v2=ecs.ContainerInsights.ENABLED)

        self.task = ecs.FargateTaskDefinition(
            self, "Task", cpu=settings.cpu, memory_limit_mib=settings.memory_mib,
            runtime_platform=ecs.RuntimePlatform(cpu_architecture=ecs.CpuArchitecture.ARM64,
                                                 operating_system_family=ecs.OperatingSystemFamily.LINUX))
        image = ecs.ContainerImage.from_asset(
            str(REPO_ROOT), file=DOCKERFILE, platform=ecr_assets.Platform.LINUX_ARM64,
            exclude=IMAGE_EXCLUDES, ignore_mode=IgnoreMode.GLOB)
        self.container = self.task.add_container(
            "Proxy", image=image, environment={**environment, "POWERTOOLS_SERVICE_NAME": "magnetar-pulsar-proxy"},
            port_mappings=[ecs.PortMapping(container_port=PLAIN_PORT, protocol=ecs.Protocol.TCP)],
            logging=ecs.LogDrivers.aws_logs(stream_prefix="pulsar-proxy",
                                            log_group=log_group(self, "Logs", log_retention_days)),
            stop_timeout=Duration.seconds(30))
        self._grant_broker_access(table, bucket, stream, websocket_api)
        token_keys.grant_read(self.task.task_role)  # CONNECT's tokens are checked here, not by an authorizer

        self.security_group = ec2.SecurityGroup(self, "TasksSecurityGroup", vpc=self.vpc,
                                                description="Pulsar protocol proxy tasks: 6650 from the VPC")
        self.security_group.add_ingress_rule(ec2.Peer.ipv4(self.vpc.vpc_cidr_block), ec2.Port.tcp(PLAIN_PORT),
                                             "the load balancer (in the VPC's public subnets)")
        self.service = ecs.FargateService(
            self, "Service", cluster=self.cluster, task_definition=self.task, desired_count=settings.min_tasks,
            min_healthy_percent=100, max_healthy_percent=200, security_groups=[self.security_group],
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True))

        self.load_balancer = elbv2.NetworkLoadBalancer(self, "LoadBalancer", vpc=self.vpc, internet_facing=True,
                                                       cross_zone_enabled=True)
        if settings.certificate_arn:
            listener = self.load_balancer.add_listener(
                "Tls", port=TLS_PORT, protocol=elbv2.Protocol.TLS, ssl_policy=elbv2.SslPolicy.RECOMMENDED_TLS,
                certificates=[elbv2.ListenerCertificate.from_arn(settings.certificate_arn)])
            scheme, port = "pulsar+ssl", TLS_PORT
        else:
            listener = self.load_balancer.add_listener("Plain", port=PLAIN_PORT, protocol=elbv2.Protocol.TCP)
            scheme, port = "pulsar", PLAIN_PORT
            Annotations.of(self).add_warning_v2(
                "magnetar:pulsarProtocolPlaintext",
                "Pulsar protocol proxy without a certificate: plain TCP on 6650. For TLS on 6651 give "
                "pulsar_protocol_certificate_arn or -c pulsarProtocolCertificateArn=arn:aws:acm:...")
        self.target_group = listener.add_targets(
            "Tasks", port=PLAIN_PORT, protocol=elbv2.Protocol.TCP,
            targets=[self.service.load_balancer_target(container_name="Proxy", container_port=PLAIN_PORT)],
            deregistration_delay=Duration.seconds(30),
            health_check=elbv2.HealthCheck(protocol=elbv2.Protocol.TCP, interval=Duration.seconds(10),
                                           healthy_threshold_count=2, unhealthy_threshold_count=2))
        self._scaling(settings)
        self.service_url = f"{scheme}://{self.load_balancer.load_balancer_dns_name}:{port}"
        CfnOutput(scope, "PulsarServiceUrl", value=self.service_url,
                  description="Pulsar's binary protocol (the official clients' service URL)")
        self._acknowledge()

    def _grant_broker_access(self, table: dynamodb.ITable, bucket: s3.IBucket, stream: kinesis.IStream,
                             websocket_api: IWebSocketApi) -> None:
        """What functions.grant_broker_access grants the broker function, on the task role
        (tests/infra compares the two)."""
        role = self.task.task_role
        table.grant_read_write_data(role)
        role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject"],
                                                         resources=[bucket.arn_for_objects("*")]))
        role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn]))
        stream.grant_read_write(role)
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=["execute-api:ManageConnections"],
            resources=[Stack.of(self).format_arn(service="execute-api", resource=websocket_api.api_id,
                                                 resource_name=f"{WEBSOCKET_STAGE_NAME}/*/@connections/*")]))

    def _scaling(self, settings: PulsarProtocolSettings) -> None:
        scaling = self.service.auto_scale_task_count(min_capacity=settings.min_tasks,
                                                     max_capacity=settings.max_tasks)
        scaling.scale_on_cpu_utilization("Cpu", target_utilization_percent=settings.target_cpu_percent,
                                         scale_in_cooldown=Duration.minutes(5), scale_out_cooldown=Duration.minutes(1))
        # connections per task: the load balancer's active flows over the service's running tasks
        per_task = cloudwatch.MathExpression(
            expression="flows / MAX([tasks, 1])", period=Duration.minutes(1), label="connections per task",
            using_metrics={
                "flows": self.load_balancer.metrics.active_flow_count(statistic="Average",
                                                                      period=Duration.minutes(1)),
                "tasks": cloudwatch.Metric(namespace="ECS/ContainerInsights", metric_name="RunningTaskCount",
                                           dimensions_map={"ClusterName": self.cluster.cluster_name,
                                                           "ServiceName": self.service.service_name},
                                           statistic="Average", period=Duration.minutes(1)),
            })
        self.connections_metric = per_task
        scaling.scale_on_metric("Connections", metric=per_task, adjustment_type=autoscaling.AdjustmentType.CHANGE_IN_CAPACITY,
                                cooldown=Duration.minutes(2), scaling_steps=[
                                    {"upper": settings.connections_per_task / 3, "change": -1},
                                    {"lower": settings.connections_per_task, "change": +1},
                                    {"lower": settings.connections_per_task * 2, "change": +3}])

    def _acknowledge(self) -> None:
        acknowledge(self.task, "AwsSolutions-ECS2",
                    "The environment holds the names of the stack's resources and settings, no secret "
                    "(token keys are read from Secrets Manager at run time).")
        acknowledge(self.load_balancer, "AwsSolutions-ELB2",
                    "The proxy logs connections itself (CloudWatch Logs); NLB access logs cover TLS "
                    "listeners only and would need a log bucket of their own.")
        acknowledge_all(self.task.task_role, (
            (f"AwsSolutions-IAM5[Resource::<{SEGMENT_BUCKET_ID}.Arn>/*]",
             "The broker function's grant: segment objects of the one segment bucket, whose keys name topics "
             "and ledgers created at run time."),
            (f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:{region_account(self)}:"
             f"<{WEBSOCKET_API_ID}>/{WEBSOCKET_STAGE_NAME}/*/@connections/*]",
             "The broker function's grant: connections of this WebSocket API's stage only (non-persistent "
             "topics' publishes are pushed to them)."),
        ))
        acknowledge(self.task.obtain_execution_role(), "AwsSolutions-IAM5[Resource::*]",
                    "ecr:GetAuthorizationToken, which ECS needs to pull the image, has no resource to scope to.")
        acknowledge(self.security_group, "AwsSolutions-EC23",
                    "Ingress is the VPC's own CIDR on 6650 only (the load balancer's nodes); cdk-nag cannot "
                    "evaluate the CIDR token.")


def add_if_enabled(stack: Any, enabled: bool | None, certificate_arn: str | None,
                   environment: dict[str, str]) -> PulsarProtocolProxy | None:
    """The stack's hook: the proxy when wanted, on the stack's resources (MagnetarStack)."""
    settings = resolve(stack, enabled, certificate_arn)
    if settings is None:
        return None
    return PulsarProtocolProxy(stack, PULSAR_PROTOCOL_ID, settings=settings, environment=environment,
                               table=stack.table, bucket=stack.bucket, stream=stack.stream,
                               websocket_api=stack.websocket_api, token_keys=stack.token_keys,
                               log_retention_days=stack.log_retention_days)
