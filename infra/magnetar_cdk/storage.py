"""The stateful resources: metadata table, segment bucket, journal stream and the token key secret.

Their logical ids are pinned (magnetar.config) and they live in the stack's own scope: the table and
the bucket are retained and would be replaced, with their data left behind, if their ids changed.
"""

from __future__ import annotations

from aws_cdk import CustomResource, Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from magnetar.config import JOURNAL_STREAM_ID, METADATA_TABLE_ID, SEGMENT_BUCKET_ID, TOKEN_KEYS_SECRET_ID

from .functions import execution_role
from .nag import acknowledge
from .settings import (
    ARCHITECTURE,
    JOURNAL_STREAM_CONSUMER_ID,
    JOURNAL_STREAM_CONSUMER_NAME,
    TOKEN_KEYS_GENERATOR_ID,
    TOKEN_KEYS_INITIAL_KEY_ID,
    pin_logical_id,
)

# The key generator (inline, no layer): on stack creation it replaces the secret's placeholder with
# `{"keys": [{"algorithm": "HS256", "key": <base64 of 32 random bytes>}]}`, the document
# magnetar.security.identity reads. Only on Create, and never over a document that already holds
# keys, so a rotation (docs/security.md) is never undone by a deploy. The key is never logged or
# returned to CloudFormation. It answers CloudFormation itself (no cfn-response module, no provider
# framework): one PUT to the pre-signed ResponseURL.
TOKEN_KEYS_GENERATOR_CODE = """\
import base64, json, secrets, urllib.request
import boto3


def _holds_keys(text):
    try:
        keys = json.loads(text).get("keys")
    except (ValueError, AttributeError):
        return False
    return isinstance(keys, list) and len(keys) > 0


def handler(event, context):
    status, reason = "SUCCESS", "ok"
    try:
        if event["RequestType"] == "Create":
            arn = event["ResourceProperties"]["SecretArn"]
            client = boto3.client("secretsmanager")
            if not _holds_keys(client.get_secret_value(SecretId=arn)["SecretString"]):
                key = base64.b64encode(secrets.token_bytes(32)).decode()
                document = {"keys": [{"algorithm": "HS256", "key": key}]}
                client.put_secret_value(SecretId=arn, SecretString=json.dumps(document))
    except Exception as exc:  # report the failure, never hang the stack
        status, reason = "FAILED", type(exc).__name__ + ": " + str(exc)[:300]
    print(json.dumps({"requestType": event.get("RequestType"), "status": status, "reason": reason}))
    body = json.dumps({
        "Status": status,
        "Reason": reason,
        "PhysicalResourceId": event.get("PhysicalResourceId") or "magnetar-token-keys-initial-key",
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
        "Data": {},
    }).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    urllib.request.urlopen(request, timeout=30).close()
"""


def metadata_table(scope: Construct) -> dynamodb.Table:
    """Topic, subscription and cursor metadata. Data the cluster cannot rebuild: RETAIN + PITR.

    Encrypted at rest with DynamoDB's default (AWS owned) key: DynamoDB always encrypts, and a
    KMS key would add a KMS request to the table's hottest path for no access-control gain
    (the table is reachable only through the roles the stack grants)."""
    table = dynamodb.Table(
        scope,
        METADATA_TABLE_ID,
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        time_to_live_attribute="expiresAt",
        encryption=dynamodb.TableEncryption.DEFAULT,
        removal_policy=RemovalPolicy.RETAIN,
    )
    pin_logical_id(table, METADATA_TABLE_ID)
    return table


def segment_bucket(scope: Construct) -> s3.Bucket:
    """Sealed ledger segments: the durable copy of every message once the journal is trimmed.

    SSE-S3, TLS only (a Deny on aws:SecureTransport=false), no public access. Not versioned:
    a segment is written once (If-None-Match) and only the maintenance run deletes it, when
    retention says nobody needs it; versioning would keep every trimmed segment (and bill it)
    until a lifecycle rule expired it, and would not protect the ledger's consistency anyway
    (the segment list lives in DynamoDB, which has point-in-time recovery)."""
    bucket = s3.Bucket(
        scope,
        SEGMENT_BUCKET_ID,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True,
        encryption=s3.BucketEncryption.S3_MANAGED,
        versioned=False,
        removal_policy=RemovalPolicy.RETAIN,
    )
    pin_logical_id(bucket, SEGMENT_BUCKET_ID)
    acknowledge(
        bucket,
        "AwsSolutions-S1",
        "Server access logs would write one log record per ranged segment read, i.e. per consumer "
        "receive, roughly doubling the S3 request bill the cost model counts; only the stack's own "
        "function roles can reach the bucket (no public access, TLS only). Enable CloudTrail S3 data "
        "events for the bucket when an object-level audit trail is required.",
    )
    return bucket


