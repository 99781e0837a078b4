//! `ksm-adapter`: the k0rdent service-manager adapter host. See `ksm-adapter --help`.

mod cli;

use clap::Parser;
use std::process::ExitCode;

/// jemalloc rather than glibc's malloc: less memory and less CPU in allocation at scale
/// (docs/performance.md has the figures).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
