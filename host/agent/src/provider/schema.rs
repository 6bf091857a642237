//! Tool argument schemas, rewritten for providers that accept only part of
//! JSON Schema. Tools describe their arguments with schemars (draft 2020-12);
//! OpenAI strict mode and Gemini each reject some of what it emits.

use serde_json::{Map, Value, json};

/// Keywords OpenAI Structured Outputs accepts in strict mode, after the
/// "Supported schemas" section of
/// <https://platform.openai.com/docs/guides/structured-outputs>: the types,
/// `enum`, `anyOf`, `$defs`/`$ref`, and for strings `pattern` and `format`,
/// for numbers `multipleOf`, `minimum`, `maximum`, `exclusiveMinimum`,
/// `exclusiveMaximum`, for arrays `minItems`, `maxItems`. The same section
/// lists `allOf`, `not`, `if`/`then`/`else`, `dependent*`,
/// `patternProperties`, `minLength`/`maxLength`, `uniqueItems` and `contains`
/// as unsupported, and users report `default` refused; anything not listed
/// here is dropped rather than risk a 400 for the whole request.
const OPENAI_KEYWORDS: &str = "type description properties required additionalProperties items \
    enum anyOf $ref $defs definitions pattern format multipleOf minimum maximum \
    exclusiveMinimum exclusiveMaximum minItems maxItems";

/// String formats OpenAI strict mode accepts (same page); schemars' numeric
/// formats such as `uint64` are not among them.
const OPENAI_FORMATS: &str = "date-time time date duration email hostname ipv4 ipv6 uuid";

/// Keywords kept for Gemini `functionDeclarations[].parameters`: the OpenAPI
/// 3.0 subset of the `Schema` object in the API reference
/// (<https://ai.google.dev/api/caching#Schema>). `title`, `default` and
/// `examples` are dropped as well: not every API version takes them, and the
/// model learns nothing from them the description does not say.
const GEMINI_KEYWORDS: &str = "type format description nullable enum properties required \
    items minItems maxItems minimum maximum anyOf";

/// Whether `word` is one of the space-separated words of `list`.
fn listed(list: &str, word: &str) -> bool {
    list.split_whitespace().any(|w| w == word)
}

/// How many times one `$ref` may be expanded inside itself before a recursive
/// type is cut off (Gemini has no `$ref`, so recursion must be unrolled).
const MAX_REF_REPEATS: usize = 2;

/// How many `$ref`s one conversion may inline in all. Inlining copies, so a
/// few definitions that each use the next several times would otherwise
/// grow exponentially; past this budget references are cut off.
const MAX_INLINED: usize = 500;

/// How deep inlined references may nest, so that a long chain of
/// definitions cannot exhaust the stack of a recursive conversion.
const MAX_NESTED_REFS: usize = 32;

/// The references being inlined: the root they point into, the ones open on
/// the current path (to spot recursion), and the budget left.
struct Refs<'a> {
    root: &'a Value,
    path: Vec<String>,
    left: usize,
}

impl<'a> Refs<'a> {
    fn new(root: &'a Value) -> Self {
        Refs {
            root,
            path: Vec::new(),
            left: MAX_INLINED,
        }
    }

    /// The definition `reference` points at, if it may be inlined here:
    /// it exists, is open on the path fewer than `repeats` times, the path
    /// is not too deep, and the budget is not spent.
    fn target(&mut self, reference: &str, repeats: usize) -> Option<Map<String, Value>> {
        let open = self.path.iter().filter(|r| *r == reference).count();
        if open >= repeats || self.left == 0 || self.path.len() >= MAX_NESTED_REFS {
            return None;
        }
        let pointer = reference.strip_prefix('#')?;
        let target = self.root.pointer(pointer)?.as_object()?.clone();
        self.left -= 1;
        Some(target)
    }
}

/// Rewrites `schema` into what OpenAI function calling with `strict: true`
/// accepts: every object closed (`additionalProperties: false`) with all its
/// properties required, formerly optional properties made nullable, `oneOf`
/// turned into `anyOf`, `const` into a one-value `enum`, and unsupported
/// keywords removed. `$defs` and `$ref` are kept.
pub fn openai_strict(schema: &Value) -> Value {
    strict_node(schema, &mut Refs::new(schema))
}

