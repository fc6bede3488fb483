//! Text the operator's Microservice cache holds once however many objects repeat it. Status conditions repeat the
//! same words across thousands of Microservices (the Accepted and Degraded messages, every reason) and within one
//! (Progressing and Ready tell the same message), so their text is shared rather than owned: on the wire and to
//! every reader it is a plain string.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An immutable, cheaply cloned string.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SharedText(Arc<str>);

impl SharedText {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether both hold the very same allocation (not merely equal text).
    pub fn ptr_eq(&self, other: &SharedText) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// How many holders share this text (the interner drops what only it still holds).
    pub fn holders(&self) -> usize {
        Arc::strong_count(&self.0)
    }
}

impl Deref for SharedText {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SharedText {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for SharedText {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SharedText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for SharedText {
    fn from(s: String) -> Self {
        SharedText(s.into())
    }
}

impl From<&str> for SharedText {
    fn from(s: &str) -> Self {
        SharedText(s.into())
    }
}

impl PartialEq<str> for SharedText {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for SharedText {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for SharedText {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl Serialize for SharedText {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SharedText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(TextVisitor)
    }
}

/// Takes the text as the decoder has it (borrowed or in its scratch buffer): only the shared copy is allocated.
struct TextVisitor;

impl serde::de::Visitor<'_> for TextVisitor {
    type Value = SharedText;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<SharedText, E> {
        Ok(SharedText::from(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_a_plain_string_on_the_wire() {
        let text: SharedText = serde_json::from_str(r#""rolled \"out\"""#).unwrap();
        assert_eq!(text, "rolled \"out\"");
        assert_eq!(serde_json::to_string(&text).unwrap(), r#""rolled \"out\"""#);
    }

    #[test]
    fn clones_share_and_equal_text_compares_equal() {
        let a = SharedText::from("ready");
        let b = a.clone();
        assert!(a.ptr_eq(&b));
        assert_eq!(a.holders(), 2);
        let c = SharedText::from("ready".to_string());
        assert_eq!(a, c);
        assert!(!a.ptr_eq(&c));
    }
}
