//! Unit tests of the parent module.

use super::*;
use serde_json::json;

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// Splits a JSON-shaped output into its JSON line and its note.
fn json_and_note(out: &str) -> (Value, &str) {
    let (json, note) = out.split_once('\n').expect("a note line");
    (serde_json::from_str(json).expect("valid JSON"), note)
}

fn compact_len(v: &Value) -> usize {
    chars(&v.to_string())
}

#[test]
fn text_that_fits_is_unchanged() {
    assert_eq!(truncate("", 0), "");
    assert_eq!(truncate("hello", 5), "hello");
    assert_eq!(truncate("日本語", 3), "日本語");
    let pretty = "{\n  \"a\": 1\n}";
    assert_eq!(truncate(pretty, 100), pretty);
}

#[test]
fn small_budgets_cut_plainly_without_a_note() {
    assert_eq!(truncate("hello world", 0), "");
    assert_eq!(truncate("hello world", 5), "hello");
    assert_eq!(truncate("日本語のテキスト", 3), "日本語");
    let long = "x".repeat(1000);
    assert_eq!(truncate(&long, 63), "x".repeat(63));
    // Even JSON is cut plainly: there is no room for a note.
    assert_eq!(truncate("[1,2,3,4,5,6,7,8,9]", 4), "[1,2");
}

#[test]
fn plain_text_gets_an_exact_note() {
    let text = "x".repeat(200);
    let out = truncate(&text, 100);
    let note = "\n[truncated: 143 of 200 characters omitted]";
    assert_eq!(out, format!("{}{note}", "x".repeat(57)));
    assert_eq!(chars(&out), 100);
}

#[test]
fn plain_text_prefers_a_newline_in_the_last_tenth() {
    // Budget for content is 400 - 44 = 356; window is the last 35 chars.
    let text = format!("{}\n{}", "a".repeat(340), "b c ".repeat(100));
    let out = truncate(&text, 400);
    assert!(out.starts_with(&format!("{}\n[truncated: ", "a".repeat(340))));
    assert!(chars(&out) <= 400);
}

#[test]
fn plain_text_falls_back_to_whitespace_then_a_hard_cut() {
    let words = "word ".repeat(200);
    let out = truncate(&words, 300);
    let (body, note) = out.split_once("\n[truncated: ").unwrap();
    assert!(body.ends_with("word"), "{body:?}");
    assert!(words.starts_with(body));
    assert!(note.ends_with(" of 1000 characters omitted]"));

    // A newline outside the window is not used.
    let far = format!("ab\n{}", "c".repeat(1000));
    let out = truncate(&far, 300);
    let body = out.split("\n[truncated").next().unwrap();
    assert_eq!(body, &far[..chars(body)]);
    assert!(chars(body) > 200);
    assert!(chars(&out) <= 300);
}

#[test]
fn plain_text_cuts_on_char_boundaries() {
    for text in ["é".repeat(500), "日本語".repeat(200), "🦀a".repeat(300)] {
        for max in [64, 65, 99, 100, 101, 333] {
            let out = truncate(&text, max);
            assert!(chars(&out) <= max, "{max}");
            let body = out.split("\n[truncated").next().unwrap();
            assert!(text.starts_with(body));
        }
    }
}

#[test]
fn a_note_too_long_for_the_budget_gives_a_plain_cut() {
    // Only reachable with absurd totals; call the inner function directly.
    let out = truncate_plain(&"z".repeat(100), usize::MAX / 2, 64);
    assert_eq!(out, "z".repeat(64));
}

#[test]
fn arrays_keep_the_leading_items_that_fit() {
    let items: Vec<Value> = (0..340)
        .map(|i| json!({"id": i, "name": format!("item number {i}")}))
        .collect();
    let text = serde_json::to_string_pretty(&items).unwrap();
    let out = truncate(&text, 4000);
    assert!(chars(&out) <= 4000);
    let (json, note) = json_and_note(&out);
    let kept = json.as_array().unwrap();
    let k = kept.len();
    assert!(k > 50, "{k}");
    assert_eq!(kept[..], items[..k]);
    assert_eq!(
        note,
        format!(
            "[showing {k} of 340 items; {} omitted to fit 4000 characters]",
            340 - k
        )
    );
    // One more item would not have fitted.
    let longer = Value::Array(items[..=k].to_vec());
    assert!(compact_len(&longer) + 1 + chars(note) > 4000);
}

#[test]
fn pretty_json_that_fits_compacted_is_returned_compact() {
    let value = json!({"a": [1, 2, 3], "b": {"c": "d"}, "long": "x".repeat(60)});
    let text = serde_json::to_string_pretty(&value).unwrap();
    let out = truncate(&text, compact_len(&value));
    assert_eq!(out, value.to_string());
    let padded = format!("[{}]", " ".repeat(100));
    assert_eq!(truncate(&padded, 64), "[]");
}

