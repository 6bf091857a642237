"""run_python: runs Python code that a model wrote, inside the sandbox.

The code runs in CPython (componentize-py's runtime) in a fresh instance per
call, under the tool's policy like any other tool: time, fuel, memory, output
and write limits, files only where granted, network only where granted, no
environment (``fetch`` is the code's way to the network, over wasi:http).
The result is what the code printed (stdout, then stderr, each
capped and marked when cut) and the value of its last expression; an
exception or a syntax error fails the call with the traceback, so the model
can fix its code. With a scratch folder granted (``--scratch``), the code
starts in ``/scratch`` and the files it leaves there come back as artifacts.

Only standard modules imported below are inside the component: imports of
others fail with ``ModuleNotFoundError``.
"""

import ast
import linecache
import mimetypes
import os
import sys
import traceback

# The standard modules the code may import (only modules imported while
# building are inside the component).
import abc  # noqa: F401
import array  # noqa: F401
import base64  # noqa: F401
import bisect  # noqa: F401
import calendar  # noqa: F401
import cmath  # noqa: F401
import collections  # noqa: F401
import collections.abc  # noqa: F401
import colorsys  # noqa: F401
import contextlib  # noqa: F401
import copy  # noqa: F401
import csv  # noqa: F401
import dataclasses  # noqa: F401
import datetime  # noqa: F401
import decimal  # noqa: F401
import difflib  # noqa: F401
import enum  # noqa: F401
import fnmatch  # noqa: F401
import fractions  # noqa: F401
import functools  # noqa: F401
import hashlib  # noqa: F401
import heapq  # noqa: F401
import html  # noqa: F401
import io
import itertools  # noqa: F401
import json  # noqa: F401
import math  # noqa: F401
import numbers  # noqa: F401
import operator  # noqa: F401
import pathlib  # noqa: F401
import pprint  # noqa: F401
import random  # noqa: F401
import re  # noqa: F401
import shlex  # noqa: F401
import statistics  # noqa: F401
import string  # noqa: F401
import struct  # noqa: F401
import textwrap  # noqa: F401
import time  # noqa: F401
import typing  # noqa: F401
import unicodedata  # noqa: F401
import urllib.parse  # noqa: F401
import uuid  # noqa: F401
import zlib  # noqa: F401
from typing import Annotated

import inspect

from wasi_fetch import FetchError, Response, fetch
import wasi_requests
from wasm_agent_tool import Output, ToolCallError, ToolError, host, tool, Toolkit

#: Characters of stdout and of stderr kept (the rest is counted).
STDOUT_KEPT = 32 * 1024
STDERR_KEPT = 8 * 1024
#: Characters of the last expression's repr() kept.
VALUE_KEPT = 8 * 1024
#: The scratch folder the host preopens when the policy grants one.
SCRATCH = "/scratch"
#: Files, and bytes in all, returned from the scratch folder.
MAX_FILES = 32
MAX_FILE_BYTES = 512 * 1024
#: The file name tracebacks show for the code (``<code #2>``, ... for later
#: calls of a kept instance).
SOURCE = "<code>"
#: The code's globals. A fresh instance per call starts with none; under the
#: host's ``keep_instance`` the instance, and so these, serve every call of
#: one session, like a notebook's.
SESSION = {"__name__": "__main__", "__builtins__": __builtins__}
#: Calls this instance has run.
CALLS = [0]
#: Files whose frames tracebacks leave out.
OWN_FILES = ("app.py", "wasm_agent_tool.py")


class CappedText(io.TextIOBase):
    """A text stream that keeps its first ``limit`` characters and counts the rest."""

    def __init__(self, limit):
        self.limit = limit
        self.parts = []
        self.kept = 0
        self.cut = 0

    def writable(self):
        return True

    def write(self, text):
        text = str(text)
        room = self.limit - self.kept
        if room > 0:
            piece = text[:room]
            self.parts.append(piece)
            self.kept += len(piece)
        self.cut += max(0, len(text) - max(room, 0))
        return len(text)

    def text(self):
        joined = "".join(self.parts)
        if self.cut:
            joined += f"\n[... {self.cut:,} more characters cut]"
        return joined


def _split_last_expression(tree):
    """The module without its last statement when that is an expression, and the expression."""
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body.pop()
        return tree, ast.Expression(last.value)
    return tree, None