fn strict_node(node: &Value, refs: &mut Refs) -> Value {
    let Some(object) = node.as_object() else {
        return node.clone();
    };
    // OpenAI refuses `$ref` next to other keywords (schemars puts a
    // `description` there), so such a reference is inlined, once per path.
    if let Some(Value::String(reference)) = object.get("$ref")
        && object.len() > 1
    {
        let mut rest = object.clone();
        rest.remove("$ref");
        if let Some(mut merged) = refs.target(reference, 1) {
            merged.extend(rest);
            refs.path.push(reference.clone());
            let converted = strict_node(&Value::Object(merged), refs);
            refs.path.pop();
            return converted;
        }
        return json!({ "$ref": reference });
    }

    let mut out = Map::new();
    for (key, value) in object {
        match key.as_str() {
            "oneOf" if !object.contains_key("anyOf") => {
                out.insert("anyOf".into(), strict_list(value, refs));
            }
            "anyOf" => {
                out.insert(key.clone(), strict_list(value, refs));
            }
            "const" if !object.contains_key("enum") => {
                out.insert("enum".into(), json!([value]));
            }
            "format" if !value.as_str().is_some_and(|f| listed(OPENAI_FORMATS, f)) => {}
            "properties" | "$defs" | "definitions" => {
                out.insert(key.clone(), strict_map(value, refs));
            }
            "items" if value.is_object() => {
                out.insert(key.clone(), strict_node(value, refs));
            }
            // `items: false` after `prefixItems` (tuples): not expressible.
            "items" => {}
            _ if listed(OPENAI_KEYWORDS, key) => {
                out.insert(key.clone(), value.clone());
            }
            _ => {}
        }
    }
    if is_object_schema(&out) {
        close_object(&mut out);
    }
    Value::Object(out)
}

fn strict_list(list: &Value, refs: &mut Refs) -> Value {
    match list {
        Value::Array(items) => items.iter().map(|s| strict_node(s, refs)).collect(),
        other => other.clone(),
    }
}

fn strict_map(map: &Value, refs: &mut Refs) -> Value {
    match map {
        Value::Object(entries) => entries
            .iter()
            .map(|(name, s)| (name.clone(), strict_node(s, refs)))
            .collect::<Map<_, _>>()
            .into(),
        other => other.clone(),
    }
}

fn is_object_schema(schema: &Map<String, Value>) -> bool {
    schema.contains_key("properties")
        || match schema.get("type") {
            Some(Value::String(t)) => t == "object",
            Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
            _ => false,
        }
}

/// Strict mode needs every property listed in `required`; one that was
/// optional becomes nullable so the model can still leave it out (as null).
fn close_object(schema: &mut Map<String, Value>) {
    let required: Vec<Value> = match schema.get("required") {
        Some(Value::Array(names)) => names.clone(),
        _ => Vec::new(),
    };
    let mut properties = match schema.remove("properties") {
        Some(Value::Object(properties)) => properties,
        _ => Map::new(),
    };
    for (name, property) in properties.iter_mut() {
        if !required.iter().any(|r| r == name) {
            *property = nullable(std::mem::take(property));
        }
    }
    let all: Vec<Value> = properties.keys().cloned().map(Value::String).collect();
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("required".into(), Value::Array(all));
    schema.insert("additionalProperties".into(), Value::Bool(false));
}

/// `schema` that also accepts `null`: `null` added to a simple `type` (and to
/// its `enum`), to an existing `anyOf`, or else the schema wrapped in one.
fn nullable(schema: Value) -> Value {
    let Value::Object(mut object) = schema else {
        return schema;
    };
    let null_type = json!({ "type": "null" });
    if accepts_null(&object, &null_type) {
        return Value::Object(object);
    }
    let mut types = match object.get("type") {
        Some(Value::String(t)) if t != "object" => vec![Value::String(t.clone())],
        Some(Value::Array(types)) if !types.iter().any(|t| t == "object") => types.clone(),
        _ => Vec::new(),
    };
    if !types.is_empty() {
        types.push("null".into());
        object.insert("type".into(), Value::Array(types));
        if let Some(Value::Array(values)) = object.get_mut("enum")
            && !values.contains(&Value::Null)
        {
            values.push(Value::Null);
        }
        return Value::Object(object);
    }
    if let Some(Value::Array(branches)) = object.get_mut("anyOf") {
        branches.push(null_type);
        return Value::Object(object);
    }
    let mut wrapper = Map::new();
    if let Some(description) = object.remove("description") {
        wrapper.insert("description".into(), description);
    }
    wrapper.insert("anyOf".into(), json!([object, null_type]));
    Value::Object(wrapper)
}

