//! Duplicate keys in a JSON body. serde_json keeps the last of them silently, so they are
//! found on the raw bytes, before the body becomes a `Value`.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;
use std::fmt;

/// The paths of keys that appear twice in one object, e.g. `spec.replicas`; empty for a body
/// that is not JSON (it fails to decode elsewhere, with a better message).
pub fn duplicate_fields(body: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let seed = Node {
        path: String::new(),
        found: &mut found,
    };
    if seed.deserialize(&mut de).is_err() {
        return Vec::new();
    }
    found
}

struct Node<'a> {
    path: String,
    found: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        loop {
            let path = format!("{}[{i}]", self.path);
            let node = Node {
                path,
                found: &mut *self.found,
            };
            if seq.next_element_seed(node)?.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = match self.path.is_empty() {
                true => key.clone(),
                false => format!("{}.{key}", self.path),
            };
            if !seen.insert(key) {
                self.found.push(path.clone());
            }
            map.next_value_seed(Node {
                path,
                found: &mut *self.found,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_found_with_their_path() {
        let body = br#"{"spec":{"replicas":1,"replicas":2,"template":{"spec":{"containers":[{"name":"a","name":"b"}]}}},"kind":"Deployment"}"#;
        assert_eq!(
            duplicate_fields(body),
            ["spec.replicas", "spec.template.spec.containers[0].name"]
        );
    }

    #[test]
    fn distinct_keys_and_non_json_bodies_have_none() {
        assert!(duplicate_fields(br#"{"a":{"b":1},"b":{"a":2},"c":[{"a":1},{"a":1}]}"#).is_empty());
        assert!(duplicate_fields(b"a: 1\na: 2\n").is_empty());
    }
}
