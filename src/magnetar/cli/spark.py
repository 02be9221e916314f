"""`magnetar spark submit`: run a Spark job against Magnetar, here or on EMR Serverless.

`--local` runs the job script here, with this interpreter, in Spark's local mode, with the worker
Python set (PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON = this interpreter unless already set, and
`pyspark_magnetar` on the workers' path in an editable install), so `format("magnetar")` works with
no register call and no environment to set up.

Without `--local` it starts a job run on the stack's EMR Serverless application
(infra/magnetar_cdk/emr.py, `cdk deploy -c emr=true`): it uploads JOB.py to the jobs bucket
(`jobs/<name>-<time>/`), calls StartJobRun with the job execution role and the packaged
environment (`spark.archives=<zip>#environment`, on PYTHONPATH of the driver and the executors),
logs to `s3://<jobs bucket>/logs/`, and prints how to follow the run. The application id, role,
bucket and environment come from the stack's outputs (`--stack`, CloudFormation DescribeStacks)
unless given as options. AWS endpoints and credentials: the standard configuration only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

spark_app = typer.Typer(help="Spark jobs reading and writing Magnetar topics.", no_args_is_help=True)

# The stack outputs (infra/magnetar_cdk/emr.py) a submit needs, by option.
OUTPUTS = {"application_id": "EmrApplicationId", "role_arn": "EmrJobRoleArn", "bucket": "EmrJobsBucketName",
           "environment": "EmrEnvironmentArchive"}
TERMINAL_STATES = frozenset({"SUCCESS", "FAILED", "CANCELLED"})


@spark_app.command(
    "submit",
    # everything after JOB.py is the job's (even a name one of our options has)
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False},
)
def submit(
    ctx: typer.Context,
    job: Annotated[Path, typer.Argument(help="The job script (its own arguments follow it).", exists=True,
                                        dir_okay=False)],
    local: Annotated[bool, typer.Option("--local", help="Run in Spark's local mode, here.")] = False,
    master: Annotated[str, typer.Option(help="Spark master of a local run.")] = "local[*]",
    stack: Annotated[str, typer.Option(help="The stack whose outputs name the EMR application.")] = "Magnetar",
    application_id: Annotated[str | None, typer.Option(help="EMR Serverless application (else EmrApplicationId).")] = None,
    role_arn: Annotated[str | None, typer.Option(help="Job execution role (else EmrJobRoleArn).")] = None,
    bucket: Annotated[str | None, typer.Option(help="Bucket for the script and logs (else EmrJobsBucketName).")] = None,
    environment: Annotated[str | None, typer.Option(
        help="s3:// URI of the packaged environment (else EmrEnvironmentArchive; 'none' ships none).")] = None,
    name: Annotated[str | None, typer.Option(help="Job run name (default: the script's name).")] = None,
    conf: Annotated[list[str] | None, typer.Option("--conf", help="More Spark configuration, KEY=VALUE.")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the run to end; exit 1 unless it succeeds.")] = False,
) -> None:
    """Run JOB.py (followed by its arguments): with --local here, else on EMR Serverless."""
    if local:
        _submit_local(job, list(ctx.args), master)
        return
    settings = {"application_id": application_id, "role_arn": role_arn, "bucket": bucket, "environment": environment}
    if any(v is None for v in settings.values()):
        outputs = stack_outputs(stack)
        for option, output in OUTPUTS.items():
            if settings[option] is None:
                settings[option] = outputs.get(output)
        missing = [f"--{o.replace('_', '-')}" for o, v in settings.items() if not v]
        if missing:
            typer.echo(f"magnetar spark submit: {', '.join(missing)} not given and not in the outputs of stack "
                       f"{stack} (deploy it with -c emr=true, or pass them)", err=True)
            raise typer.Exit(2)
    run = start_job_run(job, list(ctx.args), application_id=str(settings["application_id"]),
                        role_arn=str(settings["role_arn"]), bucket=str(settings["bucket"]),
                        environment=None if settings["environment"] in (None, "none") else str(settings["environment"]),
                        name=name, conf=list(conf or []))
    app, run_id = run["applicationId"], run["jobRunId"]
    typer.echo(f"job run {run_id} started on application {app} ({run['name']})")
    typer.echo(f"  script: {run['entryPoint']}")
    typer.echo(f"  state:  aws emr-serverless get-job-run --application-id {app} --job-run-id {run_id}")
    typer.echo(f"  UI:     aws emr-serverless get-dashboard-for-job-run --application-id {app} --job-run-id {run_id}")
    typer.echo(f"  logs:   aws s3 ls --recursive {run['logUri']}applications/{app}/jobs/{run_id}/")
    if wait:
        state = wait_for(app, run_id)
        typer.echo(f"job run {run_id}: {state}")
        raise typer.Exit(0 if state == "SUCCESS" else 1)


def _submit_local(job: Path, args: list[str], master: str) -> None:
    try:
        from magnetar_spark._env import configure_python
    except ImportError as exc:
        typer.echo(f"magnetar spark submit: pyspark and magnetar_spark are needed: pip install 'magnetar[spark]' "
                   f"({exc})", err=True)
        raise typer.Exit(2) from None
    env = dict(os.environ)
    configure_python(env)
    env.setdefault("PYSPARK_SUBMIT_ARGS", f"--master {master} pyspark-shell")
    done = subprocess.run([sys.executable, str(job), *args], env=env, check=False)
    raise typer.Exit(done.returncode)


def stack_outputs(stack: str) -> dict[str, str]:
    """The stack's outputs by key ({} when there is no such stack)."""
    from botocore.exceptions import ClientError

    from magnetar.adapters.aws.clients import client

    try:
        stacks = client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    except ClientError:
        return {}
    return {o["OutputKey"]: o["OutputValue"] for s in stacks for o in s.get("Outputs", [])}


