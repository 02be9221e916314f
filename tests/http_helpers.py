"""One HTTP client for the tests' raw requests.

httpx's module functions (`httpx.get`, `httpx.post`, ...) make a client for every call, and each
new client builds a TLS context (it loads the whole CA bundle: ~36 ms of CPU); the suite's raw
requests, thousands of them, paid that one by one. `HTTP` is used as those functions are (the
same arguments, the same default timeout); httpx's client is safe to share between threads.
"""

from __future__ import annotations

import httpx

from magnetar.client.transport import tls_context

HTTP = httpx.Client(timeout=httpx.Timeout(5.0), verify=tls_context())
