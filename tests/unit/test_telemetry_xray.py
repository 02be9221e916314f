"""The X-Ray side of the telemetry adapter: a traced invocation's spans become subsegments of its
segment, annotated, and the trace context the doors stamp on messages is the current span's.

Run in a process of its own: Powertools' Tracer and the X-Ray recorder are configured process-wide."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent('''
    import json, os
    os.environ["MAGNETAR_TRACING"] = "on"  # outside Lambda: a segment per invocation
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
    from aws_xray_sdk.core import xray_recorder

    class Capture:  # the emitter: what would go to the X-Ray daemon
        sent = []
        def send_entity(self, entity): self.sent.append(json.loads(entity.serialize()))
        def set_daemon_address(self, address): pass

    capture = Capture()
    xray_recorder.configure(emitter=capture)
    from magnetar.adapters.aws.telemetry import LambdaTelemetry, aws_telemetry
    telemetry, seen = LambdaTelemetry("magnetar-broker"), {}

    @telemetry.instrument
    def handler(event, context):
        tracer = aws_telemetry().tracer
        seen["active"] = tracer.active
        with tracer.span("publish") as span:
            span.annotate("namespace", "public/default")
            seen["traceparent"], seen["span"] = tracer.traceparent(), span.traceparent
        return {}

    class Context:
        function_name = "magnetar-broker"

    handler({}, Context())
    print(json.dumps({"seen": seen, "sent": capture.sent}))
''')


def test_spans_are_subsegments_of_the_invocations_segment() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "AWS_DEFAULT_REGION": "us-east-1"})
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    seen, sent = result["seen"], {e["name"]: e for e in result["sent"]}
    assert seen["active"] is True
    publish, handler, segment = sent["publish"], sent["## handler"], sent["magnetar-broker"]
    assert publish["annotations"] == {"namespace": "public/default"}
    assert publish["parent_id"] == handler["id"] and handler["parent_id"] == segment["id"]
    trace_id = publish["trace_id"].replace("1-", "", 1).replace("-", "")
    assert seen["traceparent"] == seen["span"] == f"00-{trace_id}-{publish['id']}-01"
