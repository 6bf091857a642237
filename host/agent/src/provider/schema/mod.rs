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
/// `MAX_REF_REPEATS` levels), `type: [T, "null"]` and `anyOf` with a null
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
mod tests;
