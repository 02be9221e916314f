"""The route x access table of docs/security.md, generated from the routes themselves.

`python -m magnetar.api.route_table` rewrites the table between its markers in
docs/security.md; a test fails when the document and the routes disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path

from magnetar.api.access import ROUTE_TABLE
from magnetar.api.app import app  # noqa: F401 - importing the app registers every route

START, END = "<!-- route-table:start -->", "<!-- route-table:end -->"
DOC = Path(__file__).resolve().parents[3] / "docs" / "security.md"


def markdown() -> str:
    rows = sorted({(r.openapi_path, r.method, r.access.value) for r in ROUTE_TABLE})
    lines = ["| method | path | access |", "|---|---|---|"]
    lines += [f"| {method} | `{path}` | {access} |" for path, method, access in rows]
    return "\n".join(lines)


def rewritten(document: str) -> str:
    head, _, rest = document.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{markdown()}\n{END}{tail}"


def main() -> int:
    text = DOC.read_text()
    if START not in text or END not in text:
        print(f"{DOC} has no {START} ... {END} section", file=sys.stderr)
        return 1
    DOC.write_text(rewritten(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
