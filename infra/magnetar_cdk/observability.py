"""Log groups, API access logs, API Gateway's account logging role and the ledger's alarms."""

from __future__ import annotations

import json

from aws_cdk import ArnFormat, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct, IConstruct

from .nag import acknowledge, region_account
from .settings import (
    ALARM_TOPIC_ID,
    API_GATEWAY_ACCOUNT_ID,
    API_GATEWAY_LOGS_ROLE_ID,
    ITERATOR_AGE_ALARM_ID,
    LATE_AFTER_HOLE_ALARM_ID,
    METRICS_NAMESPACE,
    pin_logical_id,
)

# The journal consumer's metric (functions/journal_consumer: EphemeralMetrics in METRICS_NAMESPACE,
# dimension `service`): an entry whose record reached the sealer after its id had been declared a
# hole, i.e. an acknowledged message consumers will never see. It must never happen; one is an incident.
LATE_AFTER_HOLE_METRIC = "LateAfterHole"
JOURNAL_CONSUMER_SERVICE = "magnetar-journal-consumer"

# Access log lines (JSON). No query strings: a browser's WebSocket token travels in `?token=`.
HTTP_ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "httpMethod": "$context.httpMethod",
    "routeKey": "$context.routeKey",
    "path": "$context.path",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
    "latency": "$context.responseLatency",
    "integrationError": "$context.integrationErrorMessage",
    "authorizerError": "$context.authorizer.error",
    "role": "$context.authorizer.role",  # the token authorizer's answer
    "userArn": "$context.identity.userArn",  # the SigV4 caller (IAM API)
}
WEBSOCKET_ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "eventType": "$context.eventType",
    "routeKey": "$context.routeKey",
    "connectionId": "$context.connectionId",
    "status": "$context.status",
    "principalId": "$context.authorizer.principalId",
    "authorizerError": "$context.authorizer.error",
    "error": "$context.error.message",
    "integrationError": "$context.integration.error",
}


def log_group(scope: Construct, construct_id: str, retention_days: int) -> logs.LogGroup:
    """A log group with the stack's retention (kept when the stack is deleted)."""
    group = logs.LogGroup(scope, construct_id, removal_policy=RemovalPolicy.RETAIN)
    cfn_log_group = group.node.default_child
    assert isinstance(cfn_log_group, logs.CfnLogGroup)
    cfn_log_group.retention_in_days = retention_days
    # Encrypted at rest by CloudWatch Logs with its own keys. No KMS key: the logs hold topic
    # names, roles and outcomes, never message payloads or tokens, and a key would need a key
    # policy for the logs service and a KMS charge for little gain.
    return group


def access_logs(
    scope: Construct, stage: IConstruct, log_group_id: str, line: dict[str, str], retention_days: int
) -> None:
    """Send `stage`'s access log (one JSON `line` per request) to a new log group `log_group_id`."""
    group = log_group(scope, log_group_id, retention_days)
    cfn_stage = stage.node.default_child
    assert isinstance(cfn_stage, apigwv2.CfnStage)
    cfn_stage.access_log_settings = apigwv2.CfnStage.AccessLogSettingsProperty(
        destination_arn=group.log_group_arn, format=json.dumps(line, separators=(",", ":"))
    )


def api_gateway_cloudwatch_role(scope: Construct, websocket_stage: apigwv2.WebSocketStage) -> None:
    """The account's API Gateway logging role, which WebSocket (not HTTP) access logs require.

    It is a per-region account setting: `-c apiGatewayCloudWatchRole=false` leaves an existing
    one alone. The role is retained when the stack is deleted, as other APIs of the account may
    log through it."""
    role = iam.Role(
        scope,
        API_GATEWAY_LOGS_ROLE_ID,
        assumed_by=iam.ServicePrincipal("apigateway.amazonaws.com"),
        description="API Gateway (account setting): writes access logs to CloudWatch Logs",
    )
    role.apply_removal_policy(RemovalPolicy.RETAIN)
    log_groups = Stack.of(scope).format_arn(
        service="logs", resource="log-group", resource_name="*", arn_format=ArnFormat.COLON_RESOURCE_NAME
    )
    role.add_to_policy(
        iam.PolicyStatement(
            actions=[
                "logs:CreateLogGroup",
                "logs:CreateLogStream",
                "logs:DescribeLogGroups",
                "logs:DescribeLogStreams",
                "logs:PutLogEvents",
                "logs:GetLogEvents",
                "logs:FilterLogEvents",
            ],
            resources=[log_groups],
        )
    )
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:{region_account(scope)}:log-group:*]",
        "API Gateway's CloudWatch role is one per account and region and serves the logs of every "
        "API there (the same actions as the managed AmazonAPIGatewayPushToCloudWatchLogs, scoped to "
        "this account's and region's log groups instead of `*`).",
    )
    account = apigw.CfnAccount(scope, API_GATEWAY_ACCOUNT_ID, cloud_watch_role_arn=role.role_arn)
    account.override_logical_id(API_GATEWAY_ACCOUNT_ID)
    account.node.add_dependency(role)
    websocket_stage.node.add_dependency(account)  # logging needs the role set first


