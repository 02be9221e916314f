"""The documents' generated tables: each block renders one stretch of a document, docs/benchmarks.md's
from the JSON results in bench/results/, docs/cost-model.md's from the cost model itself
(`magnetar.cost`, and the few results it cites); bench/report.py puts them between the markers."""

from __future__ import annotations

from .base import Block, ReportError, Results
from .cost_functions import BLOCKS as COST_FUNCTION_BLOCKS
from .cost_model import BLOCKS as COST_MODEL_BLOCKS
from .cost_text import BLOCKS as COST_TEXT_BLOCKS
from .details_functions import BLOCKS as FUNCTION_BLOCKS
from .details_protocols import BLOCKS as PROTOCOL_BLOCKS
from .details_scale import BLOCKS as SCALE_BLOCKS
from .details_throughput import BLOCKS as THROUGHPUT_BLOCKS
from .headlines import BLOCKS as HEADLINE_BLOCKS
from .message_cost_budget import BLOCKS as MESSAGE_COST_BUDGET_BLOCKS
from .message_cost_tables import BLOCKS as MESSAGE_COST_BLOCKS

BLOCKS: dict[str, Block] = {**MESSAGE_COST_BLOCKS, **MESSAGE_COST_BUDGET_BLOCKS, **HEADLINE_BLOCKS, **THROUGHPUT_BLOCKS, **SCALE_BLOCKS,
                            **PROTOCOL_BLOCKS, **FUNCTION_BLOCKS}
COST_BLOCKS: dict[str, Block] = {**COST_TEXT_BLOCKS, **COST_MODEL_BLOCKS, **COST_FUNCTION_BLOCKS}
# Each generated document (by file name, under docs/) and the blocks it holds, every one exactly once
DOCUMENTS: dict[str, dict[str, Block]] = {"benchmarks.md": BLOCKS, "cost-model.md": COST_BLOCKS}

__all__ = ["BLOCKS", "COST_BLOCKS", "DOCUMENTS", "Block", "ReportError", "Results"]
