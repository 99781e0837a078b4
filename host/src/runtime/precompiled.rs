//! Compiled components on disk, so that a restart does not compile a large plugin again: one
//! file per component sha256 and engine build (wasmtime's compatibility hash: its version,
//! target and the settings that shape machine code).
//!
//! Loading machine code is only as safe as the directory it comes from: the host reads only
//! files it wrote itself (written to a temporary name, then renamed), named by the sha256 of
//! the bytes they were compiled from. A file that wasmtime refuses is compiled again.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where a component came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Compiled now.
    Compiled,
    /// Already compiled in this process.
    Memory,
    /// Read from the precompiled cache on disk.
    Disk,
}

/// A directory of precompiled components.
#[derive(Clone, Debug)]
pub struct DiskCache {
    dir: PathBuf,
}

impl DiskCache {
    /// The cache in `dir` (created if missing).
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(Self { dir: dir.to_path_buf() })
    }

    /// The component with content `sha256`: read from disk when this engine build wrote it,
    /// else compiled from `bytes` and written (a write failure only costs the next start).
    pub fn load(&self, engine: &Engine, sha256: &str, bytes: &[u8]) -> wasmtime::Result<(Component, Origin)> {
        let path = self.path(engine, sha256);
        if path.is_file() {
            // SAFETY: the file was written by `precompile_component` of an engine with the same
            // compatibility hash (its name says so), into a directory only the host writes.
            match unsafe { Component::deserialize_file(engine, &path) } {
                Ok(component) => return Ok((component, Origin::Disk)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), "precompiled component refused, compiling again: {e:#}")
                }
            }
        }
        let serialized = engine.precompile_component(bytes)?;
        if let Err(e) = write_atomically(&path, &serialized) {
            tracing::warn!(path = %path.display(), "cannot write the precompiled component: {e}");
        }
        // SAFETY: `serialized` was produced by this engine just now.
        let component = unsafe { Component::deserialize(engine, &serialized)? };
        Ok((component, Origin::Compiled))
    }

    fn path(&self, engine: &Engine, sha256: &str) -> PathBuf {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        self.dir.join(format!("{sha256}-{:016x}.cwasm", hasher.finish()))
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let partial = path.with_extension(format!("partial-{}", std::process::id()));
    std::fs::write(&partial, bytes)?;
    std::fs::rename(&partial, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{Limits, Runtime};

    #[test]
    fn a_restart_reads_the_component_from_disk_and_a_damaged_file_is_compiled_again() {
        let dir = std::env::temp_dir().join(format!("ksm-precompiled-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let origin = || {
            let runtime = Runtime::with_options(Some(DiskCache::open(&dir).unwrap()), 1).unwrap();
            let plugin = runtime.load(crate::builtin::FLUX, Limits::default()).unwrap();
            assert_eq!(crate::plugin::Plugin::metadata(&plugin).name, "flux");
            plugin.info().origin
        };
        assert_eq!(origin(), Origin::Compiled);
        assert_eq!(origin(), Origin::Disk, "a new runtime (a restart) reads what the first one wrote");
        let files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "{files:?}");
        std::fs::write(&files[0], b"not machine code").unwrap();
        assert_eq!(origin(), Origin::Compiled, "a damaged file is compiled again");
        assert_eq!(origin(), Origin::Disk, "and rewritten");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
