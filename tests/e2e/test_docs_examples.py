"""The Python examples of the README and of the documentation site's Getting started page, and the
`curl` examples of the metrics page, run as written against the session's cluster (only the
service URL is the cluster's)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "docs" / "index.md"]
FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)
SHELL_PAGES = [ROOT / "docs" / "metrics.md"]
SHELL = re.compile(r"```bash\n(.*?)```", re.DOTALL)


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


def _curl_examples() -> list[Any]:
    return [pytest.param(block, id=f"{page.relative_to(ROOT)}#{n}")
            for page in SHELL_PAGES for n, block in enumerate(SHELL.findall(page.read_text()))
            if block.startswith("curl ") and "http://127.0.0.1:8080" in block]  # a whole command for a local cluster


@pytest.mark.parametrize("command", _curl_examples())
def test_curl_example_runs(command: str, cluster: Any) -> None:
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command.replace("http://127.0.0.1:8080", cluster.url)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^pulsar_\w+\{", done.stdout, re.MULTILINE), done.stdout  # Pulsar's metrics, in Prometheus' format