def journal_stream(scope: Construct) -> kinesis.Stream:
    """Write-ahead journal; 24 h is ample since the consumer seals records into S3 within seconds.

    On-demand by default (scales by itself); `-c journalShards=N` picks provisioned mode, which
    is what brings a steady workload under batched SQS's price (docs/cost-model.md).
    Encrypted at rest with the AWS managed key aws/kinesis."""
    shards = int(scope.node.try_get_context("journalShards") or 0)
    stream = kinesis.Stream(
        scope,
        JOURNAL_STREAM_ID,
        stream_mode=kinesis.StreamMode.PROVISIONED if shards else kinesis.StreamMode.ON_DEMAND,
        shard_count=shards or None,
        retention_period=Duration.hours(24),
        encryption=kinesis.StreamEncryption.MANAGED,
    )
    pin_logical_id(stream, JOURNAL_STREAM_ID)
    return stream


def journal_stream_consumer(scope: Construct, stream: kinesis.IStream) -> kinesis.CfnStreamConsumer:
    """The journal consumer's enhanced fan-out consumer (context journalFanOut, on by default).

    Its event-source mapping subscribes to each shard (SubscribeToShard: records pushed ~70 ms after
    the put, over a dedicated 2 MiB/s per shard) instead of polling GetRecords once a second within
    the 5 calls/s a shard allows all its readers together. Billed per consumer-shard hour and per GB
    read (docs/cost-model.md)."""
    consumer = kinesis.CfnStreamConsumer(
        scope,
        JOURNAL_STREAM_CONSUMER_ID,
        consumer_name=JOURNAL_STREAM_CONSUMER_NAME,
        stream_arn=stream.stream_arn,
    )
    consumer.override_logical_id(JOURNAL_STREAM_CONSUMER_ID)
    return consumer


def token_keys(scope: Construct, log_retention_days: int) -> tuple[secretsmanager.Secret, CustomResource]:
    """The token verification keys (Secrets Manager) and the custom resource writing the first key.

    CloudFormation's secret generator writes one random string at the top level of a JSON
    template, and the key document nests the key in a list (`{"keys": [{...}]}`), so the secret
    starts with a generated placeholder and a small custom resource replaces it, once, with a
    real key: 32 random bytes from the function's CSPRNG, base64, as `pulsar tokens
    create-secret-key` makes them. CloudFormation never sees the key (not in the template, not in
    the custom resource's response). The authorizer reading the keys must depend on the custom
    resource (returned second), so it never serves the placeholder.
    """
    secret = secretsmanager.Secret(
        scope,
        TOKEN_KEYS_SECRET_ID,
        description='Magnetar token verification keys: {"keys": [{"algorithm", "key"}]} '
        "(docs/security.md, Key rotation)",
        # encrypted with the AWS managed key aws/secretsmanager
    )
    pin_logical_id(secret, TOKEN_KEYS_SECRET_ID)
    acknowledge(
        secret,
        "AwsSolutions-SMG4",
        "Token keys are rotated by the documented add-then-drop procedure (docs/security.md, Key "
        "rotation): validators accept every key in the list, so tokens signed with the old key stay "
        "valid until they are re-issued. A Secrets Manager rotation function replacing the key would "
        "invalidate every issued token at once.",
    )

    role, log_group = execution_role(scope, TOKEN_KEYS_GENERATOR_ID, log_retention_days)
    generator = lambda_.Function(
        scope,
        TOKEN_KEYS_GENERATOR_ID,
        runtime=lambda_.Runtime.PYTHON_3_14,  # no layer: the newest Python (cdk-nag L1)
        architecture=ARCHITECTURE,
        code=lambda_.Code.from_inline(TOKEN_KEYS_GENERATOR_CODE),
        handler="index.handler",
        timeout=Duration.seconds(60),
        memory_size=256,
        role=role,
        log_group=log_group,
        description="Magnetar: writes the first token key into the key secret (stack creation only)",
    )
    pin_logical_id(generator, TOKEN_KEYS_GENERATOR_ID)
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue"],
            resources=[secret.secret_arn],
        )
    )
    initial_key = CustomResource(
        scope,
        TOKEN_KEYS_INITIAL_KEY_ID,
        service_token=generator.function_arn,
        resource_type="Custom::MagnetarTokenKey",
        properties={"SecretArn": secret.secret_arn},
    )
    pin_logical_id(initial_key, TOKEN_KEYS_INITIAL_KEY_ID)
    initial_key.node.add_dependency(role)  # the grant must exist before the function runs
    return secret, initial_key
