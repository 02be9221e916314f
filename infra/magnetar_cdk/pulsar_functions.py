"""Pulsar Functions on AWS: the dispatcher, and what the broker creates registered functions'
Lambda functions with (magnetar.adapters.aws.function_deployer).

- The dispatcher (functions/function_dispatcher): the journal consumer and the maintenance
  function start it asynchronously (`lambda:InvokeFunction` on it, its name in their environment);
  it reads the inputs and stores the outputs as the broker does, and invokes the registered
  functions' Lambda functions (`<prefix>*`) and itself (the maintenance run's backlog sweep).
- The functions' runtime package (functions/function_runtime as an S3 asset), the one execution
  role all registered functions' Lambda functions share (`FunctionRuntimeRole`: the functions' code
  objects, the schemas, the functions' state, their log group, nothing else) and their log group.
- The broker's grants to manage those Lambda functions: create, update, delete and size them (names
  under the prefix only), pass them that role (to Lambda only), use the layer and read the package.

Every Lambda function the broker creates is named `<prefix><fqfn>-<hash>`; the prefix is the stack's
name, so stacks of one account and region never manage each other's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets

from magnetar.config import (
    ENV_FUNCTION_CODE,
    ENV_FUNCTION_DISPATCHER,
    ENV_FUNCTION_LAYERS,
    ENV_FUNCTION_LOG_GROUP,
    ENV_FUNCTION_PREFIX,
    ENV_FUNCTION_ROLE,
    FUNCTION_DISPATCHER_FUNCTION_ID,
    FUNCTION_DISPATCHER_TIMEOUT_S,
    SEGMENT_BUCKET_ID,
)

from .nag import acknowledge, region_account
from .observability import log_group
from .settings import ASSET_EXCLUDES, FUNCTIONS_DIR, pin_logical_id

FUNCTION_RUNTIME_ROLE_ID = "FunctionRuntimeRole"
FUNCTION_RUNTIME_CODE_ID = "FunctionRuntimeCode"
FUNCTION_LOGS_ID = "FunctionLogs"
FUNCTION_MANAGEMENT_POLICY_ID = "BrokerFunctionManagementPolicy"
# the calls magnetar.adapters.aws.function_deployer makes (TagResource: CreateFunction's tags)
MANAGE_ACTIONS = (
    "lambda:CreateFunction",
    "lambda:DeleteFunction",
    "lambda:DeleteFunctionConcurrency",
    "lambda:GetFunction",
    "lambda:GetFunctionConfiguration",
    "lambda:PutFunctionConcurrency",
    "lambda:TagResource",
    "lambda:UpdateFunctionCode",
    "lambda:UpdateFunctionConfiguration",
)
# a registered function's Lambda function: its state (this cluster's table) and the schemas (the
# configuration store), by the items' partition keys (core/ports: FNSTATE#<fqfn>, SCHEMA#<topic>)
STATE_ACTIONS = ("dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:UpdateItem")
SCHEMA_ACTIONS = ("dynamodb:Query",)
MAX_PREFIX = 28  # leaves a function's name (64 characters) room for its fqfn and hash


def function_prefix(stack: Stack) -> str:
    """The prefix of the Lambda functions the broker creates: the stack's name (context
    `functionPrefix` overrides it)."""
    given = stack.node.try_get_context("functionPrefix")
    base = str(given) if given else re.sub(r"[^A-Za-z0-9_-]", "-", stack.stack_name)[: MAX_PREFIX - 4] + "-fn-"
    if not (re.fullmatch(r"[A-Za-z0-9_-]+", base) and len(base) <= MAX_PREFIX):
        raise ValueError(f"functionPrefix {base!r}: 1 to {MAX_PREFIX} letters, digits, - and _")
    return base


@dataclass
class PulsarFunctions:
    dispatcher: lambda_.Function
    runtime_role: iam.Role
    log_group: logs.LogGroup
    runtime_code: s3_assets.Asset
    prefix: str


def grant_runtime_access(role: iam.IRole, *, table_arn: str, schema_table_arns: list[str], bucket: s3.IBucket | None,
                         group: logs.ILogGroup) -> None:
    """What a registered function's Lambda function may do: its log group; the functions' state
    items; the schemas; the functions' code objects (`bucket`; none for a package holding its code)."""
    group.grant_write(role)
    state_condition = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["FNSTATE#*"]}}
    role.add_to_principal_policy(iam.PolicyStatement(actions=list(STATE_ACTIONS), resources=[table_arn],
                                                     conditions=state_condition))
    role.add_to_principal_policy(iam.PolicyStatement(
        actions=list(SCHEMA_ACTIONS), resources=schema_table_arns,
        conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["SCHEMA#*"]}}))
    if bucket is not None:
        role.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject"],
                                                         resources=[bucket.arn_for_objects("functions/*")]))


