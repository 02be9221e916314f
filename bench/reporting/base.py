"""What every block of the report shares: the results it reads, number formats, Markdown tables,
and the configuration a run was measured at."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from magnetar.client.producer import DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS
from magnetar.core.ledger.pacing import DEFAULT_SEAL_LATENCY_MS

FAN_OUT = ("kinesis.GetRecords(fan-out)", "kinesis.GetShardIterator(fan-out)")
FAN_OUT_READS = "kinesis.GetRecords(fan-out)"  # what bench/message_cost.py leaves out of "without fan-out reads"
MIB = 1024 * 1024

TODAY = "today's defaults"
# before: producer requests of up to 256 KiB, unpaced until the first refusal, the next seal
# predicted from the last interval, acknowledgements written by every last look
REQUESTS_256_KIB = "256 KiB requests"
PREVIOUS_SEAL_LATENCY_MS = 250
PREVIOUS = f"seal target {PREVIOUS_SEAL_LATENCY_MS} ms"
FORMER_DELAY_MS = 50
FORMER = f"producer delay {FORMER_DELAY_MS} ms"


@dataclass(frozen=True)
class Era:
    """The defaults `magnetar perf` ran at from `since` on (a UTC instant), and their label."""

    since: str
    label: str
    delay_ms: int  # the producers' batching delay
    seal_latency_ms: int


# newest first; a run made before the last is labelled with what the caller says it was measured at
ERAS = (
    Era("2026-11-30T08:40:00Z", TODAY, DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS, DEFAULT_SEAL_LATENCY_MS),
    Era("2026-11-30T05:57:00Z", REQUESTS_256_KIB, DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS, DEFAULT_SEAL_LATENCY_MS),
    Era("2026-11-29T06:17:00Z", PREVIOUS, DEFAULT_BATCHING_MAX_PUBLISH_DELAY_MS, PREVIOUS_SEAL_LATENCY_MS),
    Era("2026-11-28T15:29:00Z", FORMER, FORMER_DELAY_MS, PREVIOUS_SEAL_LATENCY_MS),
)
DEFAULT_ERAS = tuple(e.label for e in ERAS)  # the labels of `magnetar perf` runs, by when they were made
UNPACED = "unpaced seals"  # limits on, fan-out, sealed reads; every journal batch sealed at once, producers at 10 ms
TAIL_READS = "tail reads, limits off"  # limits off, the mapping polling once a second, consumers on the journal's tail


class ReportError(Exception):
    """The document or the results do not fit the report (a missing file, an unknown block)."""


@dataclass
class Results:
    """The JSON files of bench/results, read once each, and the names the report cited."""

    root: Path
    cited: set[str] = field(default_factory=set)
    _cache: dict[str, Any] = field(default_factory=dict)

    def load(self, name: str) -> Any:
        if name not in self._cache:
            path = self.root / name
            if not path.is_file():
                raise ReportError(f"bench/results/{name} is missing")
            self._cache[name] = json.loads(path.read_text())
        self.cited.add(name)
        return self._cache[name]

    def exists(self, name: str) -> bool:
        return (self.root / name).is_file()


Block = Callable[[Results], str]


# --- numbers -----------------------------------------------------------------------------------
def n(x: float | None, digits: int = 0) -> str:
    """1,234 or 1,234.5; a dash for no value."""
    if x is None:
        return "—"
    return f"{x:,.{digits}f}"


def ratio(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:.3f}" if abs(x) < 0.1 else f"{x:.2f}"


def usd(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "—"
    return "$0" if x == 0 else f"${x:,.{digits}f}"


def pair(a: float | None, b: float | None, digits: int = 0) -> str:
    return f"{n(a, digits)} / {n(b, digits)}"


def pct(d: dict[str, Any], *keys: str, digits: int = 0) -> str:
    """Percentiles of a latency dict: "p50 / p99"."""
    return " / ".join(n(d.get(k), digits) for k in keys)


def yes_no(ok: bool) -> str:
    return "yes" if ok else "**no**"


def bold(text: str) -> str:
    return f"**{text}**"


# --- Markdown ------------------------------------------------------------------------------------
def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def commands(*lines: str) -> str:
    return "```bash\n" + "\n".join(lines) + "\n```"


def runs(count: int) -> str:
    return f"{count:,} run" + ("" if count == 1 else "s")


def sources(*names: str) -> str:
    return "Runs: " + ", ".join(f"`bench/results/{name}`" for name in names) + "."


def join(*parts: str) -> str:
    return "\n\n".join(p for p in parts if p)


# --- runs of `magnetar perf` --------------------------------------------------------------------
def messages(run: dict[str, Any]) -> int:
    return int(run.get("received") or run.get("acked") or run.get("messages") or 0)


def per_1000(count: float, run: dict[str, Any]) -> float:
    return count * 1000 / max(messages(run), 1)


def billed_per_1000(run: dict[str, Any]) -> float:
    """AWS requests per 1,000 messages without the journal consumer's fan-out reads (billed per
    consumer-shard hour and GB, not per request)."""
    return per_1000(run["aws_requests_total"] - run["aws_requests"].get(FAN_OUT_READS, 0), run)


def raw_limit(run: dict[str, Any]) -> float | None:
    limit = (run.get("limit") or {}).get("kinesis_put_records") or {}
    value = limit.get("per_s")
    return float(value) if value is not None else None


def usd_per_million(run: dict[str, Any], mode: str = "provisioned_kinesis") -> float | None:
    cost = run.get("cost_usd_per_million_msgs")
    if not isinstance(cost, dict) or cost.get(mode) is None:
        return None
    return float(cost[mode])


def when(run: Any) -> str:
    if isinstance(run, dict):
        return str(run.get("when") or run.get("started_at") or "")
    return ""


def era_of(run: Any) -> Era | None:
    """The defaults a run was made at, by its time (None: older than every era, or no time)."""
    stamp = when(run).replace("+00:00", "Z")
    return next((e for e in ERAS if stamp and stamp >= e.since), None)


def measured_at(run: Any, before: str) -> str:
    """`before` for a run made before today's defaults; for a newer `magnetar perf` run, today's
    defaults and whatever the run set otherwise."""
    era = era_of(run)
    if era is None:
        return before
    if not isinstance(run, dict) or "config" not in run:
        return era.label
    label = era.label
    if run.get("seal_latency_ms") is not None and era.label == PREVIOUS:
        label = REQUESTS_256_KIB  # the seal target, the one default that differed then, was the run's own
    config, differences = run["config"], []
    if config.get("batch_max_delay_ms", era.delay_ms) != era.delay_ms:
        differences.append(f"producer delay {config['batch_max_delay_ms']} ms")
    if config.get("receive_wait_ms", 100) != 100:
        differences.append(f"receive wait {config['receive_wait_ms']} ms")
    if run.get("journal_batching_window_s"):
        differences.append(f"{run['journal_batching_window_s']} s journal batching window")
    if run.get("seal_latency_ms") is not None:
        differences.append(f"seal latency target {run['seal_latency_ms']} ms")
    return ", ".join([label, *differences])


def seal_target_of(run: Any) -> int:
    """The seal latency target (ms) a run was made at: its own, or the default of its time (0, every
    batch sealed at once, before the target existed)."""
    own = run.get("seal_latency_ms") if isinstance(run, dict) else None
    if own is not None:
        return int(own)
    era = era_of(run)
    return era.seal_latency_ms if era is not None else 0


def scale_measured_at(run: dict[str, Any], before: str) -> str:
    """The same for bench/scale_topics.py's files, whose `local_up` names the cluster's options."""
    label = measured_at({"when": run.get("when")}, before)
    extra = str(run.get("local_up", "")).replace("magnetar local up (defaults)", "").strip()
    return f"{label}, `{extra}`" if label in DEFAULT_ERAS and extra else label
