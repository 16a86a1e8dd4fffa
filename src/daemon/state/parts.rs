//! The registered instruments' parts of the state, in registry order
//! (`instruments::registry`): the renderers walk them, and each run
//! reaches its own through the collector.

use crate::config::Config;
use crate::instruments::registry::INSTRUMENTS;
use crate::instruments::shape::Part;

pub struct Parts(Vec<(&'static str, Box<dyn Part>)>);

impl Parts {
    /// Every registered instrument's part as configured, none running
    /// (synthetic states).
    pub fn new(config: &Config) -> Parts {
        Parts(
            (INSTRUMENTS.iter())
                .map(|entry| (entry.name, (entry.idle)(config)))
                .collect(),
        )
    }

    /// The started instruments' first parts, in registry order.
    pub fn started(parts: Vec<(&'static str, Box<dyn Part>)>) -> Parts {
        Parts(parts)
    }

    pub fn get(&self, name: &str) -> Option<&dyn Part> {
        (self.0.iter()).find_map(|(n, part)| (*n == name).then_some(part.as_ref()))
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut dyn Part> {
        (self.0.iter_mut()).find_map(|(n, part)| (*n == name).then_some(part.as_mut()))
    }

    /// The parts with their instruments' names, in registry order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &dyn Part)> {
        self.0.iter().map(|(name, part)| (*name, part.as_ref()))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&'static str, &mut dyn Part)> {
        (self.0.iter_mut()).map(|(name, part)| (*name, part.as_mut() as &mut dyn Part))
    }

    /// A changed key of a section (`load.cpus`) offered to the part of
    /// the instrument of that name: true when it applied it.
    pub fn apply(&mut self, key: &str, new: &Config) -> bool {
        let section = key.split_once('.').map_or(key, |(section, _)| section);
        self.get_mut(section)
            .is_some_and(|part| part.apply(key, new))
    }

    /// The part of type `P`: what a route or plot of that instrument's
    /// own reads.
    pub fn of<P: Part>(&self) -> Option<&P> {
        (self.0.iter()).find_map(|(_, part)| (**part).as_any().downcast_ref::<P>())
    }

    /// The part of type `P` (tests and benches set it up this way).
    pub fn of_mut<P: Part>(&mut self) -> Option<&mut P> {
        (self.0.iter_mut()).find_map(|(_, part)| (**part).as_any_mut().downcast_mut::<P>())
    }
}

/// The parts' objects of `/api/v1/status`, each under its instrument's
/// name (or their fields among the daemon's own, each under its own
/// name), taken under the lock and written after it.
pub struct Statuses(Vec<(&'static str, Box<serde_json::value::RawValue>)>);

impl Parts {
    pub fn statuses(&self) -> Statuses {
        Statuses(
            self.iter()
                .filter_map(|(name, part)| Some((name, part.status()?)))
                .collect(),
        )
    }

    /// Every part's fields among the daemon's own, in registry order.
    pub fn status_fields(&self) -> Statuses {
        Statuses(
            self.iter()
                .flat_map(|(_, part)| part.status_fields())
                .collect(),
        )
    }
}

impl Statuses {
    /// The first `n` objects, taken out.
    pub fn take_first(&mut self, n: usize) -> Statuses {
        let rest = self.0.split_off(n.min(self.0.len()));
        Statuses(std::mem::replace(&mut self.0, rest))
    }
}

impl serde::Serialize for Statuses {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, status) in &self.0 {
            map.serialize_entry(name, status)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(n: u8) -> Box<serde_json::value::RawValue> {
        serde_json::value::to_raw_value(&n).unwrap()
    }

    #[test]
    fn the_first_objects_are_taken_out_in_order_and_the_rest_stay() {
        let mut all = Statuses(vec![("a", raw(1)), ("b", raw(2)), ("c", raw(3))]);
        let first = all.take_first(1);
        assert_eq!(serde_json::to_string(&first).unwrap(), r#"{"a":1}"#);
        assert_eq!(serde_json::to_string(&all).unwrap(), r#"{"b":2,"c":3}"#);
        let rest = all.take_first(usize::MAX);
        assert_eq!(serde_json::to_string(&rest).unwrap(), r#"{"b":2,"c":3}"#);
        assert_eq!(serde_json::to_string(&all).unwrap(), "{}");
    }
}