def pulsar_functions(
    stack: Stack,
    *,
    make_function: Any,
    table: dynamodb.ITable,
    schema_table_arns: list[str],
    bucket: s3.IBucket,
    layer: lambda_.ILayerVersion,
    environment: dict[str, str],
    log_retention_days: int,
) -> PulsarFunctions:
    """The dispatcher, the runtime's package, role and log group (the module's docstring).
    `make_function(construct_id, asset, **options)`: the stack's function factory."""
    prefix = function_prefix(stack)
    code = s3_assets.Asset(stack, FUNCTION_RUNTIME_CODE_ID, path=str(FUNCTIONS_DIR / "function_runtime"),
                           exclude=ASSET_EXCLUDES)
    group = log_group(stack, FUNCTION_LOGS_ID, log_retention_days)
    pin_logical_id(group, FUNCTION_LOGS_ID)
    role = iam.Role(stack, FUNCTION_RUNTIME_ROLE_ID, assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                    description="Magnetar: the execution role of registered Pulsar functions' Lambda functions")
    pin_logical_id(role, FUNCTION_RUNTIME_ROLE_ID)  # the broker passes it by its ARN (the functions hold it)
    grant_runtime_access(role, table_arn=table.table_arn, schema_table_arns=schema_table_arns, bucket=bucket,
                         group=group)
    acknowledge(role, f"AwsSolutions-IAM5[Resource::<{SEGMENT_BUCKET_ID}.Arn>/functions/*]",
                "The registered functions' code objects (functions/<tenant>/<namespace>/<name>/...), uploaded at run time.")

    dispatcher = make_function(
        FUNCTION_DISPATCHER_FUNCTION_ID, "function_dispatcher",
        timeout=Duration.seconds(FUNCTION_DISPATCHER_TIMEOUT_S),
        environment={**environment, ENV_FUNCTION_PREFIX: prefix, "POWERTOOLS_SERVICE_NAME": "magnetar-function-dispatcher"},
    )
    grant_invoke_prefix(dispatcher, prefix)
    grant_self_invoke(dispatcher, FUNCTION_DISPATCHER_FUNCTION_ID)
    return PulsarFunctions(dispatcher, role, group, code, prefix)


def _prefix_arn(stack: Stack, prefix: str) -> str:
    return stack.format_arn(service="lambda", resource="function", resource_name=f"{prefix}*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME)


def _prefix_finding(stack: Stack, prefix: str) -> str:
    return f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:lambda:{region_account(stack)}:function:{prefix}*]"


def grant_invoke_prefix(dispatcher: lambda_.Function, prefix: str) -> None:
    stack = Stack.of(dispatcher)
    dispatcher.add_to_role_policy(iam.PolicyStatement(actions=["lambda:InvokeFunction"],
                                                      resources=[_prefix_arn(stack, prefix)]))
    assert dispatcher.role is not None
    acknowledge(dispatcher.role, _prefix_finding(stack, prefix),
                "The registered functions' Lambda functions, created at run time by the broker, all named "
                "under this stack's prefix.")


def grant_self_invoke(function: lambda_.Function, logical_id: str) -> None:
    """`function` invokes itself asynchronously; its own ARN cannot appear in its role (a circular
    dependency), so the statement names it by the stack's name and its pinned logical id
    (CloudFormation names it `<stack>-<logical id>-<suffix>`)."""
    stack = Stack.of(function)
    function.add_to_role_policy(iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[
        stack.format_arn(service="lambda", resource="function", resource_name=f"{stack.stack_name}-{logical_id}-*",
                         arn_format=ArnFormat.COLON_RESOURCE_NAME)]))
    assert function.role is not None
    acknowledge(function.role, f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:lambda:{region_account(stack)}:"
                f"function:{stack.stack_name}-{logical_id}-*]",
                "The function invokes itself; its own ARN cannot appear in its role (circular dependency), so the "
                "statement names it by the stack name and its pinned logical id, the random suffix CloudFormation "
                "adds being the only wildcard.")


def grant_start_dispatcher(starter: lambda_.Function, dispatcher: lambda_.Function) -> None:
    """`starter` (the journal consumer, the maintenance function) starts dispatchers: the dispatcher's
    name in its environment, lambda:InvokeFunction on the dispatcher's ARN only."""
    starter.add_environment(ENV_FUNCTION_DISPATCHER, dispatcher.function_name)
    starter.add_to_role_policy(iam.PolicyStatement(actions=["lambda:InvokeFunction"],
                                                   resources=[dispatcher.function_arn]))


def grant_manage_functions(broker: lambda_.Function, functions: PulsarFunctions, layer: lambda_.ILayerVersion) -> None:
    """The broker creates, sizes and deletes registered functions' Lambda functions: what it creates
    them with in its environment, and the grants for exactly that."""
    stack = Stack.of(broker)
    code = functions.runtime_code
    broker.add_environment(ENV_FUNCTION_PREFIX, functions.prefix)
    broker.add_environment(ENV_FUNCTION_ROLE, functions.runtime_role.role_arn)
    broker.add_environment(ENV_FUNCTION_CODE, f"{code.s3_bucket_name}/{code.s3_object_key}")
    broker.add_environment(ENV_FUNCTION_LAYERS, layer.layer_version_arn)
    broker.add_environment(ENV_FUNCTION_LOG_GROUP, functions.log_group.log_group_name)
    assert broker.role is not None
    # its own policy (not the role's default one, where CDK would merge it with the broker's other grants)
    policy = iam.Policy(stack, FUNCTION_MANAGEMENT_POLICY_ID, roles=[broker.role], statements=[
        iam.PolicyStatement(actions=list(MANAGE_ACTIONS), resources=[_prefix_arn(stack, functions.prefix)]),
        iam.PolicyStatement(actions=["iam:PassRole"], resources=[functions.runtime_role.role_arn],
                            conditions={"StringEquals": {"iam:PassedToService": "lambda.amazonaws.com"}}),
        iam.PolicyStatement(actions=["lambda:GetLayerVersion"], resources=[layer.layer_version_arn]),
        # CreateFunction and UpdateFunctionCode read the package with the caller's rights: that one object
        iam.PolicyStatement(actions=["s3:GetObject"], resources=[
            stack.format_arn(service="s3", region="", account="", resource=code.s3_bucket_name,
                             resource_name=code.s3_object_key)]),
    ])
    pin_logical_id(policy, FUNCTION_MANAGEMENT_POLICY_ID)
    acknowledge(policy, _prefix_finding(stack, functions.prefix),
                "The registered functions' Lambda functions the broker creates at run time (one per function "
                "registered), all named under this stack's prefix; other functions of the account are out of reach.")
