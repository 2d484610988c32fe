//! Small synchronisation helpers shared by every layer.

use std::sync::{Mutex, MutexGuard};

/// Locks a mutex whatever a panicking holder left behind: every state guarded in this crate
/// stays consistent between statements.
pub(crate) fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