#[test]
fn an_array_whose_first_item_is_too_big_shrinks_inside_it() {
    let items = json!([
        {"id": 1, "rows": (0..500).collect::<Vec<_>>()},
        {"id": 2, "rows": [1, 2, 3]}
    ]);
    let out = truncate(&items.to_string(), 300);
    assert!(chars(&out) <= 300);
    let (json, note) = json_and_note(&out);
    assert_eq!(json[0]["id"], 1);
    assert!(!json[0]["rows"].as_array().unwrap().is_empty());
    assert!(
        note.starts_with("[truncated to fit 300 characters: $[].rows "),
        "{note}"
    );
}

#[test]
fn objects_shrink_arrays_in_proportion_and_keep_scalars() {
    let results: Vec<Value> = (0..340).map(|i| json!({"n": i})).collect();
    let value = json!({
        "query": "rust wasm",
        "total": 340,
        "results": results,
        "tags": (0..34).map(|i| format!("t{i}")).collect::<Vec<_>>(),
    });
    let out = truncate(&value.to_string(), 2000);
    assert!(chars(&out) <= 2000);
    let (json, note) = json_and_note(&out);
    assert_eq!(json["query"], "rust wasm");
    assert_eq!(json["total"], 340);
    let kept = json["results"].as_array().unwrap();
    let tags = json["tags"].as_array().unwrap();
    assert!(kept.len() > 10 && kept.len() < 340);
    assert_eq!(kept[..], value["results"].as_array().unwrap()[..kept.len()]);
    // Ten times the items, ten times the share kept (within rounding).
    assert!(tags.len() * 10 <= kept.len() + 10 && kept.len() < tags.len() * 10 + 10);
    assert!(
        note.starts_with(&format!(
            "[truncated to fit 2000 characters: $.results {} of 340 items, $.tags {} of 34 items",
            kept.len(),
            tags.len()
        )),
        "{note}"
    );
}

#[test]
fn nested_arrays_are_named_by_path_pattern() {
    let results: Vec<Value> = (0..50)
        .map(|i| json!({"id": i, "tags": (0..40).collect::<Vec<_>>()}))
        .collect();
    let value = json!({"data": {"results": results}});
    let out = truncate(&value.to_string(), 1500);
    assert!(chars(&out) <= 1500);
    let (json, note) = json_and_note(&out);
    let kept = json["data"]["results"].as_array().unwrap();
    assert!(!kept.is_empty() && kept.len() < 50);
    assert!(
        kept.iter()
            .all(|r| r["tags"].as_array().unwrap().len() < 40)
    );
    assert!(note.contains("$.data.results "), "{note}");
    assert!(note.contains("$.data.results[].tags "), "{note}");
}

#[test]
fn long_strings_are_cut_when_dropping_items_is_not_enough() {
    let value = json!({"path": "notes.txt", "content": "line of text\n".repeat(1000)});
    let out = truncate(&value.to_string(), 1000);
    assert!(chars(&out) <= 1000);
    let (json, note) = json_and_note(&out);
    assert_eq!(json["path"], "notes.txt");
    let content = json["content"].as_str().unwrap();
    assert!(content.ends_with('…'));
    assert!(chars(content) > 800, "{}", chars(content));
    assert_eq!(note, "[truncated to fit 1000 characters; 1 string cut]");
}

#[test]
fn arrays_are_emptied_as_a_last_json_resort() {
    let value = json!({"a": "x".repeat(60), "list": ["y".repeat(500)]});
    let out = truncate(&value.to_string(), 90);
    assert!(chars(&out) <= 90);
    let (json, _) = json_and_note(&out);
    assert!(json["a"].as_str().unwrap().ends_with('…'));
}

#[test]
fn json_whose_scalars_cannot_fit_is_cut_as_text() {
    let map: serde_json::Map<String, Value> =
        (0..200).map(|i| (format!("key{i}"), json!(i))).collect();
    let text = Value::Object(map).to_string();
    let out = truncate(&text, 200);
    assert!(chars(&out) <= 200);
    assert!(out.contains("\n[truncated: "));
    assert!(text.starts_with(out.split('\n').next().unwrap()));
}

#[test]
fn awkward_keys_and_strings_stay_valid_json() {
    let value = json!({
        "quo\"te\n\u{1}": vec!["a\\b\"c\td\r\u{7}é🦀"; 100],
        "日本": "語".repeat(300),
    });
    let out = truncate(&value.to_string(), 500);
    assert!(chars(&out) <= 500);
    let (json, note) = json_and_note(&out);
    assert!(json.is_object());
    assert!(!note.contains('\n'));
}

