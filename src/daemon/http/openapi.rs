//! The OpenAPI 3.1 document served at `/api/v1/openapi.json`: the
//! daemon's own routes and objects (`openapi.json` beside this file), and
//! each registered instrument's object in `/api/v1/status` from the
//! `schema.json` in its own folder ([`Entry::schema`]), its own route
//! from its `api.json` ([`Api::openapi`]) and its others from its
//! `routes.json` ([`Routes::openapi`]), and its fields among the status
//! object's own from its `fields.json` ([`Entry::fields`]). The document
//! is put together
//! once, in the order the status object and the routes are served, so
//! that adding an instrument adds its schemas without naming it here.

use std::sync::OnceLock;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::INSTRUMENT_ROUTES_AFTER;
use crate::daemon::render::status::OBJECTS_AFTER;
use crate::instruments::registry::INSTRUMENTS;
use crate::instruments::shape::{Api, Entry, Routes};

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
/// `/api/v1/status` serves it ([`OBJECTS_AFTER`]), and its routes.
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
    let mut objects = status_properties.into_iter();
    for (after, count) in OBJECTS_AFTER {
        let group: Vec<(String, Ordered)> = objects.by_ref().take(count).collect();
        insert_objects(status, after, &group)?;
    }
    add_fields(&mut doc, entries)?;
    add_routes(&mut doc, entries)?;
    let mut text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    text.push('\n');
    Ok(text)
}

