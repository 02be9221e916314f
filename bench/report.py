"""The generated tables of docs/benchmarks.md (from the JSON results in bench/results/) and of
docs/cost-model.md (from the cost model, magnetar.cost, and the results it cites).

    .venv/bin/python bench/report.py            # rewrite the tables of both documents (make bench-report)
    .venv/bin/python bench/report.py --check    # exit 1 if a document differs from what it would write
    .venv/bin/python bench/report.py --doc docs/cost-model.md   # one document only

Each document marks its generated stretches:

    <!-- bench-report:NAME -->
    ...generated, replaced on every run...
    <!-- /bench-report -->

NAME is one of the document's blocks in bench/reporting (`DOCUMENTS`: every block of a document
appears in it exactly once); the prose around the markers is left alone. A block reads the results it cites and fails with the file's name when
one is missing. Rows measured before today's defaults say what they were measured at (a run newer
than the defaults is labelled from its own configuration); bench/reporting/base.py holds the labels.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: message_cost.py and reporting/

from reporting import BLOCKS, DOCUMENTS, Block, ReportError, Results

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs/benchmarks.md"
DOCS = tuple(ROOT / "docs" / name for name in DOCUMENTS)
RESULTS = ROOT / "bench/results"
# Results the documents do not cite but something else reads (bench/report.py --unused lists the rest)
OTHER_READERS = {
    "emulator-dynamodb.json": "docs/architecture.md's emulator figures (bench/emulator_dynamodb.py writes it)",
    "metrics-scrape.json": "docs/metrics.md's scrape figures (bench/metrics_scrape.py writes it)",
}
MARKER = re.compile(r"<!-- bench-report:(?P<name>[a-z0-9-]+) -->\n(?P<body>.*?)<!-- /bench-report -->", re.DOTALL)
OPENING = re.compile(r"<!-- bench-report:([a-z0-9-]+) -->")


def blocks_of(path: Path) -> dict[str, Block]:
    """The blocks a document holds, by its file name."""
    if path.name not in DOCUMENTS:
        raise ReportError(f"{path.name}: not a generated document ({', '.join(DOCUMENTS)})")
    blocks: dict[str, Block] = DOCUMENTS[path.name]
    return blocks


def render(doc: str, results: Results, blocks: dict[str, Block] = BLOCKS) -> str:
    """The document with every marked block generated again (`blocks`: the document's own)."""
    opened = OPENING.findall(doc)
    closed = doc.count("<!-- /bench-report -->")
    found = [m.group("name") for m in MARKER.finditer(doc)]
    if len(opened) != len(found) or closed != len(found):
        raise ReportError(f"unbalanced bench-report markers: {len(opened)} opened, {closed} closed, "
                          f"{len(found)} pairs")
    unknown = sorted(set(found) - set(blocks))
    twice = sorted({name for name in found if found.count(name) > 1})
    unused = sorted(set(blocks) - set(found))
    if unknown or twice or unused:
        raise ReportError("bench-report blocks: " + "; ".join(
            f"{what}: {', '.join(names)}" for what, names in
            (("unknown", unknown), ("more than once", twice), ("not in the document", unused)) if names))

    def block(m: re.Match[str]) -> str:
        name = m.group("name")
        return f"<!-- bench-report:{name} -->\n{blocks[name](results).strip()}\n<!-- /bench-report -->"

    return MARKER.sub(block, doc)


def unused(results: Results) -> list[str]:
    """Result files neither the documents (as last rendered with `results`) nor another reader cites."""
    files = {str(p.relative_to(results.root)) for p in results.root.rglob("*.json")}
    return sorted(files - results.cited - set(OTHER_READERS))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a document is stale")
    parser.add_argument("--unused", action="store_true", help="also list the result files nothing cites")
    parser.add_argument("--doc", type=Path, action="append",
                        help="a document to generate (benchmarks.md or cost-model.md by name); default both")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    results = Results(args.results)
    stale = []
    for path in args.doc or DOCS:
        doc = path.read_text()
        try:
            new = render(doc, results, blocks_of(path))
        except ReportError as e:
            print(f"bench/report.py: {path.name}: {e}", file=sys.stderr)
            return 2
        if new == doc:
            continue
        if args.check:
            print(f"{path} is stale: make bench-report", file=sys.stderr)
            stale.append(path)
        else:
            path.write_text(new)
            print(f"wrote {path}")
    if args.unused:
        print("\n".join(f"not cited: bench/results/{name}" for name in unused(results)) or "every result is cited")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
