//! The OpenAPI 3.1 document served at `/api/v1/openapi.json`: the
//! daemon's own routes and objects (`openapi.json` beside this file), and
//! each registered instrument's object in `/api/v1/status` from the
//! `schema.json` in its own folder ([`Entry::schema`]). The document is
//! put together once, in the order the status object is served, so that
//! adding an instrument adds its schema without naming it here.

use std::sync::OnceLock;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::daemon::render::TIMERLAT_AT;
use crate::instruments::registry::INSTRUMENTS;
use crate::instruments::shape::Entry;

/// The daemon's part of the document.
const BASE: &str = include_str!("openapi.json");

/// JSON whose objects keep the order they were written in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
enum Ordered {
    Object(IndexMap<String, Ordered>),
    Array(Vec<Ordered>),
    Scalar(Value),
}

impl Ordered {
    /// The object at `path` (keys from this one down).
    fn object_at(&mut self, path: &[&str]) -> Result<&mut IndexMap<String, Ordered>, String> {
        let mut here = self;
        for key in path {
            here = match here {
                Ordered::Object(map) => map.get_mut(*key),
                _ => None,
            }
            .ok_or_else(|| format!("no {}", path.join(".")))?;
        }
        match here {
            Ordered::Object(map) => Ok(map),
            _ => Err(format!("{} is not an object", path.join("."))),
        }
    }
}

/// The whole document, as served.
pub fn document() -> &'static str {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        compose(BASE, INSTRUMENTS).expect("the OpenAPI document and the instruments' schemas fit")
    })
}

/// `base` with each entry's schemas under `components.schemas` and its
/// object among the status object's properties and required names, where
/// `/api/v1/status` serves it: in registry order, timerlat's object
/// (still the daemon's own) at [`TIMERLAT_AT`] among them.
fn compose(base: &str, entries: &[&Entry]) -> Result<String, String> {
    let mut doc: Ordered = serde_json::from_str(base).map_err(|e| format!("the base: {e}"))?;
    let all = doc.object_at(&["components", "schemas"])?;
    let mut status_properties = Vec::new();
    for entry in entries {
        let schemas: IndexMap<String, Ordered> = serde_json::from_str(entry.schema)
            .map_err(|e| format!("{}'s schema.json: {e}", entry.name))?;
        let Some(object) = schemas.keys().next().cloned() else {
            return Err(format!("{}'s schema.json names no schema", entry.name));
        };
        for (name, schema) in schemas {
            if all.insert(name.clone(), schema).is_some() {
                return Err(format!("{}'s schema {name} is defined twice", entry.name));
            }
        }
        let reference = Ordered::Object(IndexMap::from([(
            "$ref".to_string(),
            Ordered::Scalar(Value::String(format!("#/components/schemas/{object}"))),
        )]));
        status_properties.push((entry.name.to_string(), reference));
    }
    let status = all.get_mut("Status").ok_or("no Status schema")?;
    let properties = status.object_at(&["properties"])?;
    let Some((at, _, timerlat)) = properties.shift_remove_full("timerlat") else {
        return Err("no Status.properties.timerlat".to_string());
    };
    status_properties.insert(
        TIMERLAT_AT.min(status_properties.len()),
        ("timerlat".to_string(), timerlat),
    );
    for (i, (name, schema)) in status_properties.iter().enumerate() {
        if properties
            .shift_insert(at + i, name.clone(), schema.clone())
            .is_some()
        {
            return Err(format!("Status.properties.{name} is defined twice"));
        }
    }
    let Some(Ordered::Array(required)) = status.object_at(&[])?.get_mut("required") else {
        return Err("no Status.required".to_string());
    };
    let timerlat = Ordered::Scalar(Value::String("timerlat".to_string()));
    let Some(at) = required.iter().position(|r| *r == timerlat) else {
        return Err("timerlat is not in Status.required".to_string());
    };
    required.remove(at);
    for (i, (name, _)) in status_properties.iter().enumerate() {
        required.insert(at + i, Ordered::Scalar(Value::String(name.clone())));
    }
    let mut text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_instrument_is_in_the_status_schema_where_it_is_served() {
        let doc: Value = serde_json::from_str(document()).unwrap();
        let status = &doc["components"]["schemas"]["Status"];
        let required: Vec<&str> = status["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        let mut served: Vec<&str> = INSTRUMENTS.iter().map(|e| e.name).collect();
        served.insert(TIMERLAT_AT.min(served.len()), "timerlat");
        let at = required.iter().position(|r| *r == served[0]).unwrap();
        assert_eq!(required[at..at + served.len()], served[..]);
        for entry in INSTRUMENTS {
            let reference = status["properties"][entry.name]["$ref"].as_str().unwrap();
            let name = reference.trim_start_matches("#/components/schemas/");
            assert!(
                doc["components"]["schemas"][name].is_object(),
                "{}: {reference}",
                entry.name
            );
        }
    }

    #[test]
    fn an_instrument_schema_that_is_not_one_is_refused_by_name() {
        let broken = Entry {
            schema: "[]",
            ..*INSTRUMENTS[0]
        };
        let err = compose(BASE, &[&broken]).unwrap_err();
        assert!(
            err.starts_with(&format!("{}'s schema.json", broken.name)),
            "{err}"
        );
        let twice = compose(BASE, &[INSTRUMENTS[0], INSTRUMENTS[0]]).unwrap_err();
        assert!(twice.contains("defined twice"), "{twice}");
    }
}