def _user_traceback(error):
    """The traceback of ``error`` from the first frame of the model's code on."""
    frames = traceback.extract_tb(error.__traceback__)
    first = next((i for i, f in enumerate(frames) if f.filename.startswith(SOURCE[:-1])),
                 len(frames))
    # Frames of this tool and its helper (a tool function's) are noise to the model.
    ours = [f for f in frames[first:] if not f.filename.endswith(OWN_FILES)]
    shown = traceback.TracebackException.from_exception(error)
    shown.stack = traceback.StackSummary.from_list(ours)
    return "".join(shown.format())


def _report(stdout, stderr, value=None):
    parts = []
    if stdout.kept or stdout.cut:
        parts.append("stdout:\n" + stdout.text().rstrip("\n"))
    if stderr.kept or stderr.cut:
        parts.append("stderr:\n" + stderr.text().rstrip("\n"))
    if value is not None:
        parts.append("value:\n" + value)
    return "\n\n".join(parts)


def _scratch_listing():
    """Each file under the scratch folder: its relative path, and its size and
    modification time (to tell what a call wrote from what was there)."""
    listing = {}
    if not os.path.isdir(SCRATCH):
        return listing
    for folder, _dirs, files in os.walk(SCRATCH):
        for name in files:
            path = os.path.join(folder, name)
            try:
                stat = os.stat(path)
            except OSError:
                continue
            listing[os.path.relpath(path, SCRATCH)] = (stat.st_size, stat.st_mtime_ns)
    return listing


def _scratch_files(before):
    """The files under the scratch folder that are new or changed since
    ``before``, as (relative path, bytes) up to the caps."""
    if not os.path.isdir(SCRATCH):
        return [], []
    found, skipped, total = [], [], 0
    now = _scratch_listing()
    for folder, dirs, files in os.walk(SCRATCH):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, SCRATCH)
            if relative in before and before[relative] == now.get(relative):
                continue
            try:
                size = os.path.getsize(path)
                if len(found) >= MAX_FILES or total + size > MAX_FILE_BYTES:
                    skipped.append(relative)
                    continue
                with open(path, "rb") as file:
                    data = file.read(MAX_FILE_BYTES - total + 1)
            except OSError:
                skipped.append(relative)
                continue
            total += len(data)
            found.append((relative, data))
    return found, skipped


def _with_files(output, before):
    files, skipped = _scratch_files(before)
    lines = [f"- {name} ({len(data):,} bytes)" for name, data in files]
    lines += [f"- {name} (not returned: over {MAX_FILES} files or {MAX_FILE_BYTES // 1024} KiB)"
              for name in skipped]
    if lines:
        listing = "files in /scratch:\n" + "\n".join(lines)
        shown = output.content not in ("", "(no output)")
        output.content = f"{output.content}\n\n{listing}" if shown else listing
    for name, data in files:
        mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
        output.with_bytes(f"file:{name}", mime, data)
    return output


#: Python annotations of JSON Schema types, for the tool functions' signatures.
JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool,
              "array": list, "object": dict, "null": type(None)}


class ToolResult(str):
    """What a tool called from the code returned: its text, with ``.artifacts``."""

    artifacts = ()


def _tool_function(spec):
    """A Python function that calls the host's tool ``spec`` with keyword
    arguments (or one dict), with the tool's docs and signature."""
    name = spec["name"]
    schema = spec["parameters"] if isinstance(spec["parameters"], dict) else {}
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])

    def call(arguments=None, /, **kwargs):
        # An optional parameter left at its None default is not sent.
        kwargs = {key: value for key, value in kwargs.items() if value is not None}
        output = host.call_tool(name, arguments, **kwargs)
        result = ToolResult(output.content)
        result.artifacts = tuple(output.artifacts)
        return result

    parameters = []
    for key, prop in properties.items():
        if not key.isidentifier():
            continue
        kind = prop.get("type") if isinstance(prop, dict) else None
        annotation = JSON_TYPES.get(kind, inspect.Parameter.empty) if isinstance(kind, str) else inspect.Parameter.empty
        default = inspect.Parameter.empty if key in required else prop.get("default", None)
        parameters.append(inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY,
                                            default=default, annotation=annotation))
    call.__signature__ = inspect.Signature(parameters, return_annotation=str)
    call.__name__ = call.__qualname__ = name.replace("-", "_")
    docs = [spec["description"]]
    for key, prop in properties.items():
        if isinstance(prop, dict) and prop.get("description"):
            docs.append(f"{key}: {prop['description']}")
    call.__doc__ = "\n".join(docs)
    return call