fn accepts_null(schema: &Map<String, Value>, null_type: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) if t == "null" => return true,
        Some(Value::Array(types)) if types.iter().any(|t| t == "null") => return true,
        _ => {}
    }
    matches!(schema.get("anyOf"), Some(Value::Array(b)) if b.contains(null_type))
}

/// Rewrites `schema` into the OpenAPI 3.0 subset Gemini accepts for function
/// parameters: `$ref`s inlined (recursive types cut off after
/// [`MAX_REF_REPEATS`] levels), `type: [T, "null"]` and `anyOf` with a null
/// branch turned into `nullable: true`, `oneOf` into `anyOf`, `const` into a
/// one-value `enum`, only the formats Gemini documents (`enum`/`date-time`
/// for strings, `int32`/`int64`, `float`/`double`) and only the keywords in
/// its `Schema` object kept.
pub fn gemini(schema: &Value) -> Value {
    gemini_node(schema, &mut Refs::new(schema))
}

fn gemini_node(node: &Value, refs: &mut Refs) -> Value {
    let Some(object) = node.as_object() else {
        return json!({});
    };
    if let Some(Value::String(reference)) = object.get("$ref") {
        // A recursive type cut off here, or a dangling reference: accept any
        // object rather than fail the whole request.
        let mut merged = refs
            .target(reference, MAX_REF_REPEATS)
            .unwrap_or_else(|| Map::from_iter([("type".to_string(), json!("object"))]));
        let mut rest = object.clone();
        rest.remove("$ref");
        merged.extend(rest);
        refs.path.push(reference.clone());
        let converted = gemini_node(&Value::Object(merged), refs);
        refs.path.pop();
        return converted;
    }
    let mut object = object.clone();
    // schemars 0.8 wraps a described `$ref` in a one-element `allOf`.
    if let Some(Value::Array(parts)) = object.remove("allOf") {
        for part in parts {
            if let Value::Object(part) = gemini_node(&part, refs) {
                merge_into(&mut object, part);
            }
        }
    }
    if let Some(one_of) = object.remove("oneOf") {
        object.entry("anyOf").or_insert(one_of);
    }
    if let Some(value) = object.remove("const") {
        object.entry("enum").or_insert(json!([value]));
    }

    let mut out = Map::new();
    let mut nullable = object.get("nullable") == Some(&Value::Bool(true));
    nullable |= gemini_type(object.get("type"), &mut out);
    if let Some(Value::Array(branches)) = object.get("anyOf") {
        nullable |= gemini_any_of(branches, refs, &mut out);
    }
    for (key, value) in &object {
        match key.as_str() {
            "type" | "anyOf" | "nullable" => {}
            "properties" => {
                let properties: Map<String, Value> = value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, s)| (name.clone(), gemini_node(s, refs)))
                    .collect();
                out.insert(key.clone(), Value::Object(properties));
            }
            "items" if value.is_object() => {
                out.insert(key.clone(), gemini_node(value, refs));
            }
            "items" => {}
            _ if listed(GEMINI_KEYWORDS, key) => {
                out.insert(key.clone(), value.clone());
            }
            _ => {}
        }
    }
    gemini_fix_enum(&mut out);
    gemini_fix_format(&mut out);
    gemini_fix_required(&mut out);
    if nullable {
        out.insert("nullable".into(), Value::Bool(true));
    }
    Value::Object(out)
}

/// Sets `type` from a JSON Schema `type` (one name, or a list: several
/// become an `anyOf`); returns whether it allowed `null`.
fn gemini_type(kind: Option<&Value>, out: &mut Map<String, Value>) -> bool {
    match kind {
        Some(Value::String(t)) if t == "null" => true,
        Some(Value::String(t)) => {
            out.insert("type".into(), json!(t));
            false
        }
        Some(Value::Array(types)) => {
            let kinds: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
            match kinds.as_slice() {
                [] => {}
                [one] => {
                    out.insert("type".into(), (*one).clone());
                }
                many => {
                    let branches = many.iter().map(|t| json!({ "type": t })).collect();
                    out.insert("anyOf".into(), Value::Array(branches));
                }
            }
            kinds.len() < types.len()
        }
        _ => false,
    }
}

