"""The stack's identity: logical ids, resource types, outputs and cdk-nag acknowledgements.

infra/magnetar_stack.py composes resources made by infra/magnetar_cdk/ (one module per
responsibility), always in the stack's own scope. A refactoring that moved a resource under a new
construct level would change its logical id, and CloudFormation would replace it on the next deploy
(the retained table and bucket would be orphaned, with their data). This test compares the
synthesized stack with the committed snapshot stack_snapshot.json; asset hashes are left out, as
they follow the code. After an intended change of the stack, regenerate the snapshot with
`MAGNETAR_UPDATE_STACK_SNAPSHOT=1 pytest tests/infra/test_stack_layout.py` and review its diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from infra_helpers import synthesis_inputs

pytest.importorskip("aws_cdk")

from aws_cdk import App
from aws_cdk.assertions import Template

REPO_ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = Path(__file__).with_name("stack_snapshot.json")
MAX_MODULE_LINES = 500  # the team's limit: a module past it is split by responsibility

pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module")
def identity(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Synthesize the stack as `cdk synth` does (cdk.json's context) and reduce it to its identity."""
    layer_dir, stack_module, context = synthesis_inputs(tmp_path_factory)
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = App(context=context, outdir=str(outdir))
    stack = stack_module.MagnetarStack(app, "Magnetar", layer_dir=layer_dir)
    template = Template.from_stack(stack).to_json()
    metadata = json.loads((outdir / "Magnetar.metadata.json").read_text())
    acknowledgements = {
        path: sorted(
            rule.removeprefix("Annotation::")
            for entry in entries
            if entry["type"] == "aws:cdk:acknowledged-rules"
            for rule in entry["data"]
        )
        for path, entries in metadata.items()
    }
    return {
        "resources": {logical_id: r["Type"] for logical_id, r in template["Resources"].items()},
        "outputs": sorted(template.get("Outputs", {})),
        "acknowledgements": {path: rules for path, rules in sorted(acknowledgements.items()) if rules},
    }


def test_stack_identity_matches_the_snapshot(identity: dict[str, Any]) -> None:
    if os.environ.get("MAGNETAR_UPDATE_STACK_SNAPSHOT"):
        SNAPSHOT.write_text(json.dumps(identity, indent=1, sort_keys=True) + "\n")
    expected = json.loads(SNAPSHOT.read_text())
    assert identity["resources"] == expected["resources"], "logical ids or types changed"
    assert identity["outputs"] == expected["outputs"]
    assert identity["acknowledgements"] == expected["acknowledgements"], "cdk-nag acknowledgements changed"


def test_stateful_resources_keep_their_ids(identity: dict[str, Any]) -> None:
    """The resources holding data are top-level, pinned ids (replacing them would lose data)."""
    resources = identity["resources"]
    assert resources["MetadataTable"] == "AWS::DynamoDB::Table"
    assert resources["SegmentBucket"] == "AWS::S3::Bucket"
    assert resources["JournalStream"] == "AWS::Kinesis::Stream"
    assert resources["TokenKeysSecret"] == "AWS::SecretsManager::Secret"


@pytest.mark.parametrize(
    "module",
    sorted(p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "infra").rglob("*.py")),
)
def test_infra_modules_stay_small(module: str) -> None:
    lines = len((REPO_ROOT / module).read_text().splitlines())
    assert lines < MAX_MODULE_LINES, f"{module}: {lines} lines; split it by responsibility"
