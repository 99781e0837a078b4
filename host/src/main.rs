//! `ksm-adapter`: the k0rdent service-manager adapter host. See `ksm-adapter --help`.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KSM_LOG").unwrap_or_else(|_| args.log_level.as_str().into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