/// The status schema's properties and required names with `objects`
/// after `after`'s, in order.
fn insert_objects(
    status: &mut Ordered,
    after: &str,
    objects: &[(String, Ordered)],
) -> Result<(), String> {
    let properties = status.object_at(&["properties"])?;
    let Some(at) = properties.get_index_of(after).map(|at| at + 1) else {
        return Err(format!("no Status.properties.{after}"));
    };
    for (i, (name, schema)) in objects.iter().enumerate() {
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
    let named = Ordered::Scalar(Value::String(after.to_string()));
    let Some(at) = required.iter().position(|r| *r == named).map(|at| at + 1) else {
        return Err(format!("{after} is not in Status.required"));
    };
    for (i, (name, _)) in objects.iter().enumerate() {
        required.insert(at + i, Ordered::Scalar(Value::String(name.clone())));
    }
    Ok(())
}

/// Each entry's fields at the end of the status object's properties and
/// required names, in registry order, and the schemas they refer to.
fn add_fields(doc: &mut Ordered, entries: &[&Entry]) -> Result<(), String> {
    let mut fields = Vec::new();
    for entry in entries {
        let Some(text) = entry.fields else {
            continue;
        };
        let mut schemas: IndexMap<String, Ordered> =
            serde_json::from_str(text).map_err(|e| format!("{}'s fields.json: {e}", entry.name))?;
        let Some((_, mut first)) = schemas.shift_remove_index(0) else {
            return Err(format!("{}'s fields.json names no schema", entry.name));
        };
        let properties = std::mem::take(first.object_at(&["properties"])?);
        fields.extend(properties);
        let all = doc.object_at(&["components", "schemas"])?;
        for (name, schema) in schemas {
            if all.insert(name.clone(), schema).is_some() {
                return Err(format!("{}'s schema {name} is defined twice", entry.name));
            }
        }
    }
    let status = doc.object_at(&["components", "schemas", "Status"])?;
    let properties = status.get_mut("properties");
    let Some(Ordered::Object(properties)) = properties else {
        return Err("no Status.properties".to_string());
    };
    for (name, schema) in &fields {
        if properties.insert(name.clone(), schema.clone()).is_some() {
            return Err(format!("Status.properties.{name} is defined twice"));
        }
    }
    let Some(Ordered::Array(required)) = status.get_mut("required") else {
        return Err("no Status.required".to_string());
    };
    required.extend(
        fields
            .into_iter()
            .map(|(name, _)| Ordered::Scalar(Value::String(name))),
    );
    Ok(())
}

/// An instrument's `api.json`.
#[derive(Deserialize)]
struct ApiDocument {
    path: Ordered,
    schemas: IndexMap<String, Ordered>,
}

/// An instrument's `routes.json`.
#[derive(Deserialize)]
struct RoutesDocument {
    paths: IndexMap<String, Ordered>,
    schemas: IndexMap<String, Ordered>,
}

/// Each entry's routes among the paths, after [`INSTRUMENT_ROUTES_AFTER`]
/// in registry order (its own, `/api/v1/NAME`, then its others), and the
/// schemas they refer to.
fn add_routes(doc: &mut Ordered, entries: &[&Entry]) -> Result<(), String> {
    let mut paths = Vec::new();
    for entry in entries {
        let mut schemas = IndexMap::new();
        if let Some(Api { openapi, .. }) = entry.api {
            let api: ApiDocument = serde_json::from_str(openapi)
                .map_err(|e| format!("{}'s api.json: {e}", entry.name))?;
            schemas.extend(api.schemas);
            paths.push((format!("/api/v1/{}", entry.name), api.path));
        }
        if let Some(Routes { list, openapi }) = entry.routes {
            let routes: RoutesDocument = serde_json::from_str(openapi)
                .map_err(|e| format!("{}'s routes.json: {e}", entry.name))?;
            let described: Vec<&str> = routes.paths.keys().map(String::as_str).collect();
            let served: Vec<&str> = list.iter().map(|r| r.path).collect();
            if described != served {
                return Err(format!(
                    "{}'s routes.json describes {described:?}, its routes are {served:?}",
                    entry.name
                ));
            }
            schemas.extend(routes.schemas);
            paths.extend(routes.paths);
        }
        let all = doc.object_at(&["components", "schemas"])?;
        for (name, schema) in schemas {
            if all.insert(name.clone(), schema).is_some() {
                return Err(format!("{}'s schema {name} is defined twice", entry.name));
            }
        }
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
        let mut served = with_object().map(|e| e.name);
        for (after, count) in OBJECTS_AFTER {
            let group: Vec<&str> = served.by_ref().take(count).collect();
            let at = required.iter().position(|r| *r == after).unwrap() + 1;
            assert_eq!(required[at..at + group.len()], group[..], "after {after}");
        }
        // One without an object or fields (the observer's: its route says
        // all) has none there.
        let without = INSTRUMENTS
            .iter()
            .filter(|e| e.schema.is_none() && e.fields.is_none());
        for entry in without {
            assert!(
                status["properties"].get(entry.name).is_none(),
                "{}",
                entry.name
            );
            assert!(!required.contains(&entry.name), "{}", entry.name);
        }
        // The fields come last, in registry order, each described.
        let fields: Vec<String> = (INSTRUMENTS.iter().filter_map(|e| e.fields))
            .flat_map(|text| {
                let schemas: IndexMap<String, Value> = serde_json::from_str(text).unwrap();
                let first = schemas.into_values().next().unwrap();
                first["properties"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .collect();
        assert!(!fields.is_empty(), "an instrument has fields");
        assert_eq!(required[required.len() - fields.len()..], fields[..]);
        for field in &fields {
            assert!(status["properties"][field].is_object(), "{field}");
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
        // So are fields that are not an object's properties, and fields
        // the daemon has already.
        let with_fields = *INSTRUMENTS.iter().find(|e| e.fields.is_some()).unwrap();
        for (fields, said) in [
            ("[]", "fields.json"),
            (r#"{"F": {"type": "object"}}"#, "no properties"),
            (
                r#"{"F": {"properties": {"record": {}}}}"#,
                "Status.properties.record",
            ),
        ] {
            let broken = Entry {
                fields: Some(fields),
                ..*with_fields
            };
            let err = compose(BASE, &[&broken]).unwrap_err();
            assert!(err.contains(said), "{fields}: {err}");
        }
        // Routes described other than they are served are refused.
        let with_routes = *INSTRUMENTS.iter().find(|e| e.routes.is_some()).unwrap();
        let routes = with_routes.routes.unwrap();
        let unlisted = Entry {
            routes: Some(Routes {
                list: &routes.list[1..],
                ..routes
            }),
            ..*with_routes
        };
        let err = compose(BASE, &[&unlisted]).unwrap_err();
        assert!(
            err.starts_with(&format!("{}'s routes.json describes", unlisted.name)),
            "{err}"
        );
    }
}
