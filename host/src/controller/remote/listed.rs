//! A list answer from another cluster, read into at most as many objects as a look has left:
//! the rest are counted, not kept, so that an answer of many small objects (a cluster need not
//! honour `limit`) costs no more memory than the look's budget
//! ([`crate::health::look_budget`]).

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// What one list answered.
#[derive(Debug, Default, PartialEq)]
pub struct Listed {
    /// The objects kept: the first ones, as many as asked.
    pub objects: Vec<Value>,
    /// The objects the answer listed, kept or not.
    pub count: usize,
    /// The bytes of the answer.
    pub bytes: usize,
}

/// The list answer `text`, its first `most` objects kept.
pub fn parse(text: &str, most: usize) -> Result<Listed, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let (objects, count) = Answer(most).deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(Listed { objects, count, bytes: text.len() })
}

/// A list answer, its first `.0` items kept and all counted; its other fields skipped.
struct Answer(usize);

impl<'de> DeserializeSeed<'de> for Answer {
    type Value = (Vec<Value>, usize);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Answer {
    type Value = (Vec<Value>, usize);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut items = (Vec::new(), 0);
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "items" {
                items = map.next_value_seed(Items(self.0))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(items)
    }
}

/// A list's `items` (`null`: none), the first `.0` kept and all counted.
struct Items(usize);

impl<'de> DeserializeSeed<'de> for Items {
    type Value = (Vec<Value>, usize);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Items {
    type Value = (Vec<Value>, usize);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list's items")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok((Vec::new(), 0))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut kept = Vec::new();
        while kept.len() < self.0 {
            match seq.next_element::<Value>()? {
                Some(object) => kept.push(object),
                None => {
                    let count = kept.len();
                    return Ok((kept, count));
                }
            }
        }
        let mut count = kept.len();
        while seq.next_element::<IgnoredAny>()?.is_some() {
            count += 1;
        }
        Ok((kept, count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_keeps_its_first_objects_and_counts_them_all() {
        let answer = json!({"kind": "DeploymentList", "metadata": {"resourceVersion": "7"},
                            "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}, {}]})
        .to_string();
        let listed = parse(&answer, 2).unwrap();
        assert_eq!(listed.objects, [json!({"metadata": {"name": "a"}}), json!({"metadata": {"name": "b"}})]);
        assert_eq!((listed.count, listed.bytes), (3, answer.len()));
        assert_eq!(parse(&answer, 10).unwrap().objects.len(), 3);
        assert_eq!(parse(&answer, 0).unwrap().count, 3);
        for none in [r#"{"kind": "List", "items": null}"#, r#"{"kind": "List"}"#] {
            assert_eq!(parse(none, 5).unwrap(), Listed { bytes: none.len(), ..Listed::default() });
        }
        for garbled in [r#"{"items": 3}"#, r#"[1]"#, r#"{"items": [] } x"#, r#"{"items": [{"#] {
            assert!(parse(garbled, 5).is_err(), "{garbled}");
        }
    }
}
