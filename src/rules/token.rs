//! Lock tokens: the random value that signs a lock on every node.

use std::sync::Arc;

use rand::TryRng;
use rand::rngs::SysRng;

use crate::error::{Error, Result};

/// Random bytes per token: Redlock's 20 bytes (docs/redlock.md) from the OS CSPRNG.
const TOKEN_BYTES: usize = 20;

/// A fresh token, hex-encoded (40 characters) so any Redis client can read and compare it.
pub(crate) fn new_token() -> Result<Arc<str>> {
    let mut bytes = [0u8; TOKEN_BYTES];
    SysRng.try_fill_bytes(&mut bytes).map_err(|e| Error::Io {
        context: "reading the OS random number generator for a lock token".into(),
        source: std::io::Error::other(e.to_string()),
    })?;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    // Spelled out on the stack, so that the token costs one allocation: its `Arc`.
    let mut text = [0u8; TOKEN_BYTES * 2];
    for (pair, b) in text.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX[usize::from(b >> 4)];
        pair[1] = HEX[usize::from(b & 0xf)];
    }
    // Hex digits are ASCII: the text is borrowed as it is.
    Ok(Arc::from(&*String::from_utf8_lossy(&text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_40_hex_chars_and_distinct() {
        let tokens: std::collections::HashSet<Arc<str>> =
            (0..1000).map(|_| new_token().unwrap()).collect();
        assert_eq!(tokens.len(), 1000);
        for t in &tokens {
            assert_eq!(t.len(), 40);
            assert!(
                t.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            );
        }
    }
}
