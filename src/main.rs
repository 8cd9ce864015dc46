//! The `hotrank` command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};

use hotrank::clock::SystemClock;
use hotrank::config::{Config, FsyncMode, LogFormat};
use hotrank::store::StoreSettings;
use hotrank::store::embedded::{Durability, EmbeddedStore};

#[derive(Parser)]
#[command(
    name = "hotrank",
    version,
    about = "Self-hosted hot/trending content engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP server with the embedded store.
    Serve(ServeArgs),
    /// Validate a configuration file and print the effective configuration.
    CheckConfig(ServeArgs),
    /// Drive a running hotrank (or seed 000's Lua script on Redis) with a
    /// realistic event stream and report throughput and latency.
    Bench(hotrank::loadgen::BenchArgs),
    /// Serve an empty handler on the ingest routes: the HTTP floor that
    /// benchmarks compare single views with.
    BenchFloor {
        #[arg(long, default_value = "127.0.0.1:8090")]
        listen: SocketAddr,
    },
    /// Simulate articles and traffic through the engine; report the top N over time.
    Simulate(hotrank::cli::simulate::SimulateArgs),
    /// Replay an event log under two parameter sets and compare their top N.
    Replay(hotrank::cli::replay::ReplayArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// TOML configuration file (see the README for every key).
    #[arg(long, env = "HOTRANK_CONFIG")]
    config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, env = "HOTRANK_LISTEN")]
    listen: Option<SocketAddr>,
    /// Data directory of the embedded store [default: ./data].
    #[arg(long, env = "HOTRANK_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// When to fsync the log: always (default) or interval.
    #[arg(long, env = "HOTRANK_FSYNC", value_parser = ["always", "interval"])]
    fsync: Option<String>,
    /// Log format: text or json.
    #[arg(long, env = "HOTRANK_LOG_FORMAT", value_parser = ["text", "json"])]
    log_format: Option<String>,
    #[arg(long, env = "HOTRANK_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    #[arg(long, env = "HOTRANK_INGEST_TOKEN", hide_env_values = true)]
    ingest_token: Option<String>,
}

impl ServeArgs {
    fn load(&self) -> Result<Config, String> {
        let mut c = match &self.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        if let Some(l) = self.listen {
            c.listen = l;
        }
        if let Some(d) = &self.data_dir {
            c.data_dir = d.clone();
        }
        if let Some(f) = &self.fsync {
            c.embedded.fsync = if f == "interval" {
                FsyncMode::Interval
            } else {
                FsyncMode::Always
            };
        }
        if let Some(f) = &self.log_format {
            c.log_format = if f == "json" {
                LogFormat::Json
            } else {
                LogFormat::Text
            };
        }
        if self.admin_token.is_some() {
            c.admin_token = self.admin_token.clone();
        }
        if self.ingest_token.is_some() {
            c.ingest_token = self.ingest_token.clone();
        }
        Ok(c)
    }
}

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutdown signal received: draining requests and flushing");
}

async fn serve(config: Config) -> Result<(), String> {
    for w in config.validate()? {
        tracing::warn!("{w}");
    }
    let settings = StoreSettings::from_config(&config);
    let (store, report) = EmbeddedStore::open(Durability::from_config(&config), settings)?;
    tracing::info!(
        data_dir = %config.data_dir.display(),
        snapshot_seq = ?report.snapshot_seq,
        replayed_records = report.replayed_records,
        truncated_bytes = report.truncated_bytes,
        articles = report.articles,
        ms = report.elapsed_ms as u64,
        "embedded store opened"
    );
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let state = hotrank::server::build_state(config, Arc::new(store), Arc::new(SystemClock))?;
    tracing::info!(%addr, "hotrank listening: dashboard at http://{addr}/");
    hotrank::server::run(listener, state, shutdown_signal())
        .await
        .map_err(|e| e.to_string())
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => args.load().and_then(|config| {
            init_logs(config.log_format);
            runtime()?.block_on(serve(config))
        }),
        Command::Bench(args) => runtime().and_then(|rt| {
            let report = rt.block_on(hotrank::loadgen::run(args))?;
            println!(
                "{}: {:.0} events/s, {:.0} requests/s, latency p50 {} us, p99 {} us, p99.9 {} us, max {} us, errors {}",
                report.mode,
                report.events_per_sec,
                report.requests_per_sec,
                report.p50_us,
                report.p99_us,
                report.p999_us,
                report.max_us,
                report.errors
            );
            Ok(())
        }),
        Command::BenchFloor { listen } => runtime().and_then(|rt| {
            rt.block_on(async {
                let listener = tokio::net::TcpListener::bind(listen)
                    .await
                    .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
                eprintln!("empty ingest handler on http://{listen}");
                hotrank::loadgen::serve_floor(listener).await.map_err(|e| e.to_string())
            })
        }),
        Command::CheckConfig(args) => args.load().and_then(|config| {
            let warnings = config.validate()?;
            for w in warnings {
                eprintln!("warning: {w}");
            }
            print!("{}", toml::to_string(&config).map_err(|e| e.to_string())?);
            Ok(())
        }),
        Command::Simulate(args) => match hotrank::cli::simulate::run(args) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::FAILURE,
            Err(e) => Err(e),
        },
        Command::Replay(args) => hotrank::cli::replay::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hotrank: {e}");
            ExitCode::FAILURE
        }
    }
}
