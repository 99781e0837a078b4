//! Compiled components on disk, so that a restart does not compile a large plugin again: one
//! file per component sha256 and engine build (wasmtime's compatibility hash: its version,
//! target and the settings that shape machine code).
//!
//! Loading machine code is only as safe as the directory it comes from. The host reads only
//! files that look like its own: owned by its user, writable by no one else, and whole (each
//! file starts with the sha256 of the machine code after it, checked before wasmtime sees a
//! byte). That stops a damaged or half-written file, and files another user put there; it
//! cannot stop code running as the host's own user, which could change the host itself. A file
//! refused is compiled again. The directory holds at most [`MAX_FILES`] components: the least
//! recently used go first, so a tag pulled again and again cannot fill the volume.

use super::errors::Unusable;
use sha2::{Digest, Sha256};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;
use wasmtime::Engine;
use wasmtime::component::Component;

/// Components kept on disk.
const MAX_FILES: usize = 32;
/// Extension of the cache's files.
const EXTENSION: &str = "cwasm";

/// Where a component came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Compiled now.
    Compiled,
    /// Already compiled in this process.
    Memory,
    /// Read from the precompiled cache on disk.
    Disk,
    /// Compiled ahead of time into this binary (the built-in plugins).
    BuiltIn,
}

/// A directory of precompiled components.
#[derive(Clone, Debug)]
pub struct DiskCache {
    dir: PathBuf,
    max_files: usize,
}

impl DiskCache {
    /// The cache in `dir` (created if missing).
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(Self { dir: dir.to_path_buf(), max_files: MAX_FILES })
    }

    /// The component with content `sha256`: read from disk when this engine build wrote it,
    /// else compiled from `bytes` and written (a write failure only costs the next start).
    pub fn load(&self, engine: &Engine, sha256: &str, bytes: &[u8]) -> wasmtime::Result<(Component, Origin)> {
        let path = self.path(engine, sha256);
        if path.is_file() {
            match read_own(&path) {
                // SAFETY: the machine code is what `precompile_component` of an engine with the
                // same compatibility hash (the file's name says so) wrote: the file is the host
                // user's, writable by no one else, and its content hash holds.
                Ok(code) => match unsafe { Component::deserialize(engine, &code) } {
                    Ok(component) => {
                        touch(&path);
                        return Ok((component, Origin::Disk));
                    }
                    Err(e) => {
                        tracing::warn!(path = %path.display(), "precompiled component refused, compiling again: {e:#}")
                    }
                },
                Err(why) => {
                    tracing::warn!(path = %path.display(), "precompiled component refused, compiling again: {why}")
                }
            }
        }
        let serialized = engine.precompile_component(bytes)?;
        if let Err(e) = write_atomically(&path, &serialized) {
            tracing::warn!(path = %path.display(), "cannot write the precompiled component: {e}");
        }
        self.prune();
        // SAFETY: `serialized` was produced by this engine just now.
        let component = unsafe { Component::deserialize(engine, &serialized)? };
        Ok((component, Origin::Compiled))
    }

    fn path(&self, engine: &Engine, sha256: &str) -> PathBuf {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        self.dir.join(format!("{sha256}-{:016x}.{EXTENSION}", hasher.finish()))
    }

    /// Removes the least recently used components beyond [`MAX_FILES`].
    fn prune(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let mut files: Vec<(SystemTime, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == EXTENSION))
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        if files.len() <= self.max_files {
            return;
        }
        files.sort();
        for (_, path) in &files[..files.len() - self.max_files] {
            if let Err(e) = std::fs::remove_file(path) {
                tracing::warn!(path = %path.display(), "cannot remove a precompiled component: {e}");
            }
        }
    }
}

/// The machine code in the cache file `path`, if the file is the host's own and whole.
fn read_own(path: &Path) -> Result<Vec<u8>, Unusable> {
    let metadata = std::fs::symlink_metadata(path)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let user = unsafe { libc::geteuid() };
    if !metadata.is_file() || metadata.uid() != user {
        return Err(Unusable::NotOwn { user });
    }
    if metadata.mode() & 0o022 != 0 {
        return Err(Unusable::Writable { mode: metadata.mode() & 0o777 });
    }
    let file = std::fs::read(path)?;
    let (hash, code) = file.split_at_checked(32).ok_or(Unusable::Short)?;
    if Sha256::digest(code).as_slice() != hash {
        return Err(Unusable::Damaged);
    }
    Ok(code.to_vec())
}

