//! What a plugin call runs inside: the per-call store state, its memory limiter, a deny-all
//! WASI context for components that import WASI, and captured stdout/stderr.

use super::guest_log::GuestLog;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime::{ResourceLimiter, StoreContextMut};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{DynPollable, OutputStream, Pollable, StreamResult, subscribe};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// Bytes of stdout/stderr kept per call; the rest is dropped (and counted), never an error.
const CAPTURE_LIMIT: usize = 16 * 1024;

/// The state of one plugin call's store.
pub(super) struct CallState {
    pub limiter: MemoryLimiter,
    log: Arc<GuestLog>,
    /// Present only for components that import WASI (they are linked against it).
    wasi: Option<(WasiCtx, ResourceTable)>,
    output: Option<CapturedOutput>,
}

impl CallState {
    /// State for a component with no WASI imports.
    pub fn new(memory_limit: usize, log: Arc<GuestLog>) -> Self {
        Self { limiter: MemoryLimiter::new(memory_limit), log, wasi: None, output: None }
    }

    /// State for a component that imports WASI: no preopens, no environment, no arguments,
    /// no network, no stdin; stdout and stderr captured for the host log.
    pub fn with_wasi(memory_limit: usize, log: Arc<GuestLog>) -> Self {
        let output = CapturedOutput::default();
        let ctx = WasiCtxBuilder::new()
            .stdout(output.clone())
            .stderr(output.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        Self { wasi: Some((ctx, ResourceTable::new())), output: Some(output), ..Self::new(memory_limit, log) }
    }

    /// The plugin's log, for the contract's `host.log`.
    pub fn guest_log(&self) -> &GuestLog {
        &self.log
    }

    /// Sends what the plugin printed to the host log.
    pub fn flush_output(&self) {
        if let Some(output) = &self.output {
            let (text, dropped) = output.take();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                self.log.line(tracing::Level::INFO, line);
            }
            if dropped > 0 {
                self.log.line(tracing::Level::WARN, &format!("{dropped} more bytes of output dropped"));
            }
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        // Only components that import WASI are linked against it, and their stores are made
        // with `with_wasi`.
        let (ctx, table) = self.wasi.as_mut().expect("WASI is linked only for stores made with_wasi");
        WasiCtxView { ctx, table }
    }
}

/// The monotonic clock interface of the WASI version wasmtime-wasi implements; components that
/// import an older 0.2 version are linked to it.
const MONOTONIC_CLOCK: &str = "wasi:clocks/monotonic-clock@0.2.12";

/// Makes the monotonic clock's subscriptions ready at once. They are the only WASI calls that can
/// block in this sandbox (no sockets, files or stdin), and a host call waiting in `poll` is
/// beyond the epoch deadline, which interrupts only wasm code: a few sleeping plugins would hold
/// every instance and reconcile slot. So a plugin's `sleep` returns at once (the contract gives
/// plugins no clock they could rely on), and a loop waiting for the clock meets the deadline.
pub(super) fn never_block(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut clock = linker.instance(MONOTONIC_CLOCK)?;
    for subscription in ["subscribe-duration", "subscribe-instant"] {
        clock.func_wrap(
            subscription,
            |mut store: StoreContextMut<'_, CallState>, (_,): (u64,)| -> wasmtime::Result<(Resource<DynPollable>,)> {
                let table = store.data_mut().ctx().table;
                let ready = table.push(Ready)?;
                Ok((subscribe(table, ready)?,))
            },
        )?;
    }
    linker.allow_shadowing(false);
    Ok(())
}

/// A pollable that is always ready.
struct Ready;

#[wasmtime_wasi::async_trait]
impl Pollable for Ready {
    async fn ready(&mut self) {}
}

/// Caps the linear memory of one instance: the sum over all its memories, so a component of
/// many core modules gets no more than one of a single module. Remembers whether the cap was hit
/// so a resulting trap can be reported as a memory limit rather than an anonymous crash.
pub(super) struct MemoryLimiter {
    limit: usize,
    /// Bytes of all memories of the store.
    total: usize,
    pub exceeded: bool,
}

impl MemoryLimiter {
    fn new(limit: usize) -> Self {
        Self { limit, total: 0, exceeded: false }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let total = self.total.saturating_sub(current).saturating_add(desired);
        if total > self.limit {
            self.exceeded = true;
            return Ok(false);
        }
        self.total = total;
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        // Tables hold function references; a million entries is far beyond any honest plugin.
        Ok(desired <= 1_000_000)
    }
}

/// A stdout/stderr sink that keeps the first [`CAPTURE_LIMIT`] bytes and silently drops the
/// rest, so a chatty plugin is never failed for printing.
#[derive(Clone, Default)]
struct CapturedOutput(Arc<Mutex<(Vec<u8>, usize)>>);

impl CapturedOutput {
    fn push(&self, bytes: &[u8]) {
        let mut guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (kept, dropped) = &mut *guard;
        let room = CAPTURE_LIMIT.saturating_sub(kept.len()).min(bytes.len());
        kept.extend_from_slice(&bytes[..room]);
        *dropped += bytes.len() - room;
    }

    fn take(&self) -> (String, usize) {
        let mut guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (kept, dropped) = std::mem::take(&mut *guard);
        (String::from_utf8_lossy(&kept).into_owned(), dropped)
    }
}

impl IsTerminal for CapturedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

impl OutputStream for CapturedOutput {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CapturedOutput {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CapturedOutput {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_limit_counts_every_memory_of_an_instance() {
        let mut limiter = MemoryLimiter::new(10 << 20);
        assert!(limiter.memory_growing(0, 4 << 20, None).unwrap());
        assert!(limiter.memory_growing(4 << 20, 6 << 20, None).unwrap());
        // A second memory would take the instance past its 10 MiB.
        assert!(!limiter.memory_growing(0, 6 << 20, None).unwrap());
        assert!(limiter.exceeded);
        assert!(limiter.memory_growing(0, 4 << 20, None).unwrap());
    }
}
