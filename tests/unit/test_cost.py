"""The cost model: unit conversions, scaling, the target at 1 KB / batch 100, the CLI, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from magnetar.cli.cost import app
from magnetar.cost import (
    COMPONENTS,
    PRICES,
    PRICES_AS_OF,
    Workload,
    WorkloadError,
    apigw_units,
    compare,
    cost_of_measured_run,
    kinesis_ondemand_ingest_bytes,
    kinesis_put_payload_units,
    load_workload,
    monthly_cost,
    price_table,
    pulsar_sizing,
    rru,
    sqs_chunks,
    wru,
)

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "bench" / "workloads"
BASELINE = WORKLOADS / "baseline-1kb-batch100.yaml"
runner = CliRunner()


def baseline(**changes: object) -> Workload:
    return Workload.model_validate({**load_workload(BASELINE).model_dump(), **changes})


def flat(text: str) -> str:
    return " ".join(text.split())


# --- prices and units ------------------------------------------------------------------------


def test_every_price_has_a_unit_a_source_and_a_confirmation_status() -> None:
    assert PRICES_AS_OF >= "2026-01-01"
    for row in price_table():
        assert row["source"].startswith("https://aws.amazon.com/"), row
        assert row["checked"].startswith(("confirmed", "not confirmed")), row
        assert row["as_of"] == PRICES_AS_OF
    for key in (
        "apigw.http.request", "apigw.websocket.message", "lambda.request", "lambda.arm64.gb_second",
        "kinesis.ondemand.ingest_gb", "kinesis.provisioned.shard_hour", "dynamodb.ondemand.wru",
        "s3.put_request", "s3.standard.gb_month", "eventbridge.scheduler.invocation", "sqs.standard.request",
    ):
        assert key in PRICES


def test_tiers_apply_to_the_monthly_total() -> None:
    http = PRICES["apigw.http.request"]
    assert http.cost(300e6) == pytest.approx(300.0)
    assert http.cost(400e6) == pytest.approx(300.0 + 90.0)  # $0.90 per million above 300M
    assert http.cost(400e6, tiered=False) == pytest.approx(400.0)


def test_unit_conversions() -> None:
    assert (wru(1024), wru(1025), wru(400, transactional=True)) == (1, 2, 2)
    assert (rru(4096), rru(4097), rru(100, strongly_consistent=False)) == (1.0, 2.0, 0.5)
    assert (apigw_units(512 * 1024), apigw_units(512 * 1024 + 1)) == (1, 2)
    assert kinesis_ondemand_ingest_bytes(1122) == 2048  # records rounded up to 1 KB
    assert (kinesis_put_payload_units(25 * 1024), kinesis_put_payload_units(103_290)) == (1, 5)
    assert (sqs_chunks(10 * 1024), sqs_chunks(64 * 1024 + 1)) == (1, 2)


# --- scaling -----------------------------------------------------------------------------------


def test_doubling_the_rate_doubles_the_per_request_costs() -> None:
    one, two = monthly_cost(baseline()), monthly_cost(baseline(produce_rate_msgs_per_s=2000, topic_partitions=2))
    for mode in ("on_demand", "provisioned"):
        for step in ("produce", "consume"):
            for component in ("api_gateway", "lambda_requests", "lambda_compute", "dynamodb"):
                a, b = one.mode(mode).by_step[step][component], two.mode(mode).by_step[step][component]
                assert a > 0
                assert b == pytest.approx(2 * a, rel=1e-9), (mode, step, component)
    # the request counts per message do not change with the rate
    for op in ("dynamodb.UpdateItem", "kinesis.PutRecord", "dynamodb.PutItem"):
        assert two.requests_per_million_messages["on_demand"][op] == pytest.approx(
            one.requests_per_million_messages["on_demand"][op]
        )


def test_batch_1_costs_more_per_message_than_batch_100() -> None:
    batched = monthly_cost(baseline(topic_partitions=4))
    single = monthly_cost(baseline(batch_size=1, topic_partitions=4))
    for mode in ("on_demand", "provisioned"):
        assert single.mode(mode).usd_per_million_messages > 10 * batched.mode(mode).usd_per_million_messages
    assert single.requests_per_million_messages["on_demand"]["kinesis.PutRecord"] == pytest.approx(1e6)
    assert batched.requests_per_million_messages["on_demand"]["kinesis.PutRecord"] == pytest.approx(1e4)


def test_idle_consumers_cost_money_but_not_per_message() -> None:
    busy = monthly_cost(baseline())
    idle = monthly_cost(baseline(idle_consumer_hours_per_month=730))
    assert idle.provisioned.usd_per_million_messages == pytest.approx(busy.provisioned.usd_per_million_messages)
    assert idle.provisioned.total_usd - busy.provisioned.total_usd == pytest.approx(730 * idle.idle_usd_per_consumer_hour)
    # the SDK's default: a watch (connection minutes) and 400 looks an hour, no Lambda held while waiting
    assert 0.0005 < idle.idle_usd_per_consumer_hour < 0.002
    assert idle.websocket_idle_usd_per_consumer_hour < idle.idle_usd_per_consumer_hour / 10
    # delivery "poll": 180 polls an hour, each holding a 1 GB Lambda for 20 s: Lambda duration alone is ~$0.048/h
    polling = monthly_cost(baseline(idle_consumer_hours_per_month=730, parameters={"idle_watch": 0}))
    assert 0.045 < polling.idle_usd_per_consumer_hour < 0.07
    assert polling.idle_usd_per_consumer_hour > 30 * idle.idle_usd_per_consumer_hour


def test_measured_parameters_replace_modeled_ones() -> None:
    default = monthly_cost(baseline())
    bigger = monthly_cost(baseline(parameters={"cursor_item_bytes": 5000}))  # 5 WRU per cursor write instead of 2
    assert bigger.provisioned.components["dynamodb"] > default.provisioned.components["dynamodb"]
    assert bigger.provisioned.components["kinesis"] == pytest.approx(default.provisioned.components["kinesis"])


def test_pulsar_costs_a_fixed_monthly_amount() -> None:
    low, high = baseline(), baseline(produce_rate_msgs_per_s=4000, topic_partitions=4)
    a, b = compare(low).row("Pulsar"), compare(high).row("Pulsar")
    for line in ("ec2_zookeeper", "ec2_brokers", "ec2_bookies", "ebs_gp3"):
        assert a.lines[line] == pytest.approx(b.lines[line])
    assert b.usd_per_million_messages < a.usd_per_million_messages
    sizing = pulsar_sizing(load_workload(WORKLOADS / "high-rate.yaml"))
    assert sizing.bookie_type == "i3.4xlarge"  # ~8.3 TB at write quorum 2 over 3 bookies


# --- the target ------------------------------------------------------------------------------


def test_baseline_is_below_batched_sqs_with_provisioned_kinesis() -> None:
    w = load_workload(BASELINE)
    assert (w.message_bytes, w.batch_size, w.retention_hours) == (1024, 100, 24)
    report = monthly_cost(w)
    rows = compare(w, report)
    sqs = rows.row("SQS standard, batched").usd_per_million_messages
    assert sqs == pytest.approx(0.12)  # 3 requests per 10 messages at $0.40 per million
    assert report.provisioned.usd_per_million_messages < sqs
    # Kinesis on-demand's per-GB charges alone (1 write, 2 reads of every byte) exceed SQS's whole bill at 1 KB
    assert report.on_demand.usd_per_million_messages > sqs


def test_magnetar_components_are_the_issue_s_components() -> None:
    report = monthly_cost(load_workload(BASELINE))
    for mode in ("on_demand", "provisioned"):
        mc = report.mode(mode)
        assert set(mc.components) == set(COMPONENTS)
        assert sum(mc.components.values()) == pytest.approx(mc.monthly_usd)
        assert mc.monthly_usd == pytest.approx(sum(sum(s.values()) for s in mc.by_step.values()))
        assert all(v >= 0 for v in mc.components.values())


def test_a_measured_run_is_priced_like_the_model() -> None:
    """Feed the model's own request counts to cost_of_measured_run: the per-request components agree."""
    report = monthly_cost(load_workload(BASELINE))
    counts = report.requests_per_million_messages["on_demand"]
    broker = counts["lambda.Invoke.broker"]
    produce, receives = counts["kinesis.PutRecord"], counts["dynamodb.PutItem"]
    measured = cost_of_measured_run(
        {k: round(v) for k, v in counts.items() if not k.startswith(("lambda.", "apigateway."))},
        messages=1_000_000,
        message_bytes=1024,
        lambda_invocations={
            "magnetar-broker": round(broker),
            "magnetar-journal-consumer": round(counts["lambda.Invoke.journal_consumer"]),
        },
        lambda_ms={"magnetar-broker": (produce * 30 + receives * 100) / broker, "magnetar-journal-consumer": 100.0},
        seconds=1000.0,
        batch_size=100,
        apigw_requests=round(produce + 2 * receives),  # receives' responses are 2 metered units of 512 KB
    )
    model = report.on_demand
    for component in ("api_gateway", "lambda_requests", "dynamodb", "s3_requests"):
        expected = model.components[component] / (report.messages_per_month / 1e6)
        assert measured["by_mode"]["on_demand"]["usd_per_million_messages"][component] == pytest.approx(
            expected, rel=0.03
        ), component
    kinesis = model.components["kinesis"] / (report.messages_per_month / 1e6)
    assert measured["by_mode"]["on_demand"]["usd_per_million_messages"]["kinesis"] == pytest.approx(kinesis, rel=0.03)
    # the only top-level numbers are the two totals (magnetar perf prints every top-level number)
    numbers = {k: v for k, v in measured.items() if isinstance(v, int | float)}
    assert set(numbers) == {"on_demand_kinesis", "provisioned_kinesis"}
    assert numbers["provisioned_kinesis"] < numbers["on_demand_kinesis"]
    json.dumps(measured)  # JSON-ready