/// Converts `anyOf` branches; a `null` branch becomes `nullable` (the
/// return value), and a single remaining branch replaces the union.
fn gemini_any_of(branches: &[Value], refs: &mut Refs, out: &mut Map<String, Value>) -> bool {
    let mut nullable = false;
    let mut kept = Vec::new();
    for branch in branches {
        let converted = gemini_node(branch, refs);
        let null_only = converted.get("type").is_none()
            && converted.get("anyOf").is_none()
            && converted.get("nullable") == Some(&Value::Bool(true));
        if null_only {
            nullable = true;
        } else {
            kept.push(converted);
        }
    }
    if kept.len() > 1 {
        out.insert("anyOf".into(), Value::Array(kept));
    } else if let Some(Value::Object(only)) = kept.pop() {
        merge_into(out, only);
    }
    nullable
}

/// Gemini enums are strings; other values are described in words instead, so
/// the argument keeps its real type.
fn gemini_fix_enum(schema: &mut Map<String, Value>) {
    let Some(Value::Array(values)) = schema.get("enum") else {
        return;
    };
    let values: Vec<Value> = values.iter().filter(|v| !v.is_null()).cloned().collect();
    if values.iter().all(Value::is_string) && !values.is_empty() {
        schema.insert("enum".into(), Value::Array(values));
        return;
    }
    schema.remove("enum");
    if values.is_empty() {
        return;
    }
    let listed: Vec<String> = values.iter().map(Value::to_string).collect();
    let note = format!("One of: {}.", listed.join(", "));
    let description = match schema.get("description").and_then(Value::as_str) {
        Some(text) => format!("{text} {note}"),
        None => note,
    };
    schema.insert("description".into(), Value::String(description));
}

/// Keeps a `format` only where the Gemini API documents it ("for NUMBER
/// type: float, double; for INTEGER type: int32, int64; for STRING type:
/// enum, date-time", the `Schema.format` field of the v1beta discovery
/// document); others, such as schemars' `uint64`, are refused with a 400.
fn gemini_fix_format(schema: &mut Map<String, Value>) {
    let allowed: &[&str] = match schema.get("type").and_then(Value::as_str) {
        Some("string") => &["enum", "date-time"],
        Some("integer") => &["int32", "int64"],
        Some("number") => &["float", "double"],
        _ => &[],
    };
    let keep = schema
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| allowed.contains(&f));
    if !keep {
        schema.remove("format");
    }
}

/// Gemini refuses a `required` name that is not among the `properties`.
fn gemini_fix_required(schema: &mut Map<String, Value>) {
    let Some(Value::Array(names)) = schema.get("required") else {
        return;
    };
    let known = schema.get("properties").and_then(Value::as_object);
    let names: Vec<Value> = names
        .iter()
        .filter(|n| {
            n.as_str()
                .is_some_and(|n| known.is_some_and(|k| k.contains_key(n)))
        })
        .cloned()
        .collect();
    if names.is_empty() {
        schema.remove("required");
    } else {
        schema.insert("required".into(), Value::Array(names));
    }
}

