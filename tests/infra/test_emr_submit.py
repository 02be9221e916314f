"""`magnetar spark submit JOB.py` (without --local) against the emulator: moto's EMR Serverless,
S3 and CloudFormation. The stack's outputs name the application, role, bucket and environment."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from typer.testing import CliRunner

from magnetar.cli.main import app

ROLE = "arn:aws:iam::123456789012:role/magnetar-emr-job"
ENVIRONMENT = "s3://cdk-assets-test/0123abcd.zip"


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    from magnetar.local.cluster import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    import os

    for name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1"), ("AWS_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    yield f"http://127.0.0.1:{port}"
    server.stop()


def _stack(endpoint: str, application_id: str) -> None:
    """A stack with the EMR part's outputs (the jobs bucket made by CloudFormation itself)."""
    template = {
        "Resources": {"EmrJobsBucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "magnetar-emr-jobs"}}},
        "Outputs": {
            "EmrApplicationId": {"Value": application_id},
            "EmrJobRoleArn": {"Value": ROLE},
            "EmrJobsBucketName": {"Value": {"Ref": "EmrJobsBucket"}},
            "EmrEnvironmentArchive": {"Value": ENVIRONMENT},
        },
    }
    boto3.client("cloudformation", endpoint_url=endpoint).create_stack(StackName="MagnetarEmrTest",
                                                                       TemplateBody=json.dumps(template))


def test_submit_starts_a_job_run_from_the_stack_outputs(emulator: str, tmp_path: Path) -> None:
    emr = boto3.client("emr-serverless", endpoint_url=emulator)
    # (moto knows emr-X.Y.0 labels only, not emr-spark-8.0.0: the stack's label is asserted in test_emr.py)
    application_id = emr.create_application(name="magnetar-spark", releaseLabel="emr-7.9.0", type="SPARK",
                                            architecture="ARM64")["applicationId"]
    _stack(emulator, application_id)
    job = tmp_path / "orders_job.py"
    job.write_text("print('hello from EMR')\n")
    result = CliRunner().invoke(app, ["spark", "submit", "--stack", "MagnetarEmrTest", "--conf",
                                      "spark.executor.cores=2", str(job), "--topic", "orders", "--name", "job-arg"])
    assert result.exit_code == 0, result.output
    (summary,) = emr.list_job_runs(applicationId=application_id)["jobRuns"]
    run = emr.get_job_run(applicationId=application_id, jobRunId=summary["id"])["jobRun"]
    assert run["executionRole"] == ROLE and run["name"] == "orders_job"
    assert f"job run {summary['id']} started on application {application_id}" in result.output
    assert f"get-job-run --application-id {application_id} --job-run-id {summary['id']}" in result.output
    driver = run["jobDriver"]["sparkSubmit"]
    assert driver["entryPointArguments"] == ["--topic", "orders", "--name", "job-arg"]  # the job's, untouched
    params = driver["sparkSubmitParameters"]
    for conf in (f"spark.archives={ENVIRONMENT}#environment", "spark.executorEnv.PYTHONPATH=./environment",
                 "spark.emr-serverless.driverEnv.PYTHONPATH=./environment", "spark.executor.cores=2"):
        assert f"--conf {conf}" in params
    bucket, _, key = driver["entryPoint"].removeprefix("s3://").partition("/")
    assert bucket == "magnetar-emr-jobs" and key.startswith("jobs/orders_job-") and key.endswith("/orders_job.py")
    script = boto3.client("s3", endpoint_url=emulator).get_object(Bucket=bucket, Key=key)["Body"].read()
    assert script == job.read_bytes()
    logs = run["configurationOverrides"]["monitoringConfiguration"]["s3MonitoringConfiguration"]["logUri"]
    assert logs == "s3://magnetar-emr-jobs/logs/"


def test_submit_without_an_emr_stack_says_what_is_missing(emulator: str, tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text("")
    result = CliRunner().invoke(app, ["spark", "submit", "--stack", "NoSuchStack", str(job)])
    assert result.exit_code == 2
    assert "--application-id" in result.output and "-c emr=true" in result.output
