"""JSON Schema from Python type hints, and the arguments decoded by it: the
part of the wasm-agent Python helper (:mod:`wasm_agent_tool`) that needs
nothing of the host. Plain CPython; no wasm-agent imports."""

import inspect
import json
import re
import types
import typing

__all__ = ["schema_of", "json_type", "docstring", "unwrap", "signature_schema", "coerce"]


# ------------------------------------------------------ schema from hints


def schema_of(hint, where):
    """The JSON Schema of a type hint."""
    if hint is inspect.Parameter.empty or hint is typing.Any or hint is object:
        return {}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        schema = schema_of(args[0], where)
        for extra in args[1:]:
            if isinstance(extra, str):
                schema["description"] = extra
            elif isinstance(extra, dict):
                schema.update(extra)
        return schema
    simple = {str: "string", int: "integer", float: "number", bool: "boolean",
              type(None): "null", list: "array", tuple: "array", dict: "object"}
    if hint in simple:
        return {"type": simple[hint]}
    if origin in (list, tuple, set, frozenset):
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            args = args[:1]
        if origin is tuple and len(args) != 1:
            items = [schema_of(arg, where) for arg in args]
            return {"type": "array", "prefixItems": items,
                    "minItems": len(items), "maxItems": len(items)}
        schema = {"type": "array"}
        if args:
            schema["items"] = schema_of(args[0], where)
        if origin in (set, frozenset):
            schema["uniqueItems"] = True
        return schema
    if origin is dict:
        schema = {"type": "object"}
        if len(args) == 2 and args[0] is str:
            value = schema_of(args[1], where)
            if value:
                schema["additionalProperties"] = value
        elif args:
            raise TypeError(f"{where}: dict keys must be str in JSON")
        return schema
    if origin is typing.Literal:
        schema = {"enum": list(args)}
        kinds = {json_type(arg) for arg in args}
        if len(kinds) == 1:
            schema["type"] = kinds.pop()
        return schema
    if origin is typing.Union or origin is types.UnionType:
        options = [arg for arg in args if arg is not type(None)]
        nullable = len(options) < len(args)
        schemas = [schema_of(arg, where) for arg in options]
        if len(schemas) == 1 and nullable and isinstance(schemas[0].get("type"), str):
            schema = dict(schemas[0])
            schema["type"] = [schema["type"], "null"]
            if "enum" in schema:
                schema["enum"] = schema["enum"] + [None]
            return schema
        if nullable:
            schemas.append({"type": "null"})
        return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    raise TypeError(f"{where}: cannot describe {hint!r} in JSON Schema; pass schema=")


def json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise TypeError(f"{value!r} is not a JSON value")


def docstring(function):
    """(description, {parameter: description}) from a Google-style docstring:
    the text before the first section header, and the ``Args:`` entries."""
    doc = inspect.getdoc(function) or ""
    sections = re.split(r"^(\w+):[ \t]*$", doc, flags=re.M)
    params = {}
    for header, body in zip(sections[1::2], sections[2::2]):
        if header not in ("Args", "Arguments", "Parameters"):
            continue
        name = indent = None
        for line in body.strip("\n").splitlines():
            text = line.strip()
            if not text:
                break
            depth = len(line) - len(line.lstrip())
            match = re.match(r"(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)", text)
            if match and (indent is None or depth <= indent):
                name, indent = match.group(1), depth
                params[name] = match.group(2)
            elif name:
                params[name] = f"{params[name]} {text}".strip()
    return unwrap(sections[0]), params


def unwrap(text):
    """Joins wrapped lines; paragraph breaks stay (a model reads it better)."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def signature_schema(function, param_docs, context_type):
    """The arguments schema of ``function`` and the name of its parameter of
    ``context_type`` (the call's context, not an argument), if any."""
    hints = typing.get_type_hints(function, include_extras=True)
    properties, required, context_param = {}, [], None
    for param in inspect.signature(function).parameters.values():
        hint = hints.get(param.name, param.annotation)
        if hint is context_type:
            context_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(f"{function.__name__}: *args, **kwargs and positional-only "
                            f"parameters cannot be tool arguments")
        schema = schema_of(hint, f"{function.__name__}({param.name})")
        if param.name in param_docs and "description" not in schema:
            schema["description"] = param_docs[param.name]
        if param.default is param.empty:
            required.append(param.name)
        elif param.default is not None:
            try:
                json.dumps(param.default, allow_nan=False)
                schema["default"] = param.default
            except (TypeError, ValueError):
                pass
        properties[param.name] = schema
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
              "type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema, context_param


# ------------------------------------------------------------- decoding
#
# The host checks every call's arguments against the tool's schema before the
# component runs (one validator, the host's), so the helper only decodes them
# and turns integral floats into ``int`` where the schema expects an integer.


def _is_type(value, kind):
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "null":
        return value is None
    return json_type(value) == kind


def _kinds(schema):
    kinds = schema.get("type")
    if kinds is None:
        return []
    return [kinds] if isinstance(kinds, str) else list(kinds)


def expects_integer(schema):
    """Whether ``schema`` asks for an integer anywhere (else :func:`coerce`
    changes nothing and can be skipped)."""
    if isinstance(schema, dict):
        kinds = schema.get("type")
        if kinds == "integer" or (isinstance(kinds, (list, tuple)) and "integer" in kinds):
            return True
        return any(expects_integer(item) for item in schema.values())
    if isinstance(schema, (list, tuple)):
        return any(expects_integer(item) for item in schema)
    return False


def coerce(value, schema):
    """``value`` with integral floats turned into ``int`` wherever ``schema``
    expects an integer (through properties, items, prefixItems,
    additionalProperties and the anyOf option the value fits). Nothing is
    checked: the host has validated the arguments already."""
    if not isinstance(schema, dict):
        return value
    for option in schema.get("anyOf", ()):
        if isinstance(option, dict) and any(_is_type(value, k) for k in _kinds(option)):
            value = coerce(value, option)
            break
    kinds = _kinds(schema)
    if (isinstance(value, float) and value.is_integer()
            and "integer" in kinds and "number" not in kinds):
        return int(value)
    if isinstance(value, list):
        prefix = schema.get("prefixItems", [])
        items = schema.get("items", True)
        return [coerce(item, prefix[index] if index < len(prefix) else items)
                for index, item in enumerate(value)]
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        return {key: coerce(item, properties.get(key, extra)) for key, item in value.items()}
    return value
