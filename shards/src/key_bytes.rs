//! The bytes of a kept branch key ([`KeyBytes`]).
//!
//! A branch-heavy graph clones keys all the time: every route buffer, window, due index
//! entry, branch table node and emitted frame keeps its own. Most keys are short — arrow-row
//! spends nine bytes on a non-null `I64` — so a key of up to [`INLINE_KEY_BYTES`] is stored
//! inline and a clone is a copy of a few words, with no allocation and no pointer to follow
//! when two keys are compared. Longer keys share one reference-counted allocation, so their
//! clones do not allocate either.
//!
//! Why it is correct: equality, ordering and hashing are those of the byte slice
//! ([`KeyBytes::as_ref`]) whichever way the bytes are stored — a key can never be inline in one
//! map and shared in another with different results, and `BranchKey<&[u8]>` hashes and orders
//! like the kept key it names. Which form a key takes depends only on its length.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// Keys of at most this many bytes are stored inline (two non-null `I64` fields take 18).
pub const INLINE_KEY_BYTES: usize = 22;

/// The bytes of a kept branch key: inline when short, else one shared allocation. Built only
/// by [`KeyBytes::new`], which keeps the representation's invariants.
#[derive(Clone)]
pub struct KeyBytes(Repr);

#[derive(Clone)]
enum Repr {
    /// `bytes[..len]` is the key; `len <= INLINE_KEY_BYTES` and the bytes past it are zero.
    Inline {
        len: u8,
        bytes: [u8; INLINE_KEY_BYTES],
    },
    /// A key longer than [`INLINE_KEY_BYTES`].
    Shared(Arc<[u8]>),
}

impl KeyBytes {
    /// A kept copy of `bytes`.
    pub fn new(bytes: &[u8]) -> Self {
        if bytes.len() <= INLINE_KEY_BYTES {
            let mut inline = [0u8; INLINE_KEY_BYTES];
            inline[..bytes.len()].copy_from_slice(bytes);
            Self(Repr::Inline {
                len: bytes.len() as u8,
                bytes: inline,
            })
        } else {
            Self(Repr::Shared(Arc::from(bytes)))
        }
    }
}

impl Deref for KeyBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Repr::Shared(bytes) => bytes,
        }
    }
}

impl AsRef<[u8]> for KeyBytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

// Sound because equality, ordering and hashing are the slice's (module docs).
impl Borrow<[u8]> for KeyBytes {
    fn borrow(&self) -> &[u8] {
        self
    }
}

impl From<&[u8]> for KeyBytes {
    fn from(bytes: &[u8]) -> Self {
        Self::new(bytes)
    }
}

impl From<Vec<u8>> for KeyBytes {
    fn from(bytes: Vec<u8>) -> Self {
        Self::new(&bytes)
    }
}

impl<const N: usize> From<[u8; N]> for KeyBytes {
    fn from(bytes: [u8; N]) -> Self {
        Self::new(&bytes)
    }
}

impl PartialEq for KeyBytes {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            // The bytes past `len` are always zero, so whole arrays compare as the keys do,
            // in a few word compares rather than a call to memcmp.
            (
                Repr::Inline { len, bytes },
                Repr::Inline {
                    len: o_len,
                    bytes: o_bytes,
                },
            ) => len == o_len && bytes == o_bytes,
            _ => self.as_ref() == other.as_ref(),
        }
    }
}

impl Eq for KeyBytes {}

impl PartialOrd for KeyBytes {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for KeyBytes {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_ref().cmp(other.as_ref())
    }
}

impl Hash for KeyBytes {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_ref().hash(state);
    }
}

impl fmt::Debug for KeyBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_ref().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;

    fn hash_of<T: Hash + ?Sized>(value: &T) -> u64 {
        let mut hasher = DefaultHasher::new();
        value.hash(&mut hasher);
        hasher.finish()
    }

    /// Keys on both sides of the inline bound behave as their bytes: same equality, order and
    /// hash as the slice, and the form depends only on the length.
    #[test]
    fn behaves_as_its_bytes_on_both_sides_of_the_inline_bound() {
        let short: Vec<u8> = (0..INLINE_KEY_BYTES as u8).collect();
        let long: Vec<u8> = (0..=INLINE_KEY_BYTES as u8).collect();
        let (short_key, long_key) = (KeyBytes::new(&short), KeyBytes::new(&long));
        assert!(matches!(short_key.0, Repr::Inline { .. }));
        assert!(matches!(long_key.0, Repr::Shared(_)));
        assert_eq!(&*short_key, short.as_slice());
        assert_eq!(&*long_key, long.as_slice());
        assert_eq!(hash_of(&short_key), hash_of(short.as_slice()));
        assert_eq!(hash_of(&long_key), hash_of(long.as_slice()));
        // `short` is a prefix of `long`, so it sorts first, as the slices do.
        assert_eq!(short_key.cmp(&long_key), short.cmp(&long));
        assert_ne!(short_key, long_key);
        assert_eq!(long_key.clone(), long_key);
        assert_eq!(KeyBytes::new(&[]).len(), 0);
    }

    /// Maps hold keys by value: the inline form must not make a kept branch key wider than
    /// three words (the unbranched root fits in the tag's spare values).
    #[test]
    fn a_kept_branch_key_is_three_words() {
        assert_eq!(
            std::mem::size_of::<crate::branch_key::BranchKey>(),
            3 * std::mem::size_of::<usize>()
        );
    }
}
