//! A structural outline of a JSON document: types, keys and array lengths,
//! with the elements of each array (and the values of each key across them)
//! merged so a list of a thousand records reads as one record shape.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::Value;

/// Bounds that keep a summary readable whatever the document.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Levels below the root that are expanded.
    pub max_depth: usize,
    /// Keys listed per object shape.
    pub max_keys: usize,
    /// Array elements merged per array.
    pub max_elements: usize,
    /// Lines in the whole summary.
    pub max_lines: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_depth: 6,
            max_keys: 40,
            max_elements: 1000,
            max_lines: 400,
        }
    }
}

/// The outline of `document`, one line per key or array-element shape.
pub fn summarize(document: &Value, limits: Limits) -> String {
    let mut summary = Summary {
        limits,
        lines: Vec::new(),
        cut: false,
    };
    summary.describe("$", &[document], None, 0);
    let mut text = summary.lines.join("\n");
    if summary.cut {
        let _ = write!(text, "\n… summary cut at {} lines", limits.max_lines);
    }
    text
}

struct Summary {
    limits: Limits,
    lines: Vec<String>,
    cut: bool,
}

impl Summary {
    /// Describes `values` (one value, or the values of one key or of array
    /// elements across a merged set) under `label`. `containers` is how many
    /// objects the key was looked for in, so missing keys show as optional.
    fn describe(
        &mut self,
        label: &str,
        values: &[&Value],
        containers: Option<usize>,
        depth: usize,
    ) {
        if self.lines.len() >= self.limits.max_lines {
            self.cut = true;
            return;
        }
        let mut line = format!("{}{label}: {}", "  ".repeat(depth), kinds(values));
        if let Some(total) = containers.filter(|total| values.len() < *total) {
            let _ = write!(line, "; in {} of {total} objects", values.len());
        }
        let has_children = values.iter().any(|value| {
            matches!(value, Value::Object(map) if !map.is_empty())
                || matches!(value, Value::Array(items) if !items.is_empty())
        });
        if has_children && depth >= self.limits.max_depth {
            line.push_str(" (not expanded)");
        }
        self.lines.push(line);
        if !has_children || depth >= self.limits.max_depth {
            return;
        }
        self.describe_keys(values, depth);
        self.describe_elements(values, depth);
    }

    fn describe_keys(&mut self, values: &[&Value], depth: usize) {
        let objects: Vec<_> = values
            .iter()
            .filter_map(|value| value.as_object())
            .collect();
        if objects.is_empty() {
            return;
        }
        // Keys in first-seen order, each with its values across the objects.
        let mut order: Vec<&str> = Vec::new();
        let mut by_key: HashMap<&str, Vec<&Value>> = HashMap::new();
        for object in &objects {
            for (key, value) in object.iter() {
                by_key
                    .entry(key.as_str())
                    .or_insert_with(|| {
                        order.push(key.as_str());
                        Vec::new()
                    })
                    .push(value);
            }
        }
        let shown = order.len().min(self.limits.max_keys);
        let containers = (objects.len() > 1).then_some(objects.len());
        for key in &order[..shown] {
            let label = if is_plain(key) {
                format!(".{key}")
            } else {
                format!(".{key:?}")
            };
            let key_values = by_key.remove(key).unwrap_or_default();
            self.describe(&label, &key_values, containers, depth + 1);
        }
        if order.len() > shown && self.lines.len() < self.limits.max_lines {
            let more = order.len() - shown;
            self.lines
                .push(format!("{}… {more} more keys", "  ".repeat(depth + 1)));
        }
    }

    fn describe_elements(&mut self, values: &[&Value], depth: usize) {
        let mut elements: Vec<&Value> = Vec::new();
        let mut total = 0;
        for items in values.iter().filter_map(|value| value.as_array()) {
            total += items.len();
            let room = self.limits.max_elements.saturating_sub(elements.len());
            elements.extend(items.iter().take(room));
        }
        if elements.is_empty() {
            return;
        }
        let label = if elements.len() < total {
            format!("[] (first {} of {total} merged)", elements.len())
        } else {
            "[]".to_owned()
        };
        self.describe(&label, &elements, None, depth + 1);
    }
}

