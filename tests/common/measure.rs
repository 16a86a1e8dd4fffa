//! What tests/measure.rs and tests/full/measure.rs share.

use serde_json::Value;
use std::path::Path;

pub fn json_of(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("the JSON file was written");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("invalid JSON ({e}):\n{text}"))
}
