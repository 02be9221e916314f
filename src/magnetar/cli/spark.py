"""`magnetar spark submit`: run a Spark job against Magnetar.

`--local` runs the job script here, with this interpreter, in Spark's local mode, with the worker
Python set (PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON = this interpreter unless already set, and
`pyspark_magnetar` on the workers' path in an editable install), so `format("magnetar")` works with
no register call and no environment to set up. Without `--local` (EMR Serverless) it is not built
yet: see docs/spark.md for `aws emr-serverless start-job-run`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

spark_app = typer.Typer(help="Spark jobs reading and writing Magnetar topics.", no_args_is_help=True)


@spark_app.command(
    "submit", context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def submit(
    ctx: typer.Context,
    job: Annotated[Path, typer.Argument(help="The job script (its own arguments follow it).", exists=True,
                                        dir_okay=False)],
    local: Annotated[bool, typer.Option("--local", help="Run in Spark's local mode, here.")] = False,
    master: Annotated[str, typer.Option(help="Spark master of a local run.")] = "local[*]",
) -> None:
    """Run JOB.py (followed by its arguments) with the worker Python set correctly."""
    if not local:
        typer.echo("magnetar spark submit: only --local is available yet; on EMR Serverless use "
                   "`aws emr-serverless start-job-run` as shown in docs/spark.md", err=True)
        raise typer.Exit(2)
    try:
        from magnetar_spark._env import configure_python
    except ImportError as exc:
        typer.echo(f"magnetar spark submit: pyspark and magnetar_spark are needed: pip install 'magnetar[spark]' "
                   f"({exc})", err=True)
        raise typer.Exit(2) from None
    env = dict(os.environ)
    configure_python(env)
    env.setdefault("PYSPARK_SUBMIT_ARGS", f"--master {master} pyspark-shell")
    done = subprocess.run([sys.executable, str(job), *ctx.args], env=env, check=False)
    raise typer.Exit(done.returncode)