def test_a_measured_run_without_item_sizes_uses_documented_units() -> None:
    run = json.loads((ROOT / "bench" / "results" / "e2e-throughput-2x2-batch100.json").read_text())["end_to_end"]
    out = cost_of_measured_run(
        run["aws_requests"], messages=run["messages"], message_bytes=1024,
        lambda_invocations={"magnetar-broker": 321, "magnetar-journal-consumer": 5},
        lambda_ms={"magnetar-broker": 40.0, "magnetar-journal-consumer": 100.0}, seconds=run["seconds"],
    )
    assert out["assumptions"]["messages_per_entry"] == pytest.approx(100)  # 20,000 messages / 200 PutRecord
    assert out["assumptions"]["apigw_requests"] == 321  # one per broker invocation
    # 200 UpdateItem x 1 + 121 PutItem x 2 + 5 TransactWriteItems x 4 WRU; 132 BatchGetItem x 3 RRU
    expected_ddb = (200 + 242 + 20) * 0.625e-6 + 132 * 3 * 0.125e-6
    assert out["by_mode"]["provisioned"]["usd_per_million_messages"]["dynamodb"] == pytest.approx(expected_ddb * 50)


def test_a_measured_run_on_enhanced_fan_out_prices_what_read_the_journal() -> None:
    """The defaults: the journal consumer reads through enhanced fan-out (its reads counted as
    `(fan-out)`) and consumers read sealed segments from S3, not the journal: the mapping's bytes
    are billed at the fan-out prices and its consumer-shard hours, and no tail retrieval is."""
    base = {"dynamodb.UpdateItem": 100, "kinesis.PutRecord": 100, "s3.PutObject": 20, "s3.GetObject": 20}
    run = {"messages": 100_000, "message_bytes": 1024, "seconds": 3600.0, "batch_size": 100,
           "lambda_invocations": {"magnetar-broker": 100}, "lambda_ms": {"magnetar-broker": 30.0}}
    efo = cost_of_measured_run({**base, "kinesis.GetRecords(fan-out)": 3000}, **run)  # type: ignore[arg-type]
    shared = cost_of_measured_run({**base, "kinesis.GetRecords": 3000}, **run)  # type: ignore[arg-type]
    hour = 1e6 / run["messages"]  # one hour's worth, per million messages
    efo_kinesis = efo["by_mode"]["provisioned"]["usd_per_million_messages"]["kinesis"]
    shared_kinesis = shared["by_mode"]["provisioned"]["usd_per_million_messages"]["kinesis"]
    gb = 100 * (100 * (1024 + 8) + 100) / 2**30  # the records the mapping read
    assert efo_kinesis - shared_kinesis == pytest.approx((0.015 + 0.013 * gb) * hour, rel=0.05)
    od_efo = efo["by_mode"]["on_demand"]["usd_per_million_messages"]["kinesis"]
    od_shared = shared["by_mode"]["on_demand"]["usd_per_million_messages"]["kinesis"]
    assert od_efo < od_shared  # 1 read at $0.05/GB, against 2 at $0.04 (the mapping and a tailing consumer)


