"""CDK entry point (`cdk.json`: `python infra/app.py`).

Puts `<repo>/src` on sys.path so the app runs without installing magnetar, and builds the core
layer with --no-deps when it is missing so `cdk synth` never fails on an absent asset directory
(a deploy needs the full build: `python layers/build.py`).

cdk-nag's AwsSolutions pack checks every synthesis: an unacknowledged finding fails `cdk synth` and
`cdk deploy` (the stack acknowledges its few exceptions itself, with reasons). `-c nag=false` skips it.

Settings come as context (see MagnetarStack): `-c superuserRoles=admin,arn:aws:iam::111122223333:role/ops`,
`-c authorizerCacheTtlSeconds=300`, `-c throttleRateLimit=1000 -c throttleBurstLimit=2000`,
`-c logRetentionDays=30`, `-c iteratorAgeAlarmSeconds=300`, `-c alarmTopicArn=arn:aws:sns:...`,
`-c apiGatewayCloudWatchRole=false` (the account already has API Gateway's logging role),
`-c journalShards=N`, `-c journalFanOut=false` (the journal consumer polls the stream instead of
enhanced fan-out, and consumers read the journal's tail again), `-c clusterName=NAME` (default: the
region, `standalone` for this environment-agnostic stack).

An instance across regions (magnetar_cdk/instance.py): `-c regions=us-east-1,eu-west-1` makes one
stack per region, `<stackName>-<region>` (account: CDK_DEFAULT_ACCOUNT), the first one home of the
configuration table; `-c clusterNames=east,west` names their clusters (default: the regions),
`-c instanceName=NAME` the instance (the table is `magnetar-config-<instanceName>`), and
`-c replicationBacklogAlarm=N -c replicationDelayAlarmSeconds=S` set the replication alarms.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[1]
for path in (REPO_ROOT / "src", Path(__file__).resolve().parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import aws_cdk as cdk  # noqa: E402

from magnetar_stack import Instance, MagnetarStack, context_flag, instance_stacks  # noqa: E402

STACK_NAME = "Magnetar"


def load_layer_builder() -> ModuleType:
    """Import layers/build.py by path: `layers` is not a package and `build` is a PyPI name."""
    spec = importlib.util.spec_from_file_location("magnetar_layer_build", REPO_ROOT / "layers" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    layer_dir: Path = load_layer_builder().ensure_built()
    app = cdk.App()
    stack_name = app.node.try_get_context("stackName") or STACK_NAME
    description = "Magnetar: Apache Pulsar's messaging model on Lambda, DynamoDB, S3 and Kinesis"
    regions = str(app.node.try_get_context("regions") or "")
    if regions:
        instance = Instance.parse(
            regions,
            str(app.node.try_get_context("clusterNames") or ""),
            str(app.node.try_get_context("instanceName") or ""),
            str(app.node.try_get_context("remoteApiIds") or ""),
        )
        instance_stacks(app, stack_name, instance, account=os.environ.get("CDK_DEFAULT_ACCOUNT"),
                        layer_dir=layer_dir, description=f"{description} (instance {instance.name})")
    else:
        # No env: an environment-agnostic stack synthesizes offline and deploys to whatever account
        # and region the CLI credentials select.
        MagnetarStack(app, stack_name, layer_dir=layer_dir, description=description)
    nag = app.node.try_get_context("nag")
    if nag is None or context_flag(nag):
        from cdk_nag import AwsSolutionsChecks

        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()


if __name__ == "__main__":
    main()
