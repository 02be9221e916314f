"""docs/benchmarks.md's generated tables: each block renders one stretch of the document from the
JSON results in bench/results/ (bench/report.py puts them between the document's markers)."""

from __future__ import annotations

from .base import Block, ReportError, Results
from .details_protocols import BLOCKS as PROTOCOL_BLOCKS
from .details_scale import BLOCKS as SCALE_BLOCKS
from .details_throughput import BLOCKS as THROUGHPUT_BLOCKS
from .headlines import BLOCKS as HEADLINE_BLOCKS
from .message_cost_tables import BLOCKS as MESSAGE_COST_BLOCKS

BLOCKS: dict[str, Block] = {**MESSAGE_COST_BLOCKS, **HEADLINE_BLOCKS, **THROUGHPUT_BLOCKS, **SCALE_BLOCKS,
                            **PROTOCOL_BLOCKS}

__all__ = ["BLOCKS", "Block", "ReportError", "Results"]