def _help(thing=None):
    """help() without pydoc: the signature and docs of a tool function (or
    any object), or the list of tools."""
    if thing is None:
        print("tools: the host's tools granted to this code; help(tools.NAME) for one")
        return
    name = getattr(thing, "__name__", type(thing).__name__)
    try:
        signature = str(inspect.signature(thing))
    except (TypeError, ValueError):
        signature = ""
    print(f"{name}{signature}")
    if thing.__doc__:
        print(inspect.cleandoc(thing.__doc__))


class Tools:
    """The host's tools this code may call: ``tools.calculate(expression="2+2")``,
    or ``tools["json-query"](...)`` for names that are not identifiers.
    ``help(tools.calculate)`` shows a tool's description and parameters. The
    host is asked for them on first use only."""

    def __init__(self, load):
        self._load, self._loaded = load, None

    @property
    def _functions(self):
        if self._loaded is None:
            self._loaded = {spec["name"]: _tool_function(spec) for spec in self._load()}
        return self._loaded

    def __getitem__(self, name):
        return self._functions.get(name) or _tool_function(
            {"name": name, "description": "", "parameters": {}})

    def __getattr__(self, name):
        # A tool not granted is still asked for: the host refuses it with
        # capability_denied, naming the grant that would allow it.
        if name.startswith("_"):
            raise AttributeError(name)
        functions = self._functions
        found = next((f for n, f in functions.items() if n.replace("-", "_") == name), None)
        return found or self[name]

    def __dir__(self):
        return [name.replace("-", "_") for name in self._functions]

    def __iter__(self):
        return iter(self._functions)

    def __repr__(self):
        return f"<tools: {', '.join(self._functions) or 'none granted'}>"


@tool(open_world=False)
def run_python(
    code: Annotated[str, "Python 3 source to run. The value of its last expression is returned "
                         "beside what it prints."],
    stdin: Annotated[str, "Text the code reads from standard input."] = "",
) -> Output:
    """Run Python code in a sandbox and return what it printed and the value of
    its last expression. Standard modules such as json, re, math, statistics,
    datetime, collections, itertools, decimal, csv and random are available;
    ``fetch(url, method="GET", headers=None, body=None)`` reaches only the hosts
    the policy grants (returns a Response with ``status``, ``headers``,
    ``text()``, ``json()``), and so do ``requests`` (get, post, ..., Session;
    ``status_code``, ``text``, ``json()``) and ``urllib.request.urlopen``; there
    is no subprocess and no file outside granted folders.
    The host's tools granted to it are functions of ``tools``
    (``tools.calculate(expression="2+2")`` returns the tool's text; a failure
    raises ToolCallError). An exception or a syntax error fails the call with
    its traceback."""
    CALLS[0] += 1
    source = SOURCE if CALLS[0] == 1 else f"<code #{CALLS[0]}>"
    try:
        tree = ast.parse(code, source, "exec")
    except SyntaxError as error:
        raise ToolError("".join(traceback.format_exception_only(error)).rstrip("\n")) from None
    linecache.cache[source] = (len(code), None, code.splitlines(True), source)
    body, last = _split_last_expression(tree)
    stdout, stderr = CappedText(STDOUT_KEPT), CappedText(STDERR_KEPT)
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin), stdout, stderr
    namespace = SESSION
    namespace.update(tools=Tools(host.callable_tools), ToolCallError=ToolCallError, help=_help,
                     fetch=fetch, FetchError=FetchError, Response=Response)
    value = None
    before = _scratch_listing()
    if os.path.isdir(SCRATCH):
        os.chdir(SCRATCH)
    try:
        exec(compile(body, source, "exec"), namespace)
        if last is not None:
            result = eval(compile(last, source, "eval"), namespace)
            if result is not None:
                value = CappedText(VALUE_KEPT)
                value.write(repr(result))
                value = value.text()
    except SystemExit as exit:
        if exit.code not in (None, 0):
            sys.stdin, sys.stdout, sys.stderr = saved
            raise ToolError(_report(stdout, stderr) + f"\n\nexited with status {exit.code}") from None
    except BaseException as error:  # noqa: BLE001  the model's code may raise anything
        sys.stdin, sys.stdout, sys.stderr = saved
        report = _report(stdout, stderr)
        trace = _user_traceback(error).rstrip("\n")
        raise ToolError(f"{report}\n\n{trace}" if report else trace) from None
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return _with_files(Output(_report(stdout, stderr, value) or "(no output)"), before)


wasi_requests.install()

Tool = Toolkit.export()
