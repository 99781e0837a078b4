//! Values by rule text, the least recently used dropped first beyond a number of entries or of
//! bytes of text.

use std::collections::{BTreeMap, HashMap};

/// At most `entries` values, whose texts hold at most `bytes` together (the newest is kept even
/// when it alone is larger).
pub struct Lru<V> {
    values: HashMap<String, (V, u64)>,
    /// The texts by when they were last used.
    order: BTreeMap<u64, String>,
    clock: u64,
    bytes: usize,
    limits: (usize, usize),
}

impl<V: Clone> Lru<V> {
    /// Empty, holding at most `entries` values and `bytes` of text.
    pub fn new(entries: usize, bytes: usize) -> Self {
        Self { values: HashMap::new(), order: BTreeMap::new(), clock: 0, bytes: 0, limits: (entries, bytes) }
    }

    /// The value of `text`, now the most recently used.
    pub fn get(&mut self, text: &str) -> Option<V> {
        let (value, used) = self.values.get_mut(text)?;
        let text = self.order.remove(used).expect("every value is in the order");
        self.clock += 1;
        *used = self.clock;
        self.order.insert(self.clock, text);
        Some(value.clone())
    }

    /// Keeps `value` for `text`, dropping the least recently used beyond the limits.
    pub fn insert(&mut self, text: &str, value: V) {
        if let Some((_, used)) = self.values.remove(text) {
            self.order.remove(&used);
            self.bytes -= text.len();
        }
        self.clock += 1;
        self.values.insert(text.to_owned(), (value, self.clock));
        self.order.insert(self.clock, text.to_owned());
        self.bytes += text.len();
        let (entries, bytes) = self.limits;
        while self.values.len() > 1 && (self.values.len() > entries || self.bytes > bytes) {
            let (_, oldest) = self.order.pop_first().expect("more than one value");
            self.values.remove(&oldest);
            self.bytes -= oldest.len();
        }
    }

    /// How many values it holds.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.values.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_go_beyond_the_entries_or_the_bytes() {
        let mut lru = Lru::new(2, 10);
        lru.insert("a", 1);
        lru.insert("b", 2);
        assert_eq!(lru.get("a"), Some(1));
        lru.insert("c", 3);
        assert_eq!((lru.get("b"), lru.get("a"), lru.get("c"), lru.len()), (None, Some(1), Some(3), 2));
        lru.insert("dddddddddd", 4);
        assert_eq!((lru.get("a"), lru.get("c"), lru.len()), (None, None, 1), "ten bytes of text at most");
        lru.insert("a much longer text", 5);
        assert_eq!((lru.get("a much longer text"), lru.len()), (Some(5), 1), "the newest is kept");
        lru.insert("a much longer text", 6);
        assert_eq!((lru.get("a much longer text"), lru.len()), (Some(6), 1));
    }
}
