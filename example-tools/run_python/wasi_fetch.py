"""``fetch(url)`` for the code run_python runs: one HTTP request over
wasi:http, which the host lets through only to the hosts the tool's policy
grants (``network``), within ``max_requests``, ``max_response`` and the
call's deadline. CPython's own ``socket`` and ``urllib.request`` are not in
the component; this is the way out, and only where granted."""

import json
from urllib.parse import urlsplit

from wit_world.imports import outgoing_handler
from wit_world.imports import wasi_http_types as http
from componentize_py_types import Err

#: Bytes read from the response body per call of the host.
CHUNK = 64 * 1024

METHODS = {
    "GET": http.Method_Get, "HEAD": http.Method_Head, "POST": http.Method_Post,
    "PUT": http.Method_Put, "DELETE": http.Method_Delete, "PATCH": http.Method_Patch,
    "OPTIONS": http.Method_Options,
}


class FetchError(OSError):
    """The request did not get a response: refused by the host's policy
    (not granted, over ``max_requests``), or failed on the way."""


class Response:
    """An HTTP response: ``status``, ``headers`` (lower-case names), ``content``
    (bytes), ``text()``, ``json()``, ``ok``."""

    def __init__(self, url, status, headers, content):
        self.url, self.status, self.headers, self.content = url, status, headers, content

    @property
    def ok(self):
        return 200 <= self.status < 300

    def text(self, encoding="utf-8"):
        return self.content.decode(encoding, errors="replace")

    def json(self):
        return json.loads(self.content)

    def __repr__(self):
        return f"<Response {self.status} {self.url} ({len(self.content):,} bytes)>"


def _describe(code):
    """A wasi:http error code in words."""
    name = type(code).__name__.removeprefix("ErrorCode_")
    detail = getattr(code, "value", None)
    return f"{name}: {detail}" if detail not in (None, "") else name


def fetch(url, method="GET", headers=None, body=None):
    """Sends one HTTP request and returns its :class:`Response` (every status,
    not only 2xx). ``body`` is bytes, text (UTF-8) or a dict/list (sent as
    JSON). Raises :class:`FetchError` when there is no response: a host the
    policy does not grant is refused before anything is sent."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"fetch needs an http:// or https:// URL, not {url!r}")
    if method.upper() not in METHODS:
        raise ValueError(f"fetch: unsupported method {method!r}")
    fields = [(str(k).lower(), str(v).encode()) for k, v in (headers or {}).items()]
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        if not any(name == "content-type" for name, _ in fields):
            fields.append(("content-type", b"application/json"))
    elif isinstance(body, str):
        body = body.encode()
    request = http.OutgoingRequest(http.Fields.from_list(fields))
    request.set_method(METHODS[method.upper()]())
    request.set_scheme(http.Scheme_Https() if parts.scheme == "https" else http.Scheme_Http())
    request.set_authority(parts.netloc)
    request.set_path_with_query(parts.path + (f"?{parts.query}" if parts.query else "") or "/")
    outgoing = request.body()
    if body:
        with outgoing.write() as stream:
            for start in range(0, len(body), 4096):
                stream.blocking_write_and_flush(body[start:start + 4096])
    try:
        future = outgoing_handler.handle(request, None)
    except Err as error:
        raise FetchError(f"{method.upper()} {url}: {_describe(error.value)}") from None
    http.OutgoingBody.finish(outgoing, None)
    future.subscribe().block()
    outcome = future.get()
    response = outcome.value if outcome is not None else None
    if isinstance(response, Err) or response is None:
        reason = _describe(response.value) if response is not None else "no response"
        raise FetchError(f"{method.upper()} {url}: {reason}")
    response = response.value
    received = {}
    for name, value in response.headers().entries():
        received[name.lower()] = value.decode(errors="replace")
    incoming = response.consume()
    chunks = []
    with incoming.stream() as stream:
        while True:
            try:
                chunks.append(stream.blocking_read(CHUNK))
            except Err:
                break  # the end of the body (or the host's max_response cut)
    return Response(url, response.status(), received, b"".join(chunks))
