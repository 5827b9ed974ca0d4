//! [`TextPool`]: response bodies written into reused buffers.
//!
//! A `/metrics` answer of a big directory is most of a megabyte. Allocated
//! afresh for every scrape, such a buffer comes from new pages of memory,
//! and the kernel's work of handing each page over (a fault per 4 KiB) cost
//! about a tenth of a frequent poll's processor time. So bodies are written
//! into buffers kept from earlier answers, and a buffer comes back to the
//! pool when the answer it carried has been sent.

use std::sync::{Arc, Mutex, Weak};

use axum::body::Bytes;

/// Buffers kept for reuse, at most: one per scrape running at once is
/// plenty.
const KEPT: usize = 4;

/// A buffer bigger than this is not kept (an exceptional answer should not
/// pin its memory).
const KEPT_CAPACITY: usize = 64 << 20;

/// Buffers for response bodies.
#[derive(Debug, Default)]
pub(crate) struct TextPool {
    free: Mutex<Vec<String>>,
}

impl TextPool {
    /// An empty buffer with room for at least `capacity` bytes.
    pub(crate) fn take(&self, capacity: usize) -> String {
        let reused = self
            .free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        let mut text = reused.unwrap_or_default();
        text.clear();
        text.reserve(capacity);
        text
    }

    /// `text` as a response body; its buffer comes back here once the body
    /// is dropped (sent, or abandoned).
    pub(crate) fn body(self: &Arc<Self>, text: String) -> Bytes {
        Bytes::from_owner(Pooled {
            text,
            pool: Arc::downgrade(self),
        })
    }

    fn put(&self, text: String) {
        if text.capacity() > KEPT_CAPACITY {
            return;
        }
        let mut free = self
            .free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if free.len() < KEPT {
            free.push(text);
        }
    }
}

/// A body's text, going back to its pool when dropped.
struct Pooled {
    text: String,
    pool: Weak<TextPool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        self.text.as_bytes()
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.put(std::mem::take(&mut self.text));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sent_body_gives_its_buffer_back() {
        let pool = Arc::new(TextPool::default());
        let mut text = pool.take(1 << 20);
        text.push_str("hello");
        let address = text.as_ptr();
        let body = pool.body(text);
        assert_eq!(&body[..], b"hello");
        let reused = pool.take(10);
        assert_ne!(reused.as_ptr(), address, "still in use by the body");
        drop(body);
        let again = pool.take(10);
        assert_eq!(again.as_ptr(), address);
        assert!(again.is_empty() && again.capacity() >= 1 << 20);
        drop(reused);
    }
}