/// Adds `part`'s keywords to `target`: properties and required names are
/// united, other keywords already in `target` win (a description next to a
/// reference beats the referenced type's own).
fn merge_into(target: &mut Map<String, Value>, part: Map<String, Value>) {
    for (key, value) in part {
        match (key.as_str(), target.get_mut(&key), value) {
            ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                for (name, s) in theirs {
                    mine.entry(name).or_insert(s);
                }
            }
            ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
                for name in theirs {
                    if !mine.contains(&name) {
                        mine.push(name);
                    }
                }
            }
            (_, Some(_), _) => {}
            (_, None, value) => {
                target.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `read_file` of the files tool, as `wasm-agent tools --json` prints it.
    fn read_file_schema() -> Value {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "additionalProperties": false,
            "description": "A file to read.",
            "properties": {
                "max_bytes": {
                    "description": "Read at most this many bytes from the start (default 262144).",
                    "format": "uint64", "minimum": 0, "type": ["integer", "null"]
                },
                "path": { "description": "Absolute path of the file.", "type": "string" }
            },
            "required": ["path"],
            "type": "object"
        })
    }

    /// schemars 1.2 output for a struct with nested, optional, recursive and
    /// internally tagged types (`#[serde(tag = "kind")]`).
    fn edit_schema() -> Value {
        serde_json::from_str(EDIT_SCHEMA).unwrap()
    }

    const EDIT_SCHEMA: &str = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"EditArgs","description":"Edit a file.","type":"object","properties":{"edits":{"description":"More edits.","type":"array","items":{"$ref":"#/$defs/Edit"}},"first":{"description":"The first edit.","$ref":"#/$defs/Edit"},"level":{"description":"Level.","type":["integer","null"],"format":"int32"},"mode":{"description":"How to apply them.","anyOf":[{"$ref":"#/$defs/Mode"},{"type":"null"}]},"op":{"description":"An operation.","$ref":"#/$defs/Op"},"path":{"description":"The file.","type":"string"},"ratio":{"description":"Ratio.","type":"number","format":"double","maximum":1.0,"minimum":0.0},"tags":{"description":"Tags.","type":["array","null"],"items":{"type":"string"},"maxItems":3},"tree":{"description":"A tree.","anyOf":[{"$ref":"#/$defs/Node"},{"type":"null"}]}},"required":["path","first","op","ratio"],"$defs":{"Edit":{"description":"One change.","type":"object","properties":{"at":{"description":"When it was made.","type":["string","null"],"format":"date-time"},"line":{"description":"Line number, from 1.","type":"integer","format":"uint32","minimum":0},"text":{"description":"New text.","type":"string"}},"required":["line","text"]},"Mode":{"description":"How edits are applied.","type":"string","enum":["replace","append"]},"Node":{"description":"A tree of names.","type":"object","properties":{"children":{"description":"Its children.","type":"array","items":{"$ref":"#/$defs/Node"}},"name":{"description":"This node's name.","type":"string"}},"required":["name","children"]},"Op":{"description":"An operation.","oneOf":[{"description":"Insert lines.","type":"object","properties":{"before":{"type":"integer","format":"uint32","minimum":0},"kind":{"type":"string","const":"insert"},"lines":{"type":"array","items":{"type":"string"}}},"required":["kind","before","lines"]},{"description":"Delete lines.","type":"object","properties":{"count":{"type":"integer","format":"uint32","minimum":0},"from":{"type":"integer","format":"uint32","minimum":0},"kind":{"type":"string","const":"delete"}},"required":["kind","from","count"]}]}}}"##;

    fn sorted(names: &Value) -> Vec<String> {
        let mut names: Vec<String> = names
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    }

    /// Every object schema under `schema` (and `schema` itself).
    fn walk<'a>(schema: &'a Value, found: &mut Vec<&'a Map<String, Value>>) {
        match schema {
            Value::Object(map) => {
                found.push(map);
                map.values().for_each(|v| walk(v, found));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, found)),
            _ => {}
        }
    }

    #[test]
    fn openai_strict_real_tool_schema() {
        let strict = openai_strict(&read_file_schema());
        assert_eq!(sorted(&strict["required"]), ["max_bytes", "path"]);
        assert_eq!(strict["additionalProperties"], false);
        assert!(strict.get("$schema").is_none());
        assert_eq!(
            strict["properties"]["max_bytes"],
            json!({ "description": "Read at most this many bytes from the start (default 262144).",
                    "minimum": 0, "type": ["integer", "null"] })
        );
    }

    #[test]
    fn openai_strict_nested_defs_refs_and_unions() {
        let strict = openai_strict(&edit_schema());
        let properties = &strict["properties"];
        assert!(strict.get("title").is_none());
        assert_eq!(sorted(&strict["required"]).len(), 9);
        // Every object is closed and requires all its properties.
        let mut objects = Vec::new();
        walk(&strict, &mut objects);
        for object in objects.iter().filter(|o| o.contains_key("properties")) {
            assert_eq!(object["additionalProperties"], false, "{object:?}");
            assert_eq!(
                object["required"].as_array().unwrap().len(),
                object["properties"].as_object().unwrap().len()
            );
        }
        // A described `$ref` is inlined; a bare one stays.
        assert!(properties["first"].get("$ref").is_none());
        assert_eq!(properties["first"]["description"], "The first edit.");
        assert_eq!(properties["edits"]["type"], json!(["array", "null"]));
        assert_eq!(
            properties["edits"]["items"],
            json!({ "$ref": "#/$defs/Edit" })
        );
        assert_eq!(
            strict["$defs"]["Edit"]["properties"]["at"]["type"],
            json!(["string", "null"])
        );
        assert_eq!(
            strict["$defs"]["Edit"]["properties"]["at"]["format"],
            "date-time"
        );
        assert!(
            strict["$defs"]["Edit"]["properties"]["line"]
                .get("format")
                .is_none()
        );
        assert_eq!(
            strict["$defs"]["Node"]["properties"]["children"]["items"],
            json!({ "$ref": "#/$defs/Node" })
        );
        // Already nullable unions are left alone; oneOf becomes anyOf; const an enum.
        assert_eq!(
            properties["mode"]["anyOf"],
            json!([{ "$ref": "#/$defs/Mode" }, { "type": "null" }])
        );
        let branches = properties["op"]["anyOf"].as_array().unwrap();
        assert_eq!(branches.len(), 2);
        assert_eq!(
            branches[1]["properties"]["kind"],
            json!({ "type": "string", "enum": ["delete"] })
        );
        assert!(properties["level"].get("format").is_none());
        assert_eq!(properties["ratio"]["maximum"], 1.0);
        assert_eq!(properties["tags"]["maxItems"], 3);
    }

    #[test]
    fn openai_nullable_shapes_and_dropped_keywords() {
        let schema = json!({
            "type": "object",
            "properties": {
                "color": { "type": "string", "enum": ["red", "blue"], "default": "red" },
                "point": { "description": "Where.", "type": "object",
                           "properties": { "x": { "type": "number" } } },
                "name": { "type": "string", "minLength": 1, "title": "Name", "examples": ["a"] },
                "list": { "type": "array", "items": { "type": "object", "properties": {} } },
                "fixed": { "const": 3 }
            },
            "required": ["name", "list"]
        });
        let strict = openai_strict(&schema);
        let p = &strict["properties"];
        assert_eq!(
            p["color"],
            json!({ "type": ["string", "null"], "enum": ["red", "blue", null] })
        );
        assert_eq!(
            p["point"],
            json!({ "description": "Where.", "anyOf": [
                { "type": "object", "properties": { "x": { "type": ["number", "null"] } },
                  "required": ["x"], "additionalProperties": false },
                { "type": "null" }
            ] })
        );
        assert_eq!(p["name"], json!({ "type": "string" }));
        assert_eq!(
            p["list"]["items"],
            json!({ "type": "object", "properties": {}, "required": [], "additionalProperties": false })
        );
        assert_eq!(
            p["fixed"],
            json!({ "anyOf": [{ "enum": [3] }, { "type": "null" }] })
        );
    }

    #[test]
    fn gemini_real_tool_schema() {
        assert_eq!(
            gemini(&read_file_schema()),
            json!({
                "description": "A file to read.",
                "properties": {
                    "max_bytes": { "description": "Read at most this many bytes from the start (default 262144).",
                                   "minimum": 0, "type": "integer", "nullable": true },
                    "path": { "description": "Absolute path of the file.", "type": "string" }
                },
                "required": ["path"],
                "type": "object"
            })
        );
    }

    #[test]
    fn gemini_inlines_refs_and_flattens_nullables() {
        let converted = gemini(&edit_schema());
        let mut objects = Vec::new();
        walk(&converted, &mut objects);
        for object in &objects {
            for key in [
                "$ref",
                "$defs",
                "$schema",
                "title",
                "additionalProperties",
                "oneOf",
                "const",
            ] {
                assert!(!object.contains_key(key), "{key} left in {object:?}");
            }
        }
        let p = &converted["properties"];
        assert_eq!(p["first"]["description"], "The first edit.");
        assert_eq!(
            p["first"]["properties"]["at"],
            json!({
            "description": "When it was made.", "type": "string", "format": "date-time", "nullable": true })
        );
        assert!(p["first"]["properties"]["line"].get("format").is_none());
        assert_eq!(
            p["mode"],
            json!({ "description": "How to apply them.", "type": "string",
                                      "enum": ["replace", "append"], "nullable": true })
        );
        assert_eq!(
            p["level"],
            json!({ "description": "Level.", "type": "integer", "format": "int32", "nullable": true })
        );
        assert_eq!(p["ratio"]["format"], "double");
        assert_eq!(
            p["op"]["anyOf"][0]["properties"]["kind"],
            json!({ "type": "string", "enum": ["insert"] })
        );
        assert_eq!(p["tags"]["nullable"], true);
        // The recursive tree is unrolled twice, then cut off.
        let node = &p["tree"]["properties"]["children"]["items"];
        assert_eq!(node["description"], "A tree of names.");
        assert_eq!(
            node["properties"]["children"]["items"],
            json!({ "type": "object" })
        );
    }

    #[test]
    fn gemini_keyword_edge_cases() {
        let schema = json!({
            "definitions": { "Port": { "type": "integer", "format": "uint16", "maximum": 65535 } },
            "type": "object",
            "properties": {
                "port": { "allOf": [{ "$ref": "#/definitions/Port" }], "description": "Port." },
                "id": { "type": ["string", "integer"] },
                "level": { "type": "integer", "enum": [1, 2, 3] },
                "url": { "type": "string", "format": "uri", "pattern": "^https://" },
                "gone": { "$ref": "#/definitions/Missing" },
                "nothing": { "type": "null" }
            },
            "required": ["port", "ghost"]
        });
        let p = gemini(&schema);
        assert_eq!(p["required"], json!(["port"]));
        assert_eq!(
            p["properties"]["port"],
            json!({ "type": "integer", "maximum": 65535, "description": "Port." })
        );
        assert_eq!(
            p["properties"]["id"],
            json!({ "anyOf": [{ "type": "string" }, { "type": "integer" }] })
        );
        assert_eq!(
            p["properties"]["level"],
            json!({ "type": "integer", "description": "One of: 1, 2, 3." })
        );
        assert_eq!(p["properties"]["url"], json!({ "type": "string" }));
        assert_eq!(p["properties"]["gone"], json!({ "type": "object" }));
        assert_eq!(p["properties"]["nothing"], json!({ "nullable": true }));
    }

    #[test]
    fn hostile_schemas_terminate() {
        for schema in [
            json!(true),
            json!(null),
            json!("x"),
            json!({ "$ref": "#", "description": "me" }),
        ] {
            let _ = openai_strict(&schema);
            let _ = gemini(&schema);
        }
        // Twelve definitions, each using the next six times: inlining all of
        // it would take 6^12 copies.
        let mut defs = Map::new();
        for level in 0..12 {
            let next = json!({ "$ref": format!("#/$defs/D{}", level + 1), "description": "next" });
            let properties: Map<String, Value> =
                (0..6).map(|i| (format!("p{i}"), next.clone())).collect();
            defs.insert(
                format!("D{level}"),
                json!({ "type": "object", "properties": properties }),
            );
        }
        defs.insert("D12".into(), json!({ "type": "string" }));
        let schema = json!({ "$defs": defs, "$ref": "#/$defs/D0", "description": "root" });
        assert!(gemini(&schema).to_string().len() < 1_000_000);
        assert!(openai_strict(&schema).to_string().len() < 1_000_000);
        // A chain of a thousand definitions, each using the next.
        let chain: Map<String, Value> = (0..1000)
            .map(|i| {
                let next = json!({ "$ref": format!("#/$defs/C{}", i + 1), "description": "next" });
                (
                    format!("C{i}"),
                    json!({ "type": "object", "properties": { "next": next } }),
                )
            })
            .collect();
        let schema = json!({ "$defs": chain, "$ref": "#/$defs/C0", "description": "root" });
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || (gemini(&schema), openai_strict(&schema)))
            .unwrap()
            .join()
            .unwrap();
        let cycle = json!({
            "$defs": { "A": { "$ref": "#/$defs/B", "description": "a" }, "B": { "$ref": "#/$defs/A", "description": "b" } },
            "type": "object", "properties": { "a": { "$ref": "#/$defs/A", "description": "start" } }
        });
        let _ = gemini(&cycle);
        let _ = openai_strict(&cycle);
    }
}
