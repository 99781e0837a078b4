//! A list answer from another cluster, read into at most as many objects as a look has left,
//! keeping only those the look is after (the workloads of the services it checks: a namespace's
//! other objects are read past, one at a time): the rest are counted, not kept, so that an answer
//! of many small objects (a cluster need not honour `limit`) costs no more memory than the look's
//! budget ([`crate::health::look_budget`]).

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// What one list answered.
#[derive(Debug, Default, PartialEq)]
pub struct Listed {
    /// The objects kept: the first ones wanted, as many as asked.
    pub objects: Vec<Value>,
    /// The objects wanted the answer listed, kept or not.
    pub count: usize,
    /// The bytes of the answer.
    pub bytes: usize,
    /// The token of the next page, when there is one.
    pub next: Option<String>,
}

/// The list answer `text`, the first `most` of its objects that `wanted` keeps.
pub fn parse(text: &str, most: usize, wanted: &dyn Fn(&Value) -> bool) -> Result<Listed, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let (objects, count, next) = Answer(Items { most, wanted }).deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(Listed { objects, count, bytes: text.len(), next })
}

/// A list answer: its items as [`Items`] keeps them, and its `metadata.continue`; its other fields
/// skipped.
struct Answer<'a>(Items<'a>);

impl<'de> DeserializeSeed<'de> for Answer<'_> {
    type Value = (Vec<Value>, usize, Option<String>);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Answer<'_> {
    type Value = (Vec<Value>, usize, Option<String>);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut items, mut next) = ((Vec::new(), 0), None);
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "items" => items = map.next_value_seed(self.0)?,
                "metadata" => next = map.next_value::<ListMeta>()?.continue_.filter(|token| !token.is_empty()),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((items.0, items.1, next))
    }
}

/// The part of a list's metadata a look reads.
#[derive(serde::Deserialize)]
struct ListMeta {
    #[serde(rename = "continue")]
    continue_: Option<String>,
}

/// A list's `items` (`null`: none): the first `most` that `wanted` keeps are kept, and all it
/// keeps counted.
#[derive(Clone, Copy)]
struct Items<'a> {
    most: usize,
    wanted: &'a dyn Fn(&Value) -> bool,
}

impl<'de> DeserializeSeed<'de> for Items<'_> {
    type Value = (Vec<Value>, usize);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Items<'_> {
    type Value = (Vec<Value>, usize);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list's items")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok((Vec::new(), 0))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let (mut kept, mut count) = (Vec::new(), 0);
        while let Some(object) = seq.next_element::<Value>()? {
            if (self.wanted)(&object) {
                count += 1;
                if kept.len() < self.most {
                    kept.push(object);
                }
            }
        }
        Ok((kept, count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_keeps_its_first_wanted_objects_and_counts_them_all() {
        let answer = json!({"kind": "DeploymentList", "metadata": {"resourceVersion": "7", "continue": "next"},
                            "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "other"}},
                                      {"metadata": {"name": "b"}}, {}]})
        .to_string();
        let all = |_: &Value| true;
        let not_other = |o: &Value| o["metadata"]["name"] != "other";
        let listed = parse(&answer, 2, &not_other).unwrap();
        assert_eq!(listed.objects, [json!({"metadata": {"name": "a"}}), json!({"metadata": {"name": "b"}})]);
        assert_eq!((listed.count, listed.bytes, listed.next.as_deref()), (3, answer.len(), Some("next")));
        assert_eq!(parse(&answer, 10, &all).unwrap().objects.len(), 4);
        assert_eq!(parse(&answer, 0, &not_other).unwrap().count, 3);
        for none in [r#"{"kind": "List", "items": null}"#, r#"{"kind": "List", "metadata": {"continue": ""}}"#] {
            assert_eq!(parse(none, 5, &all).unwrap(), Listed { bytes: none.len(), ..Listed::default() });
        }
        for garbled in [r#"{"items": 3}"#, r#"[1]"#, r#"{"items": [] } x"#, r#"{"items": [{"#] {
            assert!(parse(garbled, 5, &all).is_err(), "{garbled}");
        }
    }
}
