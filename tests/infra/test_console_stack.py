"""The optional web console on AWS (infra/magnetar_cdk/console.py): `MagnetarStack(console=True)`, as
`cdk deploy -c console=true` makes it. One synthesis with cdk-nag's AwsSolutions pack."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from infra_helpers import REPO_ROOT, synthesis_inputs

pytest.importorskip("aws_cdk")

from aws_cdk import App
from aws_cdk.assertions import Match, Template

pytestmark = pytest.mark.cdk


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory,
                nag_report: Callable[[App, Path], list[dict[str, Any]]]) -> tuple[Template, list[Any], Path]:
    """(the template, cdk-nag's unacknowledged findings, cdk.out) of a stack with the console, on
    the context flag as the command line gives it."""
    layer_dir, stack_module, context = synthesis_inputs(tmp_path_factory, "layer-console")
    outdir = tmp_path_factory.mktemp("cdk.out-console")
    app = App(context={**context, "console": "true"}, outdir=str(outdir))
    stack_module.MagnetarStack(app, "MagnetarConsole", layer_dir=layer_dir)
    findings = nag_report(app, outdir)
    template = Template.from_json(json.loads((outdir / "MagnetarConsole.template.json").read_text()))
    return template, findings, outdir


def test_cdk_nag_finds_nothing_unacknowledged(synthesized: tuple[Template, list[Any], Path]) -> None:
    _, findings, _ = synthesized
    assert findings == []


def test_a_private_bucket_read_by_cloudfront_through_origin_access_control_over_https_only(
        synthesized: tuple[Template, list[Any], Path]) -> None:
    template, _, _ = synthesized
    template.has_resource_properties("AWS::S3::Bucket", {
        "PublicAccessBlockConfiguration": {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                                           "IgnorePublicAcls": True, "RestrictPublicBuckets": True},
        "BucketEncryption": Match.any_value(),
    })
    template.resource_count_is("AWS::CloudFront::OriginAccessControl", 1)
    distributions = [d["Properties"]["DistributionConfig"]
                     for d in template.find_resources("AWS::CloudFront::Distribution").values()]
    (console,) = [d for d in distributions if d.get("DefaultRootObject") == "index.html"]
    behavior = console["DefaultCacheBehavior"]
    assert behavior["ViewerProtocolPolicy"] == "https-only"
    assert "ResponseHeadersPolicyId" in behavior
    assert "OriginAccessControlId" in json.dumps(console["Origins"])
    policies = [p["Properties"]["PolicyDocument"]["Statement"]
                for p in template.find_resources("AWS::S3::BucketPolicy").values()]
    reads = [s for statements in policies for s in statements
             if s.get("Principal") == {"Service": "cloudfront.amazonaws.com"}]
    assert reads and all("AWS:SourceArn" in json.dumps(s["Condition"]) for s in reads)  # this distribution only
    assert "ConsoleUrl" in template.find_outputs("*")


def test_config_json_carries_the_api_url_written_at_deploy_time(
        synthesized: tuple[Template, list[Any], Path]) -> None:
    template, _, outdir = synthesized
    deployments = template.find_resources("Custom::CDKBucketDeployment")
    assert len(deployments) == 1
    (deployment,) = deployments.values()
    props = deployment["Properties"]
    assert len(props["SourceObjectKeys"]) == 2  # the console's files and config.json
    markers = json.dumps(props.get("SourceMarkers", []))
    assert "HttpApi" in markers  # the API's URL, resolved at deploy time into config.json
    assert props["DistributionPaths"] == ["/*"]
    assets = json.loads(next(outdir.glob("MagnetarConsole.assets.json")).read_text())["files"]
    staged = [outdir / a["source"]["path"] for a in assets.values() if a["source"].get("packaging") == "zip"]
    assert any((d / "index.html").is_file() and (d / "vendor" / "preact.mjs").is_file() for d in staged if d.is_dir())
    assert not (REPO_ROOT / "console" / "config.json").exists()  # never committed: made per deployment


def test_the_http_api_allows_the_console_origin_and_keeps_preflights_off_the_authorizer(
        synthesized: tuple[Template, list[Any], Path]) -> None:
    template, _, _ = synthesized
    apis = {k: v["Properties"] for k, v in template.find_resources("AWS::ApiGatewayV2::Api").items()
            if v["Properties"].get("ProtocolType") == "HTTP"}
    cors = apis["HttpApi"]["CorsConfiguration"]
    assert "ConsoleDistribution" in json.dumps(cors["AllowOrigins"]) and "*" not in json.dumps(cors["AllowOrigins"])
    assert set(cors["AllowHeaders"]) == {"authorization", "content-type"}
    assert "CorsConfiguration" not in apis["IamHttpApi"]  # browsers do not sign with SigV4
    routes = [r["Properties"] for r in template.find_resources("AWS::ApiGatewayV2::Route").values()]
    (preflight,) = [r for r in routes if r["RouteKey"] == "OPTIONS /{proxy+}"]
    assert preflight.get("AuthorizationType", "NONE") == "NONE"
    assert all(r.get("AuthorizationType") == "CUSTOM" for r in routes
               if r["RouteKey"] == "$default" and "HttpApi" in json.dumps(r["ApiId"]) and "Iam" not in json.dumps(r["ApiId"]))


def test_without_the_flag_there_is_no_console(tmp_path_factory: pytest.TempPathFactory) -> None:
    layer_dir, stack_module, context = synthesis_inputs(tmp_path_factory, "layer-no-console")
    app = App(context=context, outdir=str(tmp_path_factory.mktemp("cdk.out-no-console")))
    stack = stack_module.MagnetarStack(app, "MagnetarPlain", layer_dir=layer_dir)
    template = Template.from_stack(stack)
    assert stack.console is None
    template.resource_count_is("Custom::CDKBucketDeployment", 0)
    assert "CorsConfiguration" not in json.dumps(template.find_resources("AWS::ApiGatewayV2::Api"))
