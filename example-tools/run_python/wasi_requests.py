"""What models write for HTTP in Python, over ``fetch`` (wasi:http, to the
hosts the policy grants): a small ``requests`` (``get``, ``post``, ``put``,
``patch``, ``delete``, ``head``, ``request``, ``Session``; responses with
``status_code``, ``text``, ``content``, ``json()``, ``headers``, ``ok``,
``raise_for_status()``) and ``urllib.request.urlopen`` (``Request``,
``read()``, ``status``, ``getcode()``; ``urllib.error.HTTPError`` for 4xx
and 5xx). :func:`install` makes them importable."""

import json as _json
import sys
import types
import urllib
import urllib.parse

from wasi_fetch import FetchError, fetch


class RequestException(OSError):
    """requests' base error."""


class ConnectionError(RequestException):  # noqa: A001  requests' name
    """No response: the host's policy refused the request, or it failed."""


class Timeout(RequestException):
    """requests' name; the sandbox's own time limit stops a call instead."""


class HTTPError(RequestException):
    """``raise_for_status()`` of a 4xx or 5xx response."""

    def __init__(self, message, response=None):
        super().__init__(message)
        self.response = response


class Headers(dict):
    """Response headers, looked up in any case."""

    def __getitem__(self, name):
        return super().__getitem__(name.lower())

    def get(self, name, default=None):
        return super().get(name.lower(), default)

    def __contains__(self, name):
        return super().__contains__(str(name).lower())


class RequestsResponse:
    """A response as requests shows it."""

    def __init__(self, response):
        self.url = response.url
        self.status_code = response.status
        self.headers = Headers(response.headers)
        self.content = response.content
        self.encoding = "utf-8"

    @property
    def ok(self):
        return self.status_code < 400

    @property
    def text(self):
        return self.content.decode(self.encoding or "utf-8", errors="replace")

    def json(self, **kwargs):
        return _json.loads(self.content, **kwargs)

    def raise_for_status(self):
        if self.status_code >= 400:
            raise HTTPError(f"{self.status_code} error for url: {self.url}", response=self)

    def __repr__(self):
        return f"<Response [{self.status_code}]>"


def request(method, url, params=None, data=None, json=None, headers=None, **_ignored):
    """One request; ``timeout``, ``verify`` and the like are accepted and
    ignored (the sandbox bounds time itself)."""
    if params:
        url += ("&" if "?" in url else "?") + urllib.parse.urlencode(params, doseq=True)
    headers = dict(headers or {})
    body = None
    if json is not None:
        body = json if isinstance(json, (dict, list)) else _json.dumps(json)
        headers.setdefault("content-type", "application/json")
    elif isinstance(data, dict):
        body = urllib.parse.urlencode(data, doseq=True)
        headers.setdefault("content-type", "application/x-www-form-urlencoded")
    elif data is not None:
        body = data
    try:
        return RequestsResponse(fetch(url, method, headers, body))
    except FetchError as error:
        raise ConnectionError(str(error)) from None


def _method(name):
    def call(url, **kwargs):
        return request(name, url, **kwargs)

    call.__name__ = name.lower()
    return call


class Session:
    """requests.Session: its ``headers`` go with each request."""

    def __init__(self):
        self.headers = {}

    def request(self, method, url, headers=None, **kwargs):
        return request(method, url, headers={**self.headers, **(headers or {})}, **kwargs)

    def __getattr__(self, name):
        if name.upper() in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"):
            return lambda url, **kwargs: self.request(name.upper(), url, **kwargs)
        raise AttributeError(name)

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *_):
        pass


def _requests_module():
    module = types.ModuleType("requests", __doc__)
    for name in ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"):
        setattr(module, name.lower(), _method(name))
    exceptions = types.ModuleType("requests.exceptions")
    for error in (RequestException, ConnectionError, Timeout, HTTPError):
        setattr(module, error.__name__, error)
        setattr(exceptions, error.__name__, error)
    module.exceptions = exceptions
    module.request, module.Session, module.Response = request, Session, RequestsResponse
    module.session = Session
    return module, exceptions


class URLError(OSError):
    """urllib.error.URLError: no response."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class URLHTTPError(URLError):
    """urllib.error.HTTPError: a 4xx or 5xx response."""

    def __init__(self, url, code, msg, hdrs, fp=None):
        super().__init__(f"HTTP Error {code}: {msg}")
        self.url, self.code, self.msg, self.headers, self._body = url, code, msg, hdrs, fp

    def read(self):
        return self._body or b""


URLHTTPError.__name__ = "HTTPError"


class Request:
    """urllib.request.Request."""

    def __init__(self, url, data=None, headers=None, method=None):
        self.full_url, self.data, self.headers = url, data, dict(headers or {})
        self.method = method or ("POST" if data is not None else "GET")

    def add_header(self, name, value):
        self.headers[name] = value


class _Opened:
    """What urlopen returns: ``read()``, ``status``, ``getcode()``, ``headers``."""

    def __init__(self, response):
        self.url, self.status, self.headers = response.url, response.status, Headers(response.headers)
        self._body = response.content

    def read(self, size=-1):
        if size is None or size < 0:
            body, self._body = self._body, b""
        else:
            body, self._body = self._body[:size], self._body[size:]
        return body

    def getcode(self):
        return self.status

    def __enter__(self):
        return self

    def __exit__(self, *_):
        pass


def urlopen(url, data=None, timeout=None, **_ignored):
    request_ = url if isinstance(url, Request) else Request(url, data)
    try:
        response = fetch(request_.full_url, request_.method, request_.headers, request_.data)
    except FetchError as error:
        raise URLError(str(error)) from None
    if response.status >= 400:
        raise URLHTTPError(response.url, response.status, "error", Headers(response.headers), response.content)
    return _Opened(response)


def install():
    """Makes ``import requests``, ``import urllib.request`` and ``import
    urllib.error`` give these."""
    requests, exceptions = _requests_module()
    sys.modules["requests"] = requests
    sys.modules["requests.exceptions"] = exceptions
    request_module = types.ModuleType("urllib.request")
    request_module.urlopen, request_module.Request = urlopen, Request
    error_module = types.ModuleType("urllib.error")
    error_module.URLError, error_module.HTTPError = URLError, URLHTTPError
    sys.modules["urllib.request"] = request_module
    sys.modules["urllib.error"] = error_module
    urllib.request, urllib.error = request_module, error_module