def spark_submit_parameters(environment: str | None, conf: list[str]) -> str:
    """`--conf` pairs: the packaged environment unpacked as ./environment on the driver and the
    executors and put on their PYTHONPATH (pyspark_magnetar is found there: no register call), then
    the caller's."""
    pairs: list[str] = []
    if environment:
        pairs += [f"spark.archives={environment}#environment",
                  "spark.emr-serverless.driverEnv.PYTHONPATH=./environment",
                  "spark.executorEnv.PYTHONPATH=./environment"]
    for item in conf:
        if "=" not in item or any(c.isspace() for c in item):
            # (EMR Serverless splits sparkSubmitParameters at spaces and passes quotes through as they are)
            raise typer.BadParameter(f"--conf takes KEY=VALUE without spaces, got {item!r}")
        pairs.append(item)
    return " ".join(f"--conf {p}" for p in pairs)


def start_job_run(job: Path, args: list[str], *, application_id: str, role_arn: str, bucket: str,
                  environment: str | None, name: str | None = None, conf: list[str] | None = None) -> dict[str, Any]:
    """Upload the script and start the run: what was started (ids, entry point, log URI)."""
    from magnetar.adapters.aws.clients import client

    parameters = spark_submit_parameters(environment, conf or [])  # checked before anything is uploaded
    run_name = name or job.stem
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    key = f"jobs/{run_name}-{stamp}/{job.name}"
    client("s3").put_object(Bucket=bucket, Key=key, Body=job.read_bytes())
    entry_point = f"s3://{bucket}/{key}"
    log_uri = f"s3://{bucket}/logs/"
    response = client("emr-serverless").start_job_run(
        applicationId=application_id,
        executionRoleArn=role_arn,
        name=run_name,
        jobDriver={"sparkSubmit": {"entryPoint": entry_point, "entryPointArguments": args,
                                   "sparkSubmitParameters": parameters}},
        configurationOverrides={"monitoringConfiguration": {"s3MonitoringConfiguration": {"logUri": log_uri}}},
    )
    return {"applicationId": response["applicationId"], "jobRunId": response["jobRunId"], "name": run_name,
            "entryPoint": entry_point, "logUri": log_uri}


def wait_for(application_id: str, run_id: str, poll_s: float = 10.0) -> str:
    """The run's final state, polling GetJobRun."""
    from magnetar.adapters.aws.clients import client

    emr = client("emr-serverless")
    while True:
        state = str(emr.get_job_run(applicationId=application_id, jobRunId=run_id)["jobRun"]["state"])
        if state in TERMINAL_STATES:
            return state
        time.sleep(poll_s)
