//! The instruments' sections (`[forensics]`, `[timerlat]`, ...): each is
//! defined, read and checked in its instrument's own folder
//! (`instruments::NAME::config`), which describes it with a
//! [`SectionSpec`]; the registry lists the specs, and the configuration
//! is read with them. It holds the sections by name, each as the type its
//! instrument reads back ([`Config::section`]).

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt::Debug;

use super::{Config, ConfigError, Effective, SectionReader};
use crate::host::HostInfo;

/// A section as its instrument defines it.
pub trait Section: SectionValue {
    /// Checks that need the sections read before it (`[measure]`'s and
    /// those earlier in the registry), with their effective values. None
    /// by default.
    fn check_with(&self, _config: &Config) -> Result<(), ConfigError> {
        Ok(())
    }
    /// Checks that need the host: the CPUs exist and may be used, the
    /// tools are installed. None by default.
    fn check_against(
        &self,
        _host: &HostInfo,
        _effective: &BTreeMap<String, Effective>,
    ) -> Result<(), ConfigError> {
        Ok(())
    }
}

/// What the configuration does with any section: copies, compares and
/// shows it, and hands it back as its type. Every plain section type has
/// it.
pub trait SectionValue: Any + Debug + Send + Sync {
    fn boxed(&self) -> Box<dyn Section>;
    fn same_as(&self, other: &dyn Section) -> bool;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Section + Clone + PartialEq> SectionValue for T {
    fn boxed(&self) -> Box<dyn Section> {
        Box::new(self.clone())
    }

    fn same_as(&self, other: &dyn Section) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// An instrument's section: its name (`[NAME]`, `LATENCYD_NAME__KEY`)
/// and how its keys are read (defaults, checks naming the key).
pub struct SectionSpec {
    pub name: &'static str,
    pub(crate) read: fn(&mut SectionReader<'_>) -> Result<Box<dyn Section>, ConfigError>,
}

/// The instruments' sections of one configuration, in the order read.
#[derive(Debug, Default)]
pub struct Sections(Vec<(&'static str, Box<dyn Section>)>);

impl Sections {
    pub(super) fn push(&mut self, name: &'static str, section: Box<dyn Section>) {
        self.0.push((name, section));
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &dyn Section)> {
        self.0
            .iter()
            .map(|(name, section)| (*name, section.as_ref()))
    }

    fn find<T: Section>(&self) -> Option<&T> {
        (self.0.iter()).find_map(|(_, section)| section.as_any().downcast_ref::<T>())
    }

    fn find_mut<T: Section>(&mut self) -> Option<&mut T> {
        (self.0.iter_mut()).find_map(|(_, section)| section.as_any_mut().downcast_mut::<T>())
    }
}

impl Clone for Sections {
    fn clone(&self) -> Sections {
        Sections(self.0.iter().map(|(name, s)| (*name, s.boxed())).collect())
    }
}

impl PartialEq for Sections {
    fn eq(&self, other: &Sections) -> bool {
        self.0.len() == other.0.len()
            && (self.0.iter().zip(&other.0)).all(|((a, x), (b, y))| a == b && x.same_as(y.as_ref()))
    }
}

impl Config {
    /// The section of type `T`, as its instrument reads it. Every
    /// configuration the daemon and the tests read has each registered
    /// instrument's (`instruments::registry::config_sections`); one read
    /// without it has none, which is a mistake of the caller.
    pub fn section<T: Section>(&self) -> &T {
        self.sections.find().unwrap_or_else(|| missing::<T>())
    }

    /// The same, to change it (tests and benches set up a section so).
    pub fn section_mut<T: Section>(&mut self) -> &mut T {
        self.sections.find_mut().unwrap_or_else(|| missing::<T>())
    }
}

fn missing<T>() -> ! {
    panic!(
        "{} was not read: this configuration was read without the registry's sections",
        std::any::type_name::<T>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    struct Made(u32);

    impl Section for Made {}

    #[test]
    fn sections_copy_compare_and_come_back_as_their_type() {
        let mut a = Sections::default();
        a.push("made", Box::new(Made(1)));
        let mut b = a.clone();
        assert_eq!(a, b);
        b.find_mut::<Made>().unwrap().0 = 2;
        assert_ne!(a, b);
        assert_eq!(b.find::<Made>(), Some(&Made(2)));
        assert_eq!(a.iter().map(|(name, _)| name).collect::<Vec<_>>(), ["made"]);
    }
}
