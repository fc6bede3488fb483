//! One copy of each text the Microservice cache repeats (see `microservice_core::shared_text`). Owned by the cache's
//! task, so it needs no lock; text no cached object holds any more is dropped at the next sweep.

use std::collections::HashSet;

use microservice_core::shared_text::SharedText;

/// Below this many texts a sweep is not worth its walk.
const FIRST_SWEEP: usize = 1024;

#[derive(Debug)]
pub struct Interner {
    texts: HashSet<SharedText>,
    /// The size at which unused texts are dropped next: twice what the last sweep left, so sweeping costs O(1) per
    /// text interned.
    sweep_at: usize,
}

impl Default for Interner {
    fn default() -> Self {
        Interner { texts: HashSet::new(), sweep_at: FIRST_SWEEP }
    }
}

impl Interner {
    /// The shared copy of `text`'s content (`text` itself when it is the first of its content).
    pub fn intern(&mut self, text: &SharedText) -> SharedText {
        if let Some(shared) = self.texts.get(text.as_str()) {
            return shared.clone();
        }
        if self.texts.len() >= self.sweep_at {
            // Held only here: no cached object uses it any more.
            self.texts.retain(|t| t.holders() > 1);
            self.sweep_at = (self.texts.len() * 2).max(FIRST_SWEEP);
        }
        self.texts.insert(text.clone());
        text.clone()
    }

    pub fn len(&self) -> usize {
        self.texts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_come_back_as_one_allocation() {
        let mut interner = Interner::default();
        let first = interner.intern(&SharedText::from("generation 1 is rolled out"));
        let second = interner.intern(&SharedText::from("generation 1 is rolled out".to_string()));
        assert!(first.ptr_eq(&second));
        assert_eq!(interner.len(), 1);
        let other = interner.intern(&SharedText::from("creating Deployment todo/a"));
        assert!(!other.ptr_eq(&first));
        assert_eq!(interner.len(), 2);
    }

    #[test]
    fn texts_no_one_holds_are_swept_once_the_set_doubles() {
        let mut interner = Interner::default();
        let kept = interner.intern(&SharedText::from("kept"));
        for i in 0..FIRST_SWEEP - 1 {
            interner.intern(&SharedText::from(format!("dropped {i}")));
        }
        assert_eq!(interner.len(), FIRST_SWEEP, "no sweep below the threshold");
        let after = interner.intern(&SharedText::from("new"));
        assert_eq!(interner.len(), 2, "only what someone holds survives the sweep, plus the new text");
        assert!(interner.intern(&SharedText::from("kept")).ptr_eq(&kept));
        assert!(interner.intern(&SharedText::from("new")).ptr_eq(&after));
    }
}
