"""docs/benchmarks.md's tables, regenerated from the JSON results in bench/results/.

    .venv/bin/python bench/report.py            # rewrite the tables in docs/benchmarks.md (make bench-report)
    .venv/bin/python bench/report.py --check    # exit 1 if the document differs from what it would write

The document marks each generated stretch:

    <!-- bench-report:NAME -->
    ...generated, replaced on every run...
    <!-- /bench-report -->

NAME is one of the blocks of bench/reporting (every block appears exactly once); the prose around
the markers is left alone. A block reads the results it cites and fails with the file's name when
one is missing. Rows measured before today's defaults say what they were measured at (a run newer
than the defaults is labelled from its own configuration); bench/reporting/base.py holds the labels.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: message_cost.py and reporting/

from reporting import BLOCKS, ReportError, Results

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs/benchmarks.md"
RESULTS = ROOT / "bench/results"
# Results the document does not cite but something else reads (bench/report.py --unused lists the rest)
OTHER_READERS = {
    "cost-comparison.json": "docs/cost-model.md (bench/cost_comparison.py writes it)",
    "e2e-throughput-2x2-batch100.json": "tests/unit/test_cost.py, docs/cost-model.md",
    "emulator-transactions.json": "docs/architecture.md's emulator figures (bench/emulator_transactions.py writes it)",
}
MARKER = re.compile(r"<!-- bench-report:(?P<name>[a-z0-9-]+) -->\n(?P<body>.*?)<!-- /bench-report -->", re.DOTALL)
OPENING = re.compile(r"<!-- bench-report:([a-z0-9-]+) -->")


def render(doc: str, results: Results) -> str:
    """The document with every marked block generated again."""
    opened = OPENING.findall(doc)
    closed = doc.count("<!-- /bench-report -->")
    found = [m.group("name") for m in MARKER.finditer(doc)]
    if len(opened) != len(found) or closed != len(found):
        raise ReportError(f"unbalanced bench-report markers: {len(opened)} opened, {closed} closed, "
                          f"{len(found)} pairs")
    unknown = sorted(set(found) - set(BLOCKS))
    twice = sorted({name for name in found if found.count(name) > 1})
    unused = sorted(set(BLOCKS) - set(found))
    if unknown or twice or unused:
        raise ReportError("bench-report blocks: " + "; ".join(
            f"{what}: {', '.join(names)}" for what, names in
            (("unknown", unknown), ("more than once", twice), ("not in the document", unused)) if names))

    def block(m: re.Match[str]) -> str:
        name = m.group("name")
        return f"<!-- bench-report:{name} -->\n{BLOCKS[name](results).strip()}\n<!-- /bench-report -->"

    return MARKER.sub(block, doc)


def unused(results: Results) -> list[str]:
    """Result files neither the document (as last rendered with `results`) nor another reader cites."""
    files = {str(p.relative_to(results.root)) for p in results.root.rglob("*.json")}
    return sorted(files - results.cited - set(OTHER_READERS))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the document is stale")
    parser.add_argument("--unused", action="store_true", help="also list the result files nothing cites")
    parser.add_argument("--doc", type=Path, default=DOC)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    doc = args.doc.read_text()
    results = Results(args.results)
    try:
        new = render(doc, results)
    except ReportError as e:
        print(f"bench/report.py: {e}", file=sys.stderr)
        return 2
    if args.unused:
        print("\n".join(f"not cited: bench/results/{name}" for name in unused(results)) or "every result is cited")
    if args.check:
        if new != doc:
            print(f"{args.doc} is stale: make bench-report", file=sys.stderr)
            return 1
        return 0
    if new != doc:
        args.doc.write_text(new)
        print(f"wrote {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
