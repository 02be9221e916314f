"""The web console at `/console` of the local HTTP server (on AWS: an S3 bucket behind CloudFront,
infra/magnetar_cdk/console.py).

The console is static files (the repository's `console/` folder) and `config.json`, which tells
them where the API is: here the same origin (`apiUrl` ""), on AWS the HTTP API's URL, written at
deploy time. The console holds no privilege: every call it makes is the user's, with the user's
token. The files are found at `MAGNETAR_CONSOLE_DIR` when set, else in the source tree this
package is installed from (an editable install, as `make install` makes).
"""

from __future__ import annotations

import os
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

ENV_CONSOLE_DIR = "MAGNETAR_CONSOLE_DIR"
PATH = "/console"


def console_dir() -> Path:
    """Where the console's files are: `MAGNETAR_CONSOLE_DIR`, else `console/` of the source tree."""
    configured = os.environ.get(ENV_CONSOLE_DIR)
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[3] / "console"


def console_config(api_url: str = "", authentication: bool = False) -> dict[str, object]:
    """`config.json`: the API's URL ("" for the console's own origin) and whether it asks for a
    token (a hint for the first screen: a 401 still leads to the sign-in)."""
    return {"apiUrl": api_url, "authentication": authentication}


def console_routes(authentication: bool) -> list[BaseRoute]:
    """`/console` (to `/console/`), `/console/config.json` and the static files."""
    directory = console_dir()

    async def to_index(request: Request) -> Response:
        return RedirectResponse(f"{PATH}/")

    async def config(request: Request) -> Response:
        return JSONResponse(console_config("", authentication), headers={"Cache-Control": "no-store"})

    async def missing(request: Request) -> Response:
        return JSONResponse({"reason": f"The console's files are not at {directory} (set {ENV_CONSOLE_DIR})"},
                            status_code=404)

    files: BaseRoute = (Mount(PATH, app=StaticFiles(directory=directory, html=True), name="console")
                        if (directory / "index.html").is_file() else Route(f"{PATH}/{{path:path}}", missing))
    return [Route(PATH, to_index), Route(f"{PATH}/config.json", config), files]


CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """A Chromium to drive headless (the console's browser tests and screenshots): `CHROMIUM`
    when set, else the first of Debian's and the usual names on the PATH (`make install` puts
    Debian's `chromium` there)."""
    import shutil

    configured = os.environ.get("CHROMIUM")
    if configured:
        return configured
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)
