"""Spark on EMR Serverless, an optional part of the stack: `MagnetarStack(emr=True)`, or from the
command line `cdk synth|deploy -c emr=true`.

- An EMR Serverless Spark application on ARM64 (Graviton) with the release that ships Spark 4
  (`EMR_RELEASE_LABEL`, the AWS runtime for Apache Spark 8.0.0: Spark 4.0.2; Python data
  sources need Spark 4), started on the first job and stopped after `IDLE_MINUTES` idle, capped
  at `max_cpu` / `max_memory`. No VPC: jobs reach the API's public endpoint and S3 directly.
- A job execution role with least privilege: GetObject on the segment bucket's segments (a job
  may read them with its own credentials; direct reads use the broker's presigned URLs and need
  not), execute-api:Invoke on the IAM-authorized HTTP API (grants on topics then name this role's
  ARN), its own jobs bucket (scripts, logs, checkpoints, output), and the packaged environment.
- The packaged Python environment: magnetar, magnetar_spark and pyspark_magnetar with their
  dependencies for `manylinux aarch64` and `python_version` (pip, from PyPI), as a directory the
  CDK uploads as an asset (a zip); a job unpacks it with `spark.archives=<zip>#environment` and
  puts it on PYTHONPATH (driver and executors), which `magnetar spark submit` does. pyspark is the
  image's own.
- Outputs: EmrApplicationId, EmrJobRoleArn, EmrJobsBucketName, EmrEnvironmentArchive,
  EmrPythonVersion (what `magnetar spark submit` reads).

New resources in a construct of their own (`Emr`): the stack's existing logical ids stay as
they are, with or without it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_emrserverless as emrs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from magnetar.config import IAM_HTTP_API_ID, SEGMENT_BUCKET_ID
from magnetar_cdk.nag import acknowledge, acknowledge_all, region_account
from magnetar_cdk.settings import REPO_ROOT, context_flag, setting

EMR_RELEASE_LABEL = "emr-spark-8.0.0"  # Spark 4.0.2-amzn-0 (EMR Serverless, arm64 and x86_64)
DEFAULT_PYTHON_VERSION = "3.11"  # the compiled wheels' Python: must be the image's python3 (see docs/spark.md)
IDLE_MINUTES = 15
DEFAULT_BUILD_DIR = REPO_ROOT / ".magnetar" / "emr-environment"  # (git-ignored)
# What executors import beyond magnetar's own dependencies (pyspark itself is the image's).
EXTRA_REQUIREMENTS = ("httpx>=0.27", "boto3>=1.34", "pyarrow>=15", "pandas>=2,<3")
PIP_PLATFORM_ARGS = ("--platform", "manylinux2014_aarch64", "--platform", "manylinux_2_28_aarch64",
                     "--only-binary=:all:", "--implementation", "cp")
SOURCES = (REPO_ROOT / "src" / "magnetar", REPO_ROOT / "spark" / "magnetar_spark", REPO_ROOT / "spark" / "pyspark_magnetar")
LOCAL_ONLY = frozenset({"local", "cli", "perf", "verify", "cost"})  # magnetar's developer-machine parts


def enabled(scope: Construct, emr: bool | None) -> bool:
    """The argument if given, else the context flag `emr` (off by default)."""
    return bool(setting(scope, emr, "emr", False, context_flag))


def build_environment(out_dir: Path = DEFAULT_BUILD_DIR, *, python_version: str = DEFAULT_PYTHON_VERSION,
                      no_deps: bool = False) -> Path:
    """`out_dir` holding magnetar, magnetar_spark, pyspark_magnetar (and, unless `no_deps`, their
    dependencies for arm64 Linux and `python_version`), rebuilt only when the sources changed."""
    stamp = _stamp(python_version, no_deps)
    marker = out_dir / ".magnetar-environment"
    if marker.is_file() and marker.read_text() == stamp:
        return out_dir
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    for source in SOURCES:
        shutil.copytree(source, out_dir / source.name, ignore=_ignore(source))
    if not no_deps:
        requirements = [*_project_dependencies(), *EXTRA_REQUIREMENTS]
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--no-compile", "--target", str(out_dir), *PIP_PLATFORM_ARGS, "--python-version",
                        python_version, *requirements], check=True)
    marker.write_text(stamp)
    return out_dir


def _ignore(source: Path) -> Callable[[str, list[str]], set[str]]:
    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = {n for n in names if n == "__pycache__" or n.endswith((".pyc", ".pyo"))}
        if Path(directory).resolve() == source.resolve() and source.name == "magnetar":
            skipped |= LOCAL_ONLY.intersection(names)
        return skipped

    return ignore


def _project_dependencies() -> list[str]:
    """What the functions' layer carries (every one has arm64 wheels): the core's codecs, Avro,
    pydantic, ... The CLI's dependencies (typer, rich, hdrhistogram: no arm64 wheel) stay out."""
    lines = (REPO_ROOT / "layers" / "core" / "requirements.txt").read_text().splitlines()
    return [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]


def _stamp(python_version: str, no_deps: bool) -> str:
    digest = hashlib.sha256()
    for source in SOURCES:
        for path in sorted(source.rglob("*.py")):
            digest.update(str(path.relative_to(REPO_ROOT)).encode())
            digest.update(path.read_bytes())
    digest.update((REPO_ROOT / "layers" / "core" / "requirements.txt").read_bytes())
    digest.update(repr(EXTRA_REQUIREMENTS).encode())
    return json.dumps({"python": python_version, "no_deps": no_deps, "sources": digest.hexdigest()})


