//! Python values to the JSON arguments of a tool call.

use monty_types::MontyObject;
use serde_json::{Map, Number, Value};

/// Nesting deeper than this is refused (a JSON argument that deep is a
/// mistake or an attack).
const MAX_DEPTH: usize = 64;

/// `value` as JSON, or what in it has no JSON form.
pub fn to_json(value: &MontyObject) -> Result<Value, String> {
    to_json_at(value, 0)
}

fn to_json_at(value: &MontyObject, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!("arguments nested deeper than {MAX_DEPTH} levels"));
    }
    let items = |items: &[MontyObject]| -> Result<Value, String> {
        items
            .iter()
            .map(|item| to_json_at(item, depth + 1))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    };
    Ok(match value {
        MontyObject::None => Value::Null,
        MontyObject::Bool(b) => Value::Bool(*b),
        MontyObject::Int(i) => Value::from(*i),
        MontyObject::BigInt(i) => {
            let text = i.to_string();
            Value::Number(
                text.parse::<Number>()
                    .map_err(|_| format!("integer {text} is too large for JSON"))?,
            )
        }
        MontyObject::Float(f) => Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| format!("float {f} has no JSON form"))?,
        MontyObject::String(s) => Value::String(s.clone()),
        MontyObject::List(list) | MontyObject::Tuple(list) => items(list)?,
        MontyObject::Set(set) | MontyObject::FrozenSet(set) => items(set)?,
        MontyObject::NamedTuple { values, .. } => items(values)?,
        MontyObject::Dict(pairs) => {
            let mut object = Map::new();
            for (key, item) in pairs.iter() {
                let MontyObject::String(key) = key else {
                    return Err(format!(
                        "dict keys must be strings for JSON, not {}",
                        key.py_repr()
                    ));
                };
                object.insert(key.clone(), to_json_at(item, depth + 1)?);
            }
            Value::Object(object)
        }
        other => {
            return Err(format!(
                "{} has no JSON form (pass str, int, float, bool, None, list or dict)",
                other.py_repr()
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_values_become_json() {
        let dict = MontyObject::Dict(
            vec![(
                MontyObject::String("a".into()),
                MontyObject::Tuple(vec![MontyObject::Int(1), MontyObject::None]),
            )]
            .into(),
        );
        assert_eq!(to_json(&dict).unwrap(), serde_json::json!({"a": [1, null]}));
        assert!(to_json(&MontyObject::Float(f64::NAN)).is_err());
        let bad_key = MontyObject::Dict(vec![(MontyObject::Int(1), MontyObject::None)].into());
        assert!(to_json(&bad_key).unwrap_err().contains("dict keys"));
    }
}
