//! The guest SDK's decoding of the arguments a tool receives.
#![no_main]

use serde::Deserialize;

#[derive(Deserialize)]
#[allow(dead_code)]
struct Args {
    text: String,
    count: Option<u32>,
    items: Vec<Item>,
    tag: Option<Tag>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct Item {
    price: f64,
    name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Tag {
    A,
    B,
}

libfuzzer_sys::fuzz_target!(|text: &str| {
    let _ = wasm_agent_guest::__private::decode_arguments::<Args>(text);
    let _ = wasm_agent_guest::__private::decode_arguments::<serde_json::Value>(text);
    let _ = wasm_agent_guest::__private::decode_arguments::<wasm_agent_guest::NoArgs>(text);
});