#[test]
fn hostile_json_never_panics() {
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let out = truncate(&deep, 100);
    assert!(chars(&out) <= 100);
    let deep_obj = format!("{}1{}", "{\"a\":".repeat(120), "}".repeat(120));
    assert!(chars(&truncate(&deep_obj, 64)) <= 64);
    for text in ["[1,2", "{\"a\":", "[[], [], []]   ", "[{}]", "{\"\":[]}"] {
        for max in [0, 3, 64] {
            assert!(chars(&truncate(text, max)) <= max.max(chars(text).min(max)));
        }
    }
}

/// A small deterministic generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn string(&mut self, max_len: usize) -> String {
        const ALPHABET: &[char] = &[
            'a', 'b', 'z', ' ', ' ', '\n', '"', '\\', '\u{1}', 'é', '日', '🦀', '…', '`',
        ];
        let len = self.below(max_len + 1);
        (0..len)
            .map(|_| ALPHABET[self.below(ALPHABET.len())])
            .collect()
    }
    fn json(&mut self, depth: usize) -> Value {
        let pick = if depth == 0 {
            self.below(4)
        } else {
            self.below(7)
        };
        match pick {
            0 => Value::Null,
            1 => json!(self.next().is_multiple_of(2)),
            2 => json!(self.next() as i64 / 3),
            3 => json!(self.string(40)),
            4 => json!(self.next() as f64 / 7.0),
            5 => {
                // Now and then a long array, but not nested ones: keep inputs small.
                let len = if depth == 3 && self.below(3) == 0 {
                    self.below(100)
                } else {
                    self.below(6)
                };
                Value::Array((0..len).map(|_| self.json(depth - 1)).collect())
            }
            _ => Value::Object(
                (0..self.below(6))
                    .map(|_| (self.string(10), self.json(depth - 1)))
                    .collect(),
            ),
        }
    }
}

fn check(text: &str, max: usize) {
    let out = truncate(text, max);
    let n = chars(&out);
    assert!(n <= max, "{n} > {max} for {text:?}");
    if chars(text) <= max {
        assert_eq!(out, text);
        return;
    }
    if max < MIN_NOTED_BUDGET {
        assert!(text.starts_with(&out));
        return;
    }
    match out.rsplit_once('\n') {
        Some((body, note)) if note.starts_with("[truncated: ") => {
            assert!(text.starts_with(body), "{body:?} not a prefix");
        }
        Some((_, note)) => {
            assert!(note.starts_with("[showing ") || note.starts_with("[truncated to fit "));
            json_and_note(&out);
        }
        // Compacted JSON that fits needs no note.
        None => assert!(serde_json::from_str::<Value>(&out).is_ok(), "{out:?}"),
    }
}

#[test]
fn the_budget_holds_for_generated_json_and_text() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let budgets: Vec<usize> = (0..=130).step_by(7).chain([200, 500, 1000, 4000]).collect();
    for case in 0..300 {
        let value = Value::Array((0..rng.below(12)).map(|_| rng.json(3)).collect());
        let value = if case % 2 == 0 {
            json!({"k": value, "s": rng.string(300)})
        } else {
            value
        };
        let text = if case % 3 == 0 {
            serde_json::to_string_pretty(&value).unwrap()
        } else {
            value.to_string()
        };
        let prose = rng.string(3000);
        for &max in &budgets {
            check(&text, max);
            check(&prose, max);
        }
    }
}

#[test]
fn every_budget_around_the_note_threshold_holds() {
    let text = "word\nanother 🦀 line é\n".repeat(50);
    let json = json!({"a": vec![1; 300], "b": "é".repeat(100)}).to_string();
    for max in 0..=400 {
        check(&text, max);
        check(&json, max);
    }
}

#[test]
fn overflow_strategy_parses_and_prints() {
    assert_eq!(OverflowStrategy::default(), OverflowStrategy::Truncate);
    for strategy in [OverflowStrategy::Truncate, OverflowStrategy::Summarize] {
        assert_eq!(
            strategy.to_string().parse::<OverflowStrategy>(),
            Ok(strategy)
        );
    }
    let from_config: Option<OverflowStrategy> = serde_json::from_str("\"summarize\"").unwrap();
    assert_eq!(from_config, Some(OverflowStrategy::Summarize));
    assert!(serde_json::from_str::<OverflowStrategy>("\"Truncate\"").is_err());
    let err = "Summary".parse::<OverflowStrategy>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown overflow strategy \"Summary\"; expected \"truncate\" or \"summarize\""
    );
}

#[test]
fn the_summary_prompt_states_the_budget_and_fences_the_text() {
    let text = "result with ``` fences ```` inside";
    let prompt = summary_prompt(text, 500);
    assert!(prompt.contains("at most 500 characters"));
    assert!(prompt.contains("Summary of tool result:"));
    assert!(prompt.contains("34 characters long"));
    assert!(prompt.contains(&format!("`````\n{text}\n`````\n")));
    assert!(summary_prompt("plain", 10).contains("```\nplain\n```"));
}
