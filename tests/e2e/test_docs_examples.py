"""The Python examples of the README and of the documentation site's Getting started page run as
written against the session's cluster (only the service URL is the cluster's)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "docs" / "index.md"]
FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _examples() -> list[Any]:
    out = []
    for page in PAGES:
        for n, block in enumerate(FENCE.findall(page.read_text())):
            if "import magnetar" in block and "http://127.0.0.1:8080" in block:  # a whole example for a local cluster
                out.append(pytest.param(block, id=f"{page.relative_to(ROOT)}#{n}"))
    return out


@pytest.mark.parametrize("code", _examples())
def test_example_runs(code: str, cluster: Any, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(code.replace("http://127.0.0.1:8080", cluster.url), "<example>", "exec"), {})
    assert "hello" in capsys.readouterr().out  # each such example prints what it sent
