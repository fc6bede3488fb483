//! A uid as the child caches keep it. The API server's uids are UUIDs in their canonical text (36 characters, a
//! 48-byte allocation each); a view holds two (its own and its controller's), so they are kept as their 16 bytes,
//! and anything else exactly as it came.

use std::fmt;

#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Uid {
    /// A canonical lowercase UUID, which `Display` writes back exactly.
    Uuid([u8; 16]),
    Text(Box<str>),
}

impl Uid {
    pub fn parse(text: &str) -> Uid {
        canonical_uuid(text).map_or_else(|| Uid::Text(text.into()), Uid::Uuid)
    }

    /// Whether this is the uid `text`.
    pub fn is(&self, text: &str) -> bool {
        match self {
            Uid::Uuid(bytes) => canonical_uuid(text).is_some_and(|b| b == *bytes),
            Uid::Text(own) => **own == *text,
        }
    }
}

impl Default for Uid {
    fn default() -> Self {
        Uid::Text("".into())
    }
}

/// Hyphens after the 8th, 12th, 16th and 20th digit.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];

/// The bytes of a UUID in canonical lowercase text; None for any other text (kept as it came).
fn canonical_uuid(text: &str) -> Option<[u8; 16]> {
    let text = text.as_bytes();
    if text.len() != 36 || HYPHENS.iter().any(|&i| text[i] != b'-') {
        return None;
    }
    let mut digits = text.iter().enumerate().filter(|(i, _)| !HYPHENS.contains(i)).map(|(_, d)| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    });
    let mut bytes = [0u8; 16];
    for byte in &mut bytes {
        *byte = (digits.next()?? << 4) | digits.next()??;
    }
    Some(bytes)
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Uid::Uuid(bytes) => {
                for (i, byte) in bytes.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        f.write_str("-")?;
                    }
                    write!(f, "{byte:02x}")?;
                }
                Ok(())
            }
            Uid::Text(text) => f.write_str(text),
        }
    }
}

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_canonical_uuid_is_kept_as_bytes_and_written_back_exactly() {
        let text = "0f8e3c2a-9b1d-4e5f-a6b7-c8d9e0f1a2b3";
        let uid = Uid::parse(text);
        assert!(matches!(uid, Uid::Uuid(_)));
        assert_eq!(uid.to_string(), text);
        assert!(uid.is(text));
        assert!(!uid.is("0f8e3c2a-9b1d-4e5f-a6b7-c8d9e0f1a2b4"));
        assert!(!uid.is("c1"));
    }

    #[test]
    fn any_other_text_is_kept_as_it_came() {
        for text in [
            "c1",
            "",
            "0F8E3C2A-9B1D-4E5F-A6B7-C8D9E0F1A2B3",
            "0f8e3c2a-9b1d-4e5f-a6b7-c8d9e0f1a2b",
            "0f8e3c2a+9b1d-4e5f-a6b7-c8d9e0f1a2b3",
        ] {
            let uid = Uid::parse(text);
            assert!(matches!(uid, Uid::Text(_)), "{text}");
            assert_eq!(uid.to_string(), text);
            assert!(uid.is(text));
        }
        assert!(!Uid::parse("0F8E3C2A-9B1D-4E5F-A6B7-C8D9E0F1A2B3").is("0f8e3c2a-9b1d-4e5f-a6b7-c8d9e0f1a2b3"));
    }

    #[test]
    fn a_uid_is_three_words_not_a_string_and_its_allocation() {
        assert_eq!(std::mem::size_of::<Uid>(), 24);
    }
}