/// "object, 3 keys" for one value; "object ×118, null ×2" for several.
fn kinds(values: &[&Value]) -> String {
    if let [value] = values {
        return match value {
            Value::Null => "null".to_owned(),
            Value::Bool(flag) => format!("boolean ({flag})"),
            Value::Number(number) => format!("number ({number})"),
            Value::String(text) => format!("string ({})", sample(text)),
            Value::Array(items) => format!("array, {} item{}", items.len(), plural(items.len())),
            Value::Object(map) => format!("object, {} key{}", map.len(), plural(map.len())),
        };
    }
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for value in values {
        let name = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        match counts.iter_mut().find(|(known, _)| *known == name) {
            Some((_, count)) => *count += 1,
            None => counts.push((name, 1)),
        }
    }
    let mut text = counts
        .iter()
        .map(|(name, count)| format!("{name} ×{count}"))
        .collect::<Vec<_>>()
        .join(", ");
    let lengths: Vec<usize> = values
        .iter()
        .filter_map(|v| v.as_array())
        .map(Vec::len)
        .collect();
    if let (Some(min), Some(max)) = (lengths.iter().min(), lengths.iter().max()) {
        let _ = write!(text, " (arrays of {min}-{max} items)");
    }
    text
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

/// A JSON-quoted string, shortened to about 40 characters.
fn sample(text: &str) -> String {
    const MAX: usize = 40;
    if text.chars().count() <= MAX {
        return Value::String(text.to_owned()).to_string();
    }
    let head: String = text.chars().take(MAX).collect();
    format!("{}…, {} chars", Value::String(head), text.chars().count())
}

fn is_plain(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn records_merge_into_one_shape() {
        let document = json!({
            "name": "shop",
            "orders": [
                {"id": 1, "note": "rush", "items": [1, 2]},
                {"id": 2, "items": []},
                null
            ]
        });
        let expected = "\
$: object, 2 keys
  .name: string (\"shop\")
  .orders: array, 3 items
    []: object ×2, null ×1
      .id: number ×2
      .note: string (\"rush\"); in 1 of 2 objects
      .items: array ×2 (arrays of 0-2 items)
        []: number ×2";
        assert_eq!(summarize(&document, Limits::default()), expected);
    }

    #[test]
    fn limits_bound_the_output() {
        let deep = json!({"a": {"b": {"c": {"d": 1}}}});
        let limits = Limits {
            max_depth: 2,
            ..Limits::default()
        };
        assert_eq!(
            summarize(&deep, limits),
            "$: object, 1 key\n  .a: object, 1 key\n    .b: object, 1 key (not expanded)"
        );

        let wide: serde_json::Map<String, Value> =
            (0..5).map(|i| (format!("k{i}"), json!(i))).collect();
        let limits = Limits {
            max_keys: 2,
            ..Limits::default()
        };
        let text = summarize(&Value::Object(wide), limits);
        assert!(
            text.ends_with("  .k1: number (1)\n  … 3 more keys"),
            "{text}"
        );

        let long = json!((0..10).collect::<Vec<_>>());
        let limits = Limits {
            max_elements: 4,
            ..Limits::default()
        };
        assert!(summarize(&long, limits).contains("[] (first 4 of 10 merged): number ×4"));

        let limits = Limits {
            max_lines: 2,
            ..Limits::default()
        };
        let text = summarize(&json!({"a": 1, "b": 2, "c": 3}), limits);
        assert!(text.ends_with("… summary cut at 2 lines"), "{text}");
    }

    #[test]
    fn scalars_and_odd_keys() {
        assert_eq!(summarize(&json!(3.5), Limits::default()), "$: number (3.5)");
        let long = "x".repeat(50);
        assert_eq!(
            summarize(&json!({"a b": long}), Limits::default()),
            format!(
                "$: object, 1 key\n  .\"a b\": string (\"{}\"…, 50 chars)",
                "x".repeat(40)
            )
        );
    }
}
