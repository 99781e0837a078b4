//! The objects a (re)list of one kind returned, so that at its end a cache forgets the objects it
//! holds that the list no longer does. Each reference is remembered by a keyed hash: a set of
//! whole references, held until a relist of every child ends, was most of a restart's peak
//! above the caches themselves (docs/performance.md). Two references with the same hash would
//! keep one gone object cached: with random SipHash keys per list, a chance of ~2^-64 per pair.

use crate::k0rdent::ChildRef;
use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};

/// The references a list has returned so far.
#[derive(Default)]
pub struct Listed {
    hasher: RandomState,
    seen: HashSet<u64>,
}

impl Listed {
    /// Remembers `object`.
    pub fn insert(&mut self, object: &ChildRef) {
        self.seen.insert(self.hasher.hash_one(object));
    }

    /// Whether the list returned `object`.
    pub fn contains(&self, object: &ChildRef) -> bool {
        self.seen.contains(&self.hasher.hash_one(object))
    }
}

impl<'a> FromIterator<&'a ChildRef> for Listed {
    fn from_iter<I: IntoIterator<Item = &'a ChildRef>>(objects: I) -> Self {
        let mut listed = Listed::default();
        objects.into_iter().for_each(|object| listed.insert(object));
        listed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str) -> ChildRef {
        ChildRef {
            api_version: "helm.toolkit.fluxcd.io/v2".into(),
            kind: "HelmRelease".into(),
            namespace: "team".into(),
            name: name.into(),
        }
    }

    #[test]
    fn holds_what_was_listed_and_nothing_else() {
        let listed: Listed = [object("a"), object("b")].iter().collect();
        assert!(listed.contains(&object("a")) && listed.contains(&object("b")));
        assert!(!listed.contains(&object("c")));
        let other_kind = ChildRef { kind: "Kustomization".into(), ..object("a") };
        assert!(!listed.contains(&other_kind));
        assert!(!Listed::default().contains(&object("a")));
    }
}
