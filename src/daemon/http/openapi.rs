//! The OpenAPI 3.1 document served at `/api/v1/openapi.json`: the
//! daemon's own routes and objects (`openapi.json` beside this file), and
//! each registered instrument's object in `/api/v1/status` from the
//! `schema.json` in its own folder ([`Entry::schema`]) and its own route
//! from its `api.json` ([`Api::openapi`]). The document is put together
//! once, in the order the status object and the routes are served, so
//! that adding an instrument adds its schemas without naming it here.

use std::sync::OnceLock;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::INSTRUMENT_ROUTES_AFTER;
use crate::instruments::registry::INSTRUMENTS;
use crate::instruments::shape::{Api, Entry};

/// The daemon's part of the document.
const BASE: &str = include_str!("openapi.json");

/// The status object's property the registered instruments' objects
/// follow, as `/api/v1/status` serves them.
const INSTRUMENTS_AFTER: &str = "record";

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
/// `/api/v1/status` serves it: in registry order, after
/// [`INSTRUMENTS_AFTER`].
fn compose(base: &str, entries: &[&Entry]) -> Result<String, String> {
    let mut doc: Ordered = serde_json::from_str(base).map_err(|e| format!("the base: {e}"))?;
    let all = doc.object_at(&["components", "schemas"])?;
    let mut status_properties = Vec::new();
    for entry in entries {
        let Some(schema) = entry.schema else {
            continue;
        };
        let schemas: IndexMap<String, Ordered> = serde_json::from_str(schema)
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
    let Some(at) = properties.get_index_of(INSTRUMENTS_AFTER).map(|at| at + 1) else {
        return Err(format!("no Status.properties.{INSTRUMENTS_AFTER}"));
    };
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
    let after = Ordered::Scalar(Value::String(INSTRUMENTS_AFTER.to_string()));
    let Some(at) = required.iter().position(|r| *r == after).map(|at| at + 1) else {
        return Err(format!("{INSTRUMENTS_AFTER} is not in Status.required"));
    };
    for (i, (name, _)) in status_properties.iter().enumerate() {
        required.insert(at + i, Ordered::Scalar(Value::String(name.clone())));
    }
    add_routes(&mut doc, entries)?;
    let mut text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    text.push('\n');
    Ok(text)
}

/// An instrument's `api.json`.
#[derive(Deserialize)]
struct ApiDocument {
    path: Ordered,
    schemas: IndexMap<String, Ordered>,
}

/// Each entry's own route (`/api/v1/NAME`) among the paths, after
/// [`INSTRUMENT_ROUTES_AFTER`] in registry order, and the schemas it
/// refers to.
fn add_routes(doc: &mut Ordered, entries: &[&Entry]) -> Result<(), String> {
    let mut paths = Vec::new();
    for entry in entries {
        let Some(Api { openapi, .. }) = entry.api else {
            continue;
        };
        let api: ApiDocument =
            serde_json::from_str(openapi).map_err(|e| format!("{}'s api.json: {e}", entry.name))?;
        let all = doc.object_at(&["components", "schemas"])?;
        for (name, schema) in api.schemas {
            if all.insert(name.clone(), schema).is_some() {
                return Err(format!("{}'s schema {name} is defined twice", entry.name));
            }
        }
        paths.push((format!("/api/v1/{}", entry.name), api.path));
    }
    let all = doc.object_at(&["paths"])?;
    let Some(at) = all.get_index_of(INSTRUMENT_ROUTES_AFTER).map(|at| at + 1) else {
        return Err(format!("no paths.{INSTRUMENT_ROUTES_AFTER}"));
    };
    for (i, (route, path)) in paths.into_iter().enumerate() {
        if all.shift_insert(at + i, route.clone(), path).is_some() {
            return Err(format!("paths.{route} is defined twice"));
        }
    }
    Ok(())
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
        let with_object = || INSTRUMENTS.iter().filter(|e| e.schema.is_some());
        let served: Vec<&str> = with_object().map(|e| e.name).collect();
        let at = required.iter().position(|r| *r == served[0]).unwrap();
        assert_eq!(required[at..at + served.len()], served[..]);
        // One without an object (the observer's: its route says all) has
        // none there.
        for entry in INSTRUMENTS.iter().filter(|e| e.schema.is_none()) {
            assert!(
                status["properties"].get(entry.name).is_none(),
                "{}",
                entry.name
            );
            assert!(!required.contains(&entry.name), "{}", entry.name);
        }
        for entry in with_object() {
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
        let with_object = *INSTRUMENTS.iter().find(|e| e.schema.is_some()).unwrap();
        let broken = Entry {
            schema: Some("[]"),
            ..*with_object
        };
        let err = compose(BASE, &[&broken]).unwrap_err();
        assert!(
            err.starts_with(&format!("{}'s schema.json", broken.name)),
            "{err}"
        );
        let twice = compose(BASE, &[with_object, with_object]).unwrap_err();
        assert!(twice.contains("defined twice"), "{twice}");
    }
}