class SparkOnEmr(Construct):
    """The EMR Serverless application, its job role, jobs bucket and packaged environment."""

    def __init__(self, scope: Construct, construct_id: str, *, segment_bucket: s3.IBucket,
                 iam_http_api: apigwv2.IHttpApi, environment_dir: Path | None = None,
                 python_version: str | None = None, max_cpu: str = "32 vCPU", max_memory: str = "128 GB") -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.python_version = python_version or str(
            self.node.try_get_context("emrPythonVersion") or DEFAULT_PYTHON_VERSION)
        given = environment_dir or self.node.try_get_context("emrEnvironmentDir")  # (tests: a --no-deps build)
        env_dir = Path(given) if given else build_environment(python_version=self.python_version)

        self.application = emrs.CfnApplication(
            self, "Application",
            name=f"{stack.stack_name}-spark",
            type="SPARK",
            release_label=EMR_RELEASE_LABEL,
            architecture="ARM64",
            auto_start_configuration=emrs.CfnApplication.AutoStartConfigurationProperty(enabled=True),
            auto_stop_configuration=emrs.CfnApplication.AutoStopConfigurationProperty(
                enabled=True, idle_timeout_minutes=IDLE_MINUTES),
            maximum_capacity=emrs.CfnApplication.MaximumAllowedResourcesProperty(cpu=max_cpu, memory=max_memory),
        )

        self.jobs_bucket = s3.Bucket(
            self, "JobsBucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            encryption=s3.BucketEncryption.S3_MANAGED,
            removal_policy=RemovalPolicy.RETAIN,
            lifecycle_rules=[s3.LifecycleRule(prefix="logs/", expiration=Duration.days(30)),
                             s3.LifecycleRule(prefix="jobs/", expiration=Duration.days(90))],
        )
        acknowledge(self.jobs_bucket, "AwsSolutions-S1",
                    "Job scripts and Spark logs written by the job role only; server access logs of them would "
                    "add a log bucket for little: CloudTrail S3 data events when an audit trail is required.")

        self.environment = s3_assets.Asset(self, "PythonEnvironment", path=str(env_dir),
                                           exclude=["**/__pycache__", "**/*.pyc", ".magnetar-environment"])

        # Assumed by EMR Serverless for this application's job runs only (confused deputy: the source).
        principal = iam.ServicePrincipal("emr-serverless.amazonaws.com").with_conditions({
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {"aws:SourceArn": self.application.attr_arn},
        })
        self.job_role = iam.Role(self, "JobRole", assumed_by=principal,
                                 description="Magnetar Spark jobs on EMR Serverless: read segments, call the API")
        self.job_role.add_to_policy(iam.PolicyStatement(
            actions=["s3:GetObject"], resources=[segment_bucket.arn_for_objects("segments/*")]))
        self.job_role.add_to_policy(iam.PolicyStatement(
            actions=["execute-api:Invoke"],
            resources=[stack.format_arn(service="execute-api", resource=iam_http_api.api_id, resource_name="*")]))
        self.job_role.add_to_policy(iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], resources=[self.jobs_bucket.arn_for_objects("*")]))
        self.job_role.add_to_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self.jobs_bucket.bucket_arn]))
        self.job_role.add_to_policy(iam.PolicyStatement(
            actions=["s3:GetObject"],
            resources=[f"arn:{stack.partition}:s3:::{self.environment.s3_bucket_name}/{self.environment.s3_object_key}"]))
        acknowledge_all(self.job_role, (
            (f"AwsSolutions-IAM5[Resource::<{SEGMENT_BUCKET_ID}.Arn>/segments/*]",
             "Segment objects: their keys name topics and ledgers created at run time; read only."),
            (f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:{region_account(self)}:"
             f"<{IAM_HTTP_API_ID}>/*]",
             "Every route of the IAM-authorized API: the broker authorizes each call by this role's grants."),
        ))
        _acknowledge_jobs_bucket_objects(self)

        CfnOutput(stack, "EmrApplicationId", value=self.application.attr_application_id,
                  description="EMR Serverless application for Spark jobs (magnetar spark submit)")
        CfnOutput(stack, "EmrJobRoleArn", value=self.job_role.role_arn,
                  description="Job execution role; grant it topics by this ARN (aws-iam auth)")
        CfnOutput(stack, "EmrJobsBucketName", value=self.jobs_bucket.bucket_name,
                  description="Job scripts (jobs/), logs (logs/), checkpoints and output of Spark jobs")
        CfnOutput(stack, "EmrEnvironmentArchive", value=self.environment.s3_object_url,
                  description="The packaged Python environment (spark.archives=<this>#environment)")
        CfnOutput(stack, "EmrPythonVersion", value=self.python_version,
                  description="The Python version the environment's compiled wheels are for")


def _acknowledge_jobs_bucket_objects(emr: SparkOnEmr) -> None:
    """cdk-nag names the jobs bucket's objects by its logical id (a hashed one): acknowledge that exact name."""
    stack = Stack.of(emr)
    bucket_id = stack.get_logical_id(emr.jobs_bucket.node.default_child)  # type: ignore[arg-type]
    acknowledge(emr.job_role, f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/*]",
                "The jobs bucket's own objects (scripts, logs, checkpoints, output) under names jobs choose.")


def spark_on_emr(stack: Stack, emr: bool | None, *, segment_bucket: s3.IBucket, iam_http_api: apigwv2.IHttpApi,
                 environment_dir: Path | None = None) -> SparkOnEmr | None:
    """The stack's hook: `SparkOnEmr` when enabled (argument, else `-c emr=true`), else None."""
    if not enabled(stack, emr):
        return None
    return SparkOnEmr(stack, "Emr", segment_bucket=segment_bucket, iam_http_api=iam_http_api,
                      environment_dir=environment_dir)
