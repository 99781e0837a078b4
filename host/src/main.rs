//! `ksm-adapter`: the k0rdent service-manager adapter host. See `ksm-adapter --help`.

mod cli;

use clap::Parser;
use std::process::ExitCode;

/// jemalloc rather than glibc's malloc: less memory and less CPU in allocation at scale
/// (docs/performance.md has the figures).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once at its start (the `malloc_conf` of its manual, under the
/// `_rjem_` prefix tikv-jemalloc-sys builds it with). Two arenas instead of four per CPU: each
/// arena keeps its own partly used pages, and a controller's allocations are not contended
/// enough to need more (a lower peak RSS at the same CPU: docs/performance.md).
/// `_RJEM_MALLOC_CONF` in the environment still overrides it.
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: MallocConf = MallocConf(c"narenas:2".as_ptr());

/// A C string pointer that may live in a static: it points to a literal, never written.
#[repr(transparent)]
struct MallocConf(*const std::ffi::c_char);

// SAFETY: the pointer is to a `'static` literal that nothing writes.
unsafe impl Sync for MallocConf {}

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KSM_LOG").unwrap_or_else(|_| args.log_level.as_str().into()),
        )
        .with_writer(std::io::stderr);
    match args.log_format {
        cli::LogFormat::Text => logs.init(),
        // One JSON object per line, with the reconcile span (the ServiceSet key) on each.
        cli::LogFormat::Json => logs.json().with_current_span(true).with_span_list(false).init(),
    }
    match cli::run(args) {
        Ok(code) => code,
        // The reader went away (e.g. `| head`): nothing more to say.
        Err(e) if e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