/// Marks `path` as just used (its modification time orders the pruning).
fn touch(path: &Path) {
    if let Ok(file) = std::fs::File::options().append(true).open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// Writes the sha256 of `code` and `code` to a temporary name readable by others but writable
/// only by the host, then renames it to `path`.
fn write_atomically(path: &Path, code: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let partial = path.with_extension(format!("partial-{}", std::process::id()));
    let mut file = std::fs::File::options().write(true).create(true).truncate(true).mode(0o644).open(&partial)?;
    file.write_all(&Sha256::digest(code))?;
    file.write_all(code)?;
    file.sync_all()?;
    std::fs::rename(&partial, path)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::plugin::Limits;
    use crate::runtime::Runtime;
    use std::os::unix::fs::PermissionsExt;

    fn fresh_dir(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ksm-precompiled-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// The Flux plugin with a custom section naming `n` appended: another component (another
    /// sha256) that behaves the same.
    pub fn variant(n: u8) -> Vec<u8> {
        let mut bytes = crate::builtin::FLUX.to_vec();
        bytes.extend_from_slice(&[0, 3, 2, b'v', n]);
        bytes
    }

    fn origin(dir: &Path, bytes: &[u8]) -> Origin {
        let runtime = Runtime::with_options(Some(DiskCache::open(dir).unwrap()), 1).unwrap();
        let plugin = runtime.load(bytes, Limits::default()).unwrap();
        assert_eq!(crate::plugin::Plugin::metadata(&plugin).name, "flux");
        plugin.info().origin
    }

    fn files(dir: &Path) -> Vec<PathBuf> {
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect()
    }

    #[test]
    fn a_restart_reads_the_component_from_disk_and_a_damaged_file_is_compiled_again() {
        let dir = fresh_dir("restart");
        assert_eq!(origin(&dir, &variant(0)), Origin::Compiled);
        assert_eq!(origin(&dir, &variant(0)), Origin::Disk, "a new runtime (a restart) reads it");
        let written = files(&dir);
        assert_eq!(written.len(), 1, "{written:?}");
        let mut damaged = std::fs::read(&written[0]).unwrap();
        let middle = damaged.len() / 2;
        damaged[middle] ^= 0xff;
        std::fs::write(&written[0], &damaged).unwrap();
        assert_eq!(origin(&dir, &variant(0)), Origin::Compiled, "a damaged file is compiled again");
        assert_eq!(origin(&dir, &variant(0)), Origin::Disk, "and rewritten");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_others_may_write_is_never_loaded() {
        let dir = fresh_dir("mode");
        assert_eq!(origin(&dir, &variant(0)), Origin::Compiled);
        let file = &files(&dir)[0];
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(read_own(file).unwrap_err().to_string().contains("writable by others"));
        assert_eq!(origin(&dir, &variant(0)), Origin::Compiled);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_cache_keeps_the_most_recently_used_components() {
        let dir = fresh_dir("lru");
        let cache = DiskCache { max_files: 2, ..DiskCache::open(&dir).unwrap() };
        let engine = Engine::default();
        let load = |n: u8| {
            let bytes = variant(n);
            let sha256 = hex::encode(Sha256::digest(&bytes));
            std::thread::sleep(std::time::Duration::from_millis(20)); // distinct modification times
            cache.load(&engine, &sha256, &bytes).unwrap().1
        };
        assert_eq!([load(1), load(2), load(1)], [Origin::Compiled, Origin::Compiled, Origin::Disk]);
        assert_eq!(load(3), Origin::Compiled);
        assert_eq!(files(&dir).len(), 2, "bounded");
        assert_eq!(load(1), Origin::Disk, "the most recently used stays");
        assert_eq!(load(2), Origin::Compiled, "the least recently used went");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
