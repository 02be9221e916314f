"""The web console as a static site, an optional part of the stack: `MagnetarStack(console=True)`, or
from the command line `cdk deploy -c console=true`.

- A private S3 bucket (no public access, SSE-S3, TLS only) holding the repository's `console/`
  files and `config.json`, which a BucketDeployment writes at deploy time with the HTTP API's URL:
  the same static files work here and under `magnetar local up` (where config.json says "the
  console's own origin").
- A CloudFront distribution in front of it, reading the bucket through Origin Access Control
  (the bucket policy admits this distribution only), HTTPS only, with CloudFront's security
  response headers; `ConsoleUrl` is its address.
- CORS on the token-authenticated HTTP API for that origin (API Gateway answers the preflight;
  an `OPTIONS /{proxy+}` route without authorizer keeps the preflight from the token
  authorizer, which a `$default` route would otherwise run on it).

The console holds no privilege: it calls the HTTP API with the user's own token.

New resources in a construct of their own (`Console`): the stack's existing logical ids stay as
they are, with or without it.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, DefaultStackSynthesizer, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as apigwv2_integrations
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from magnetar_cdk.apis import DISTRIBUTION_ACKNOWLEDGEMENTS
from magnetar_cdk.nag import acknowledge, acknowledge_all
from magnetar_cdk.settings import REPO_ROOT, context_flag, setting

CONSOLE_ID = "Console"
CONSOLE_DIR = REPO_ROOT / "console"
BOOTSTRAP_QUALIFIER_CONTEXT = "@aws-cdk/core:bootstrapQualifier"  # CDK's context key (cdk bootstrap --qualifier)
CORS_MAX_AGE = Duration.minutes(10)
CORS_METHODS = ("GET", "PUT", "POST", "DELETE")  # what the console calls the admin API with
CORS_HEADERS = ("authorization", "content-type")

BUCKET_ACKNOWLEDGEMENTS = (
    (
        "AwsSolutions-S1",
        "The bucket holds the console's public static files (no data); CloudFront alone reads it "
        "(Origin Access Control). The calls that matter are the API's, in its access logs.",
    ),
)
DEPLOYMENT_REASON = (
    "CDK's BucketDeployment provider function (CDK's own code, run at deploy time only) copies the "
    "console's files from the CDK asset bucket into the console bucket and invalidates the "
    "distribution: CDK grants it these S3 actions on the two buckets' objects and "
    "cloudfront:CreateInvalidation (which takes no resource narrower than *), and the basic "
    "execution role for its logs; its runtime is the one CDK pins for it."
)


def _deployment_findings(construct: Construct, bucket: s3.Bucket) -> tuple[tuple[str, str], ...]:
    """The BucketDeployment provider's cdk-nag findings, as cdk-nag names them."""
    stack = Stack.of(construct)
    cfn_bucket = bucket.node.default_child
    assert isinstance(cfn_bucket, s3.CfnBucket)
    bucket_id = stack.resolve(stack.get_logical_id(cfn_bucket))
    qualifier = stack.node.try_get_context(BOOTSTRAP_QUALIFIER_CONTEXT) or DefaultStackSynthesizer.DEFAULT_QUALIFIER
    rules = [
        "AwsSolutions-L1",  # the provider's runtime is the one CDK pins for it (with its AWS CLI layer)
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
        *(f"AwsSolutions-IAM5[Action::s3:{action}]"
          for action in ("Abort*", "DeleteObject*", "GetBucket*", "GetObject*", "List*")),
        "AwsSolutions-IAM5[Resource::*]",
        f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/*]",
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::cdk-{qualifier}-assets-<AWS::AccountId>-<AWS::Region>/*]",
    ]
    return tuple((rule, DEPLOYMENT_REASON) for rule in rules)


PREFLIGHT_ACKNOWLEDGEMENT = (
    "A CORS preflight carries no credentials by design: API Gateway answers it from the API's CORS "
    "configuration (the console's origin only) before any integration runs, so this route only keeps "
    "the token authorizer off preflights; every other method still needs a token."
)


def enabled(scope: Construct, console: bool | None) -> bool:
    """The argument if given, else the context flag `console` (off by default)."""
    return bool(setting(scope, console, "console", False, context_flag))


class ConsoleSite(Construct):
    """The console's bucket, distribution and deployment, and CORS on `http_api` for its origin."""

    def __init__(self, scope: Construct, construct_id: str, *, http_api: apigwv2.HttpApi,
                 http_stage: apigwv2.HttpStage, broker: lambda_.IFunction) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            encryption=s3.BucketEncryption.S3_MANAGED,
            removal_policy=RemovalPolicy.DESTROY,  # rebuilt from the repository on each deploy
            auto_delete_objects=False,
        )
        acknowledge_all(self.bucket, BUCKET_ACKNOWLEDGEMENTS)
        self.distribution = cloudfront.Distribution(
            self,
            "Distribution",
            comment="Magnetar console (static files)",
            default_root_object="index.html",
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=cloudfront.ResponseHeadersPolicy.SECURITY_HEADERS,
            ),
            minimum_protocol_version=cloudfront.SecurityPolicyProtocol.TLS_V1_2_2021,
        )
        acknowledge_all(self.distribution, DISTRIBUTION_ACKNOWLEDGEMENTS)
        self.url = f"https://{self.distribution.distribution_domain_name}"
        self.deployment = s3deploy.BucketDeployment(
            self,
            "Files",
            sources=[
                s3deploy.Source.asset(str(CONSOLE_DIR)),
                # written after the files: the API's URL is known at deploy time only
                s3deploy.Source.json_data("config.json", {"apiUrl": http_stage.url, "authentication": True}),
            ],
            destination_bucket=self.bucket,
            distribution=self.distribution,  # invalidated on each deploy: config.json may change
            distribution_paths=["/*"],
            memory_limit=256,
        )
        findings = _deployment_findings(self, self.bucket)
        for child in Stack.of(self).node.children:  # the provider function CDK makes once per stack
            if child.node.id.startswith("Custom::CDKBucketDeployment"):
                acknowledge_all(child, findings)
        self._allow_origin(http_api, broker)
        CfnOutput(scope, "ConsoleUrl", value=self.url, description="The web console (sign in with a token)")

    def _allow_origin(self, http_api: apigwv2.HttpApi, broker: lambda_.IFunction) -> None:
        cfn_api = http_api.node.default_child
        assert isinstance(cfn_api, apigwv2.CfnApi)
        cfn_api.cors_configuration = apigwv2.CfnApi.CorsProperty(
            allow_origins=[self.url],
            allow_methods=list(CORS_METHODS),
            allow_headers=list(CORS_HEADERS),
            max_age=int(CORS_MAX_AGE.to_seconds()),
        )
        preflight = http_api.add_routes(
            path="/{proxy+}",
            methods=[apigwv2.HttpMethod.OPTIONS],
            integration=apigwv2_integrations.HttpLambdaIntegration("ConsolePreflightIntegration", broker),
            authorizer=apigwv2.HttpNoneAuthorizer(),
        )
        for route in preflight:
            acknowledge(route, "AwsSolutions-APIG4", PREFLIGHT_ACKNOWLEDGEMENT)


def add_if_enabled(stack: Construct, console: bool | None, *, http_api: apigwv2.HttpApi,
                   http_stage: apigwv2.HttpStage, broker: lambda_.IFunction) -> ConsoleSite | None:
    """The stack's hook: the console site when wanted (MagnetarStack)."""
    if not enabled(stack, console):
        return None
    return ConsoleSite(stack, CONSOLE_ID, http_api=http_api, http_stage=http_stage, broker=broker)