# --- the CLI -----------------------------------------------------------------------------------


def test_cli_prints_the_headline_and_writes_valid_json(tmp_path: Path) -> None:
    out = tmp_path / "cost.json"
    result = runner.invoke(app, ["--workload", str(BASELINE), "--json", str(out)])
    assert result.exit_code == 0, result.output
    text = flat(result.output)
    assert "USD per million messages" in text
    assert "below batched SQS" in text
    assert "SQS standard, batched" in text and "Pulsar on EC2" in text
    data = json.loads(out.read_text())
    figures = data["headline"]["usd_per_million_messages"]
    assert figures["magnetar_provisioned_kinesis"] < figures["sqs_batched"]
    assert set(data["report"]["provisioned"]["components"]) == set(COMPONENTS)
    assert {r["name"] for r in data["comparison"]} >= {"SQS standard, unbatched", "Kinesis Data Streams directly, provisioned"}
    assert data["prices"][0]["source"].startswith("https://")


def test_cli_json_to_stdout() -> None:
    result = runner.invoke(app, ["--workload", str(WORKLOADS / "fanout-4-subs.yaml"), "--json", "-"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["report"]["workload"]["subscriptions"] == 4
    sqs = next(r for r in data["comparison"] if r["name"].startswith("SQS standard, batched"))
    assert "sns_publish" in sqs["lines"]  # fan-out through SNS to one queue per subscription


@pytest.mark.parametrize("name", ["baseline-1kb-batch100", "small-unbatched", "fanout-4-subs", "high-rate"])
def test_every_workload_file_runs(name: str) -> None:
    result = runner.invoke(app, ["--workload", str(WORKLOADS / f"{name}.yaml")])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("name: x\nmessage_bytes: -1\nbatch_size: 1\nproduce_rate_msgs_per_s: 1\n", "message_bytes: Input should be greater than 0"),
        ("name: x\nmessage_bytes: 10\nbatch_size: 1\n", "produce_rate_msgs_per_s: Field required"),
        ("name: x\nmessage_bytes: 10\nbatchsize: 1\nbatch_size: 1\nproduce_rate_msgs_per_s: 1\n", "batchsize: Extra inputs are not permitted"),
        (
            "name: x\nmessage_bytes: 10\nbatch_size: 1\nproduce_rate_msgs_per_s: 1\nparameters: {cursor_bytes: 3}\n",
            "unknown parameter(s) cursor_bytes",
        ),
        ("name: x\nmessage_bytes: 100000\nbatch_size: 100\nproduce_rate_msgs_per_s: 1\n", "1 MiB Kinesis record limit"),
        ("- just\n- a list\n", "expected a mapping"),
        ("name: [unclosed\n", "not valid YAML"),
    ],
)
def test_a_bad_workload_file_gives_a_clear_error(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(WorkloadError) as info:
        load_workload(path)
    assert expected in str(info.value)
    assert str(path) in str(info.value)
    result = runner.invoke(app, ["--workload", str(path)])
    assert result.exit_code == 1
    assert expected in flat(result.output)
    assert "Traceback" not in result.output


def test_a_missing_workload_file_gives_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["--workload", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 1
    assert "cannot read" in flat(result.output)


def test_kinesis_read_limits_are_flagged() -> None:
    """Four subscriptions tailing one partition exceed a shard's 5 GetRecords/s and 2 MiB/s; four partitions do not."""
    one = monthly_cost(baseline(subscriptions=4))
    assert any("GetRecords/s" in w for w in one.warnings)
    assert any("MiB/s read" in w for w in one.warnings)
    four = monthly_cost(load_workload(WORKLOADS / "fanout-4-subs.yaml"))
    assert not any("GetRecords/s" in w or "MiB/s read" in w for w in four.warnings)


def test_compression_shrinks_the_per_byte_charges_only() -> None:
    raw = monthly_cost(baseline())
    packed = monthly_cost(baseline(parameters={"compression_ratio": 0.4}))
    assert packed.on_demand.components["kinesis"] < 0.5 * raw.on_demand.components["kinesis"]
    assert packed.provisioned.components["dynamodb"] == pytest.approx(raw.provisioned.components["dynamodb"])
    assert packed.on_demand.components["s3_storage"] == pytest.approx(0.4 * raw.on_demand.components["s3_storage"], rel=0.01)


def test_enhanced_fan_out_for_the_journal_consumer() -> None:
    """EFO moves the mapping's bytes to the EFO retrieval price (on-demand: $0.05 instead of $0.04 per GB) and,
    in provisioned mode, adds consumer-shard hours and $0.013 per GB; it frees the shards' shared reads."""
    for key in ("kinesis.ondemand.efo_retrieval_gb", "kinesis.provisioned.efo_consumer_shard_hour", "kinesis.provisioned.efo_retrieval_gb"):
        assert PRICES[key].source == "https://aws.amazon.com/kinesis/data-streams/pricing/"
        assert PRICES[key].checked.startswith("confirmed")
    assert (PRICES["kinesis.ondemand.efo_retrieval_gb"].usd, PRICES["kinesis.provisioned.efo_consumer_shard_hour"].usd,
            PRICES["kinesis.provisioned.efo_retrieval_gb"].usd) == (0.05, 0.015, 0.013)
    shared = monthly_cost(baseline())
    assert baseline().journal_consumer_reads == "shared"
    # at the polling mapping's cadence (one seal a second: 1000 / (960 + 40 ms)), only the reads differ:
    # pushed instead of polled, and the held seal's read-ahead (GetRecords: $0.04 per GB on demand)
    efo = monthly_cost(baseline(journal_consumer_reads="enhanced_fan_out", parameters={"seal_latency_ms": 960}))
    w = baseline()
    record_gb = w.entries_per_s * (w.batch_size * (w.message_bytes + 8) + 100) * w.hours_per_month * 3600 / 2**30
    shards = efo.provisioned.kinesis_shards
    assert efo.on_demand.by_step["seal"]["kinesis"] == pytest.approx((0.05 + 0.04) * record_gb)
    assert efo.on_demand.monthly_usd - shared.on_demand.monthly_usd == pytest.approx(0.05 * record_gb)
    assert efo.provisioned.monthly_usd - shared.provisioned.monthly_usd == pytest.approx(
        shards * w.hours_per_month * 0.015 + 0.013 * record_gb
    )
    assert efo.requests_per_million_messages["on_demand"]["kinesis.SubscribeToShard"] > 0
    assert (  # one GetRecords per seal (the read-ahead) instead of the mapping's polls
        efo.requests_per_million_messages["on_demand"]["kinesis.GetRecords"]
        < shared.requests_per_million_messages["on_demand"]["kinesis.GetRecords"]
    )
    assert "kinesis.SubscribeToShard" not in shared.requests_per_million_messages["on_demand"]
    # at the default seal latency target a busy shard is sealed ~4.2 times a second
    paced = monthly_cost(baseline(journal_consumer_reads="enhanced_fan_out"))
    seals_per_s = paced.requests_per_million_messages["on_demand"]["s3.PutObject"] * w.produce_rate_msgs_per_s / 1e6
    assert seals_per_s == pytest.approx(1000 / (200 + 40))
    # the mapping no longer polls the shard: one GetRecords/s less, and its bytes leave the shared 2 MiB/s
    polled = monthly_cost(baseline(subscriptions=4)).warnings
    pushed = monthly_cost(baseline(subscriptions=4, journal_consumer_reads="enhanced_fan_out")).warnings
    assert any("~9.0 GetRecords/s on a busy shard (event-source mapping + tail reads" in t for t in polled)
    assert any("~8.0 GetRecords/s on a busy shard (tail reads" in t for t in pushed)
    assert any("~4.93 MiB/s read" in t for t in polled) and any("~3.94 MiB/s read" in t for t in pushed)
    with pytest.raises(ValueError, match="journal_consumer_reads"):
        baseline(journal_consumer_reads="efo")


def test_dynamodb_item_sizes_follow_its_billing_rules() -> None:
    from magnetar.cost.units import wru
    from magnetar.local.aws_limits import item_size as dynamodb_item_bytes  # as the emulator bills them

    item = {"pk": {"S": "TP#a"}, "n": {"N": "123"}, "b": {"B": b"\x00" * 10}, "ok": {"BOOL": True},
            "l": {"L": [{"S": "xy"}]}, "ss": {"SS": ["a", "bc"]}}
    # names 2+1+1+2+1+2, values 4 + (2+1) + 10 + 1 + (3+1+2) + 3
    assert dynamodb_item_bytes(item) == 9 + 4 + 3 + 10 + 1 + 6 + 3
    assert wru(dynamodb_item_bytes({"k": {"S": "x" * 1100}})) == 2
    assert dynamodb_item_bytes({"b": {"B": "AAAAAAAAAAAAAA=="}}) == 1 + 10  # base64, as on the wire


# --- logs and traces ---------------------------------------------------------------------------


def test_traces_are_priced_only_when_the_stack_traces_actively() -> None:
    """Lambda's sampling records the first invocation each second and 5 % of the rest, per function;
    at $5 per million traces. The stack's default (pass-through) records none unasked."""
    run = {"messages": 360_000, "message_bytes": 1024, "seconds": 3600.0, "batch_size": 20,
           "lambda_invocations": {"magnetar-broker": 36_000, "magnetar-journal-consumer": 3_600},
           "lambda_ms": {"magnetar-broker": 30.0, "magnetar-journal-consumer": 100.0}}
    base = {"dynamodb.UpdateItem": 18_000, "kinesis.PutRecord": 18_000}
    quiet = cost_of_measured_run(base, **run)  # type: ignore[arg-type]
    traced = cost_of_measured_run(base, tracing="active", **run)  # type: ignore[arg-type]
    assert quiet["by_mode"]["provisioned"]["usd_per_million_messages"]["xray"] == 0
    # broker 10/s: 1 + 0.05 x 9 = 1.45/s; journal consumer 1/s: 1/s; maintenance 1/min: 1/min
    traces = (1.45 + 1.0) * 3600 + 60
    per_million = traces * 5.0 / 1e6 * (1e6 / 360_000)
    assert traced["by_mode"]["provisioned"]["usd_per_million_messages"]["xray"] == pytest.approx(per_million)
    assert traced["provisioned_kinesis"] - quiet["provisioned_kinesis"] == pytest.approx(per_million)


def test_the_model_prices_traces_and_platform_logs_when_asked() -> None:
    default = monthly_cost(baseline())
    traced = monthly_cost(baseline(parameters={"xray_active": 1}))
    logged = monthly_cost(baseline(parameters={"log_bytes_per_invocation": 300}))
    assert default.provisioned.components["xray"] == 0
    assert default.provisioned.components["cloudwatch_logs"] == 0  # the stack logs from WARN: no platform lines
    assert traced.provisioned.components["xray"] > 0
    assert logged.provisioned.components["cloudwatch_logs"] > 0
    assert traced.provisioned.components["dynamodb"] == pytest.approx(default.provisioned.components["dynamodb"])
