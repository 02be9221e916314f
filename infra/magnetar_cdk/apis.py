"""The APIs: the token-authenticated HTTP API and its SigV4 twin in front of the broker, the WebSocket
API (token authorizer on $connect) and the CloudFront distribution giving it Pulsar's `/ws/v2` paths."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as apigwv2_authorizers
from aws_cdk import aws_apigatewayv2_integrations as apigwv2_integrations
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from magnetar.config import HTTP_API_ID, IAM_HTTP_API_ID, PUBLIC_ROUTES, WEBSOCKET_API_ID

from .nag import acknowledge, acknowledge_all
from .observability import HTTP_ACCESS_LOG_FORMAT, WEBSOCKET_ACCESS_LOG_FORMAT, access_logs
from .settings import (
    HTTP_API_ACCESS_LOGS_ID,
    IAM_HTTP_API_ACCESS_LOGS_ID,
    WEBSOCKET_ACCESS_LOGS_ID,
    WEBSOCKET_DISTRIBUTION_ID,
    WEBSOCKET_PATH_FUNCTION_ID,
    WEBSOCKET_STAGE_ID,
    WEBSOCKET_STAGE_NAME,
    pin_logical_id,
)

# CloudFront Function (viewer request): API Gateway WebSocket APIs have a single URL and do not route
# by path, so the Pulsar path (`/ws/v2/consumer/persistent/t/ns/topic/sub`) moves into the query
# parameter `path` (the other parameters stay) and the request goes to the stage root. The path is
# decoded then encoded once, so API Gateway hands `queryStringParameters["path"]` to the $connect
# handler decoded (`/ws/v2/.../my topic`, not `my%20topic`); the local emulation must do the same.
WEBSOCKET_PATH_REWRITE_JS = """\
function handler(event) {
    var request = event.request;
    var path = request.uri;
    try {
        path = decodeURIComponent(path);
    } catch (e) {
        // malformed percent-encoding: pass the path on as received
    }
    request.querystring['path'] = { value: encodeURIComponent(path) };
    request.uri = '/';
    return request;
}
"""

# The distribution's acknowledged cdk-nag findings.
DISTRIBUTION_ACKNOWLEDGEMENTS = (
    (
        "AwsSolutions-CFR4",
        "The distribution uses CloudFront's default certificate (*.cloudfront.net), whose "
        "minimum viewer protocol CloudFront fixes; a TLSv1.2_2021 policy needs a custom domain "
        "with an ACM certificate. Origin requests use TLS 1.2 (HTTPS only).",
    ),
    (
        "AwsSolutions-CFR3",
        "Each connection is a single upgrade request, which the WebSocket stage's access log "
        "(WebSocketAccessLogs) records with the authorizer's principal; CloudFront standard logs "
        "would need an ACL-enabled S3 bucket for no additional information.",
    ),
    (
        "AwsSolutions-CFR1",
        "Pulsar clients connect from anywhere the operator's tenants run; no geographic restriction "
        "is part of the service. Add one per deployment if policy requires it.",
    ),
    (
        "AwsSolutions-CFR2",
        "Connections are authenticated at $connect (token authorizer) and the stage is throttled; "
        "a CloudFront WAF web ACL must live in us-east-1 while this stack is region-agnostic, so "
        "operators who need one attach it to the distribution.",
    ),
)


@dataclass(frozen=True)
class HttpApis:
    """What `http_apis` creates."""

    token_authorizer: apigwv2_authorizers.HttpLambdaAuthorizer
    http_api: apigwv2.HttpApi
    http_stage: apigwv2.HttpStage
    iam_http_api: apigwv2.HttpApi
    iam_http_stage: apigwv2.HttpStage


def websocket_api(
    scope: Construct, throttle: apigwv2.ThrottleSettings, log_retention_days: int
) -> tuple[apigwv2.WebSocketApi, apigwv2.WebSocketStage]:
    """The WebSocket API and its throttled, access-logged stage (routes come once its function exists)."""
    api = apigwv2.WebSocketApi(
        scope,
        WEBSOCKET_API_ID,
        description="Magnetar WebSocket API (Pulsar's /ws/v2 producer, consumer and reader)",
    )
    pin_logical_id(api, WEBSOCKET_API_ID)
    stage = apigwv2.WebSocketStage(
        scope,
        WEBSOCKET_STAGE_ID,
        web_socket_api=api,
        stage_name=WEBSOCKET_STAGE_NAME,
        auto_deploy=True,
        throttle=throttle,
    )
    pin_logical_id(stage, WEBSOCKET_STAGE_ID)
    access_logs(scope, stage, WEBSOCKET_ACCESS_LOGS_ID, WEBSOCKET_ACCESS_LOG_FORMAT, log_retention_days)
    return api, stage


def http_apis(
    scope: Construct,
    *,
    broker: lambda_.IFunction,
    authorizer: lambda_.IFunction,
    authorizer_cache_ttl: Duration,
    throttle: apigwv2.ThrottleSettings,
    log_retention_days: int,
) -> HttpApis:
    """The token-authenticated HTTP API and its SigV4 twin, both in front of the broker."""
    # Simple responses, cached per Authorization header for `authorizer_cache_ttl`. Caching is
    # safe for expiring tokens: the answer carries the token's `exp` in its context and the broker
    # refuses the token once `exp` has passed, whatever API Gateway still caches. A token whose
    # key was dropped in a rotation stays accepted for at most the TTL (plus the authorizer's own
    # 5-minute key cache). Requests without an Authorization header are refused by API Gateway
    # (401) before the authorizer runs.
    token_authorizer = apigwv2_authorizers.HttpLambdaAuthorizer(
        "TokenAuthorizer",
        authorizer,
        authorizer_name="magnetar-token",
        identity_source=["$request.header.Authorization"],
        response_types=[apigwv2_authorizers.HttpLambdaResponseType.SIMPLE],
        results_cache_ttl=authorizer_cache_ttl,
    )
    broker_integration = apigwv2_integrations.HttpLambdaIntegration(
        "BrokerIntegration",
        broker,
        payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
    )
    http_api = apigwv2.HttpApi(
        scope,
        HTTP_API_ID,
        description="Magnetar broker (Pulsar admin and messaging REST API)",
        default_integration=broker_integration,
        default_authorizer=token_authorizer,
        create_default_stage=False,  # added below with throttling and access logs (same logical id)
    )
    pin_logical_id(http_api, HTTP_API_ID)
    http_stage = _http_stage(scope, http_api, HTTP_API_ACCESS_LOGS_ID, throttle, log_retention_days)
    # The few routes the broker serves to anyone (the OpenAPI document): no authorizer.
    for public_route in sorted(PUBLIC_ROUTES):
        method, path = public_route.split(" ", 1)
        for route in http_api.add_routes(
            path=path,
            methods=[apigwv2.HttpMethod[method]],
            integration=broker_integration,
            authorizer=apigwv2.HttpNoneAuthorizer(),
        ):
            acknowledge(
                route,
                "AwsSolutions-APIG4",
                f"{public_route} is public on purpose (magnetar.config.PUBLIC_ROUTES): the API's "
                "OpenAPI description, no data.",
            )
    CfnOutput(scope, "HttpApiUrl", value=http_stage.url)

    # AWS workloads (an EMR job role, a Lambda function's role) sign with SigV4 instead of
    # holding a token; the broker reads the caller from requestContext.authorizer.iam and grants
    # by role ARN. Which principals may call at all is their IAM policies' say
    # (execute-api:Invoke on IamHttpApiExecuteArn).
    iam_http_api = apigwv2.HttpApi(
        scope,
        IAM_HTTP_API_ID,
        description="Magnetar broker for AWS principals (SigV4, IAM authorization)",
        create_default_stage=False,
    )
    pin_logical_id(iam_http_api, IAM_HTTP_API_ID)
    iam_http_stage = _http_stage(
        scope, iam_http_api, IAM_HTTP_API_ACCESS_LOGS_ID, throttle, log_retention_days
    )
    iam_http_api.add_routes(
        path="/{proxy+}",
        methods=[apigwv2.HttpMethod.ANY],
        integration=apigwv2_integrations.HttpLambdaIntegration(
            "IamBrokerIntegration",
            broker,
            payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
        ),
        authorizer=apigwv2_authorizers.HttpIamAuthorizer(),
    )
    CfnOutput(
        scope,
        "IamHttpApiUrl",
        value=iam_http_stage.url,
        description="Broker URL for SigV4-signed requests (AWS principals; roles are their ARNs)",
    )
    CfnOutput(
        scope,
        "IamHttpApiExecuteArn",
        value=Stack.of(scope).format_arn(
            service="execute-api", resource=iam_http_api.api_id, resource_name="*"
        ),
        description="Resource for execute-api:Invoke in the policies of roles that call IamHttpApiUrl",
    )
    return HttpApis(token_authorizer, http_api, http_stage, iam_http_api, iam_http_stage)


def _http_stage(
    scope: Construct,
    api: apigwv2.HttpApi,
    access_logs_id: str,
    throttle: apigwv2.ThrottleSettings,
    log_retention_days: int,
) -> apigwv2.HttpStage:
    """The API's `$default` stage, auto-deployed, throttled and access-logged.

    Its construct id is the one HttpApi gives the stage it creates itself, so the stage keeps
    its logical id (a replaced `$default` stage would collide with the old one)."""
    stage = api.add_stage("DefaultStage", stage_name="$default", auto_deploy=True, throttle=throttle)
    access_logs(scope, stage, access_logs_id, HTTP_ACCESS_LOG_FORMAT, log_retention_days)
    return stage


def websocket_routes(
    api: apigwv2.WebSocketApi, websocket_function: lambda_.IFunction, authorizer: lambda_.IFunction
) -> apigwv2_authorizers.WebSocketLambdaAuthorizer:
    """$connect (token authorizer), $disconnect and $default, all to the WebSocket function.

    No identity source: API Gateway would refuse a connection lacking the named parameter before
    the authorizer ran, and the token may come either as `Authorization: Bearer` (SDKs) or as
    `?token=` (browsers cannot set headers on a WebSocket). WebSocket authorizers are not cached:
    one invocation per connection."""
    connect_authorizer = apigwv2_authorizers.WebSocketLambdaAuthorizer(
        "ConnectAuthorizer", authorizer, authorizer_name="magnetar-connect", identity_source=[]
    )
    for route_key in ("$connect", "$disconnect", "$default"):
        route = api.add_route(
            route_key,
            integration=apigwv2_integrations.WebSocketLambdaIntegration(
                f"WebSocket{route_key.lstrip('$').capitalize()}Integration",
                websocket_function,
            ),
            authorizer=connect_authorizer if route_key == "$connect" else None,
            # producer receipts, error frames and answers go back as the route's response
            return_response=route_key == "$default",
        )
        if route_key != "$connect":
            acknowledge(
                route,
                "AwsSolutions-APIG4",
                "API Gateway runs WebSocket authorizers on $connect only; $default and $disconnect "
                "frames arrive on a connection whose $connect was authorized, and the function checks "
                "the role recorded with the connection.",
            )
    for cfn_authorizer in api.node.find_all():
        if isinstance(cfn_authorizer, apigwv2.CfnAuthorizer):
            # CloudFormation gets no IdentitySource at all (optional for WebSocket REQUEST
            # authorizers), not an empty list.
            cfn_authorizer.add_property_deletion_override("IdentitySource")
    return connect_authorizer


def websocket_distribution(
    scope: Construct, api: apigwv2.WebSocketApi, stage: apigwv2.WebSocketStage
) -> cloudfront.Distribution:
    """CloudFront in front of the WebSocket API, so clients connect with Pulsar's `/ws/v2/...` paths."""
    path_rewrite = cloudfront.Function(
        scope,
        WEBSOCKET_PATH_FUNCTION_ID,
        code=cloudfront.FunctionCode.from_inline(WEBSOCKET_PATH_REWRITE_JS),
        runtime=cloudfront.FunctionRuntime.JS_2_0,
        comment="Magnetar: move the Pulsar WebSocket path into the query parameter path",
    )
    pin_logical_id(path_rewrite, WEBSOCKET_PATH_FUNCTION_ID)
    stack = Stack.of(scope)
    api_domain = f"{api.api_id}.execute-api.{stack.region}.{stack.url_suffix}"
    distribution = cloudfront.Distribution(
        scope,
        WEBSOCKET_DISTRIBUTION_ID,
        comment="Magnetar WebSocket endpoint (Pulsar /ws/v2 paths)",
        default_behavior=cloudfront.BehaviorOptions(
            origin=origins.HttpOrigin(
                api_domain,
                origin_path=f"/{WEBSOCKET_STAGE_NAME}",
                protocol_policy=cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
            ),
            viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
            cache_policy=cloudfront.CachePolicy.CACHING_DISABLED,
            # Every viewer header (Upgrade, Sec-WebSocket-*) but Host, which must name the
            # execute-api domain; all query parameters (`path`, `token`, ...) and cookies as well.
            # Authorization too: CloudFront strips it unless it is in the cache key or, as here
            # with caching disabled, an all-viewer-headers origin request policy forwards it.
            origin_request_policy=cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
            function_associations=[
                cloudfront.FunctionAssociation(
                    function=path_rewrite,
                    event_type=cloudfront.FunctionEventType.VIEWER_REQUEST,
                )
            ],
        ),
    )
    pin_logical_id(distribution, WEBSOCKET_DISTRIBUTION_ID)
    acknowledge_all(distribution, DISTRIBUTION_ACKNOWLEDGEMENTS)
    CfnOutput(
        scope,
        "WebSocketUrl",
        value=f"wss://{distribution.distribution_domain_name}",
        description="Pulsar WebSocket endpoint: wss://<this>/ws/v2/...",
    )
    CfnOutput(
        scope,
        "WebSocketApiUrl",
        value=stage.url,
        description="The WebSocket API's own URL (no path routing; the Pulsar path goes in ?path=)",
    )
    return distribution
