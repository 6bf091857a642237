//! Unit tests of the parent module.

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