def alarms(
    scope: Construct,
    journal_consumer: lambda_.Function,
    iterator_age_threshold: Duration,
    alarm_topic: sns.ITopic | None,
) -> tuple[cloudwatch.Alarm, cloudwatch.Alarm]:
    """The two signals that the ledger is in trouble; `alarm_topic` (SNS, see `alarm_topic`) receives them."""
    iterator_age = cloudwatch.Alarm(
        scope,
        ITERATOR_AGE_ALARM_ID,
        alarm_description=(
            "A journal shard stopped sealing: the journal consumer's iterator age has been above the "
            "threshold for 3 minutes (a poison record is retried forever by design; unsealed entries "
            "are lost when they outlive the stream's 24 h retention)."
        ),
        metric=journal_consumer.metric(
            "IteratorAge", statistic=cloudwatch.Stats.MAXIMUM, period=Duration.minutes(1)
        ),
        threshold=iterator_age_threshold.to_milliseconds(),
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluation_periods=3,
        datapoints_to_alarm=3,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,  # no records, no metric
    )
    pin_logical_id(iterator_age, ITERATOR_AGE_ALARM_ID)
    late_after_hole = cloudwatch.Alarm(
        scope,
        LATE_AFTER_HOLE_ALARM_ID,
        alarm_description=(
            "An acknowledged entry reached the sealer after its id had been declared a hole "
            "(LateAfterHole): consumers will never see it. Investigate the writer's deadline."
        ),
        metric=cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=LATE_AFTER_HOLE_METRIC,
            dimensions_map={"service": JOURNAL_CONSUMER_SERVICE},
            statistic=cloudwatch.Stats.SUM,
            period=Duration.minutes(1),
        ),
        threshold=1,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluation_periods=1,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,  # emitted only when it happens
    )
    pin_logical_id(late_after_hole, LATE_AFTER_HOLE_ALARM_ID)
    notify(alarm_topic, iterator_age, late_after_hole)
    return iterator_age, late_after_hole


def alarm_topic(scope: Construct, alarm_topic_arn: str, create: bool) -> sns.ITopic | None:
    """The alarms' SNS topic: the operator's (`alarmTopicArn`), else with `create` a topic of the
    stack's own (output AlarmTopicArn, for subscriptions), else none."""
    if alarm_topic_arn:
        return sns.Topic.from_topic_arn(scope, ALARM_TOPIC_ID, alarm_topic_arn)
    if not create:
        return None
    topic = sns.Topic(scope, ALARM_TOPIC_ID, display_name="Magnetar alarms", enforce_ssl=True)
    pin_logical_id(topic, ALARM_TOPIC_ID)
    acknowledge(
        topic,
        "AwsSolutions-SNS2",
        "CloudWatch alarms publish to it, which the AWS managed key aws/sns does not allow (its key "
        "policy cannot grant cloudwatch.amazonaws.com); the notifications carry alarm names and states, "
        "no message data. Give -c alarmTopicArn=<an encrypted topic with a customer managed key> to use one.",
    )
    CfnOutput(scope, "AlarmTopicArn", value=topic.topic_arn,
              description="SNS topic of the stack's alarms: subscribe the operators to it")
    return topic


def notify(topic: sns.ITopic | None, *alarms: cloudwatch.Alarm) -> None:
    """`topic` receives the alarms' state changes (ALARM and back to OK)."""
    if topic is None:
        return
    action = cloudwatch_actions.SnsAction(topic)
    for alarm in alarms:
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
