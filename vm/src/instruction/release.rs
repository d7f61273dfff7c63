//! `ReleaseTensor`: free a blob's memory once every earlier access, on every stream, is done.

use super::policy::{ComputeCtx, InstructionPolicy, PrepareCtx, PrepareError};
use crate::blob::Blob;
use crate::error::Result;
use std::sync::Arc;

/// Frees a blob's memory. It *writes* the blob, so it runs after every earlier reader and writer
/// (cross-stream ones through edges, same-stream ones by FIFO order); on a stream-ordered device
/// the free is itself stream-ordered.
pub struct ReleaseTensor {
    blob: [Arc<Blob>; 1],
}

impl ReleaseTensor {
    /// Releases `blob`.
    pub fn new(blob: Arc<Blob>) -> Self {
        ReleaseTensor { blob: [blob] }
    }
}

impl InstructionPolicy for ReleaseTensor {
    fn name(&self) -> &str {
        "release_tensor"
    }
    fn outputs(&self) -> &[Arc<Blob>] {
        &self.blob
    }
    fn fusable(&self) -> bool {
        true
    }
    fn handles_poison(&self) -> bool {
        true
    }
    fn frees_memory(&self) -> bool {
        true
    }
    fn prepare(&mut self, _ctx: &mut PrepareCtx<'_>) -> Result<(), PrepareError> {
        Ok(()) // never allocate what is about to be freed
    }
    fn compute(&mut self, _ctx: &mut ComputeCtx<'_>) -> Result<()> {
        self.blob[0].free_memory();
        Ok(())
    }
}
