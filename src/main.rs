//! The `hotrank` command line.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};

use hotrank::app;
use hotrank::archive::{Archive, ArchiveOptions, SourcePosition};
use hotrank::cli::transfer::{export_records, import_records, load_records, store_records};
use hotrank::clock::{Clock, SystemClock};
use hotrank::config::{Config, FsyncMode, LogFormat, StoreKind};
use hotrank::store::StoreSettings;
use hotrank::store::dump::{Record, read_records, write_records};
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
    /// Run the HTTP server (embedded store, or `--store redis`).
    Serve(ServeArgs),
    /// Validate a configuration file and print the effective configuration.
    CheckConfig(ServeArgs),
    /// Drive a running hotrank (or seed 000's Lua script on Redis) with a
    /// realistic event stream and report throughput and latency.
    Bench(hotrank::loadgen::BenchArgs),
    /// Serve an empty handler on the ingest routes: the HTTP floor that
    /// benchmarks compare single views with.
    BenchFloor {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8090")]
        listen: SocketAddr,
    },
    /// Simulate articles and traffic through the engine; report the top N over time.
    Simulate(hotrank::cli::simulate::SimulateArgs),
    /// Replay an event log under two parameter sets and compare their top N.
    Replay(hotrank::cli::replay::ReplayArgs),
    /// Print a running server's hot list as a table (rank, movement, score,
    /// PV, UV, title); `--watch` refreshes it.
    Top(hotrank::cli::top::TopArgs),
    /// Print a running server's totals and quarantine by reason.
    Stats(hotrank::cli::top::StatsArgs),
    /// List a running server's articles held for review, with their
    /// evidence; `--allow ID` / `--deny ID` decide on one.
    Review(hotrank::cli::review::ReviewArgs),
    /// Print the widget's click-through per model, raw and corrected for
    /// position bias (`GET /api/ctr`), from a server or a data dir.
    Ctr(hotrank::cli::ctr::CtrArgs),
    /// Write all state of the configured store as JSON lines (stop an
    /// embedded server first; Redis can be exported live).
    Export(DumpArgs),
    /// Load JSON lines written by `export` into the configured store, which
    /// must be empty (a new data dir, or a Redis prefix with no articles).
    Import(DumpArgs),
    /// The PostgreSQL archive (`[archive] url`): write the store's full
    /// state to it, or restore a store from it.
    #[command(subcommand)]
    Archive(ArchiveCommand),
    /// A pipeline worker (`[pipeline]`, docs/design.md "Pipeline") on the
    /// configured Redis: `filter` gates raw events, `count` applies the
    /// flagged ones. Runs until SIGTERM/Ctrl-C.
    Worker(WorkerArgs),
    /// Accept that the Redis store lost this site's data (restarted
    /// without persistence, FLUSHALL, a lost disk) without restoring it:
    /// sets the site's epoch again, so the API nodes, which refuse a Redis
    /// that lost it (503), serve it as it is. What it lost stays lost;
    /// `archive restore` brings back what the archive holds instead.
    RedisAckLoss(StoreArgs),
    /// Rebuild an embedded data directory whose log is damaged (the server
    /// refuses to start on one): keep every intact record, report what was
    /// skipped, write a new snapshot and move the old log aside. Stop the
    /// server first.
    Repair(StoreArgs),
}

#[derive(Subcommand)]
enum ArchiveCommand {
    /// Write all state of the configured store (embedded or redis) to the
    /// archive in batches. Upserts: a second run changes nothing; articles
    /// only the archive holds stay. Stop an embedded server first.
    Export(ArchiveArgs),
    /// Restore the configured store, which must be empty, from the archive.
    Import(ArchiveArgs),
    /// Disaster recovery of the pipeline's Redis (docs/design.md,
    /// "Disaster recovery"): with --replay, rebuild a Redis that lost
    /// everything from the archive, then replay the journal
    /// (`[pipeline] log_url`) over it; without, the same as `import`.
    Restore(RestoreArgs),
}

#[derive(clap::Args)]
struct RestoreArgs {
    #[command(flatten)]
    serve: ArchiveArgs,
    /// Replay the journal after the archive: every event acknowledged
    /// since the archive's positions is counted, once.
    #[arg(long)]
    replay: bool,
}

#[derive(clap::Args)]
struct WorkerArgs {
    /// filter or count.
    #[arg(value_parser = ["filter", "count"])]
    role: String,
    #[command(flatten)]
    serve: ArchiveArgs,
    #[command(flatten)]
    log: LogArgs,
}

#[derive(clap::Args)]
struct DumpArgs {
    #[command(flatten)]
    serve: StoreArgs,
    /// The dump file [default: stdout for export, stdin for import].
    #[arg(long)]
    file: Option<PathBuf>,
    /// import: adopt a Redis one of the seeds' designs filled (with
    /// --layout) instead of reading a dump.
    #[arg(long, requires = "layout", conflicts_with = "file")]
    from_redis: Option<String>,
    /// import --from-redis: seed000, seed001, seed003 or seed004.
    #[arg(long, requires = "from_redis")]
    layout: Option<String>,
    /// import --from-redis: the prefix of the seed's keys [default: none].
    #[arg(long, requires = "from_redis", default_value = "")]
    from_prefix: String,
}

/// Where state lives: the flags of every subcommand that opens the store.
#[derive(clap::Args)]
struct StoreArgs {
    /// TOML configuration file (see the README for every key).
    #[arg(long, env = "HOTRANK_CONFIG")]
    config: Option<PathBuf>,
    /// Data directory of the embedded store [default: ./data].
    #[arg(long, env = "HOTRANK_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// When to fsync the log: always (default) or interval.
    #[arg(long, env = "HOTRANK_FSYNC", value_parser = ["always", "interval"])]
    fsync: Option<String>,
    /// Where state lives: embedded (default), redis, or redis-cluster
    /// (`--redis-url` then names one or more seed nodes, comma-separated).
    #[arg(long, env = "HOTRANK_STORE", value_parser = ["embedded", "redis", "redis-cluster"])]
    store: Option<String>,
    /// Redis URL for --store redis [default: redis://127.0.0.1:6379/0].
    #[arg(long, env = "HOTRANK_REDIS_URL")]
    redis_url: Option<String>,
    /// Prefix of every Redis key (keeps sites apart on one Redis).
    #[arg(long, env = "HOTRANK_REDIS_PREFIX")]
    redis_prefix: Option<String>,
    /// Redis key layout: hotrank (default) or seed (the seeds' own keys).
    #[arg(long, env = "HOTRANK_REDIS_LAYOUT", value_parser = ["hotrank", "seed"])]
    redis_layout: Option<String>,
    /// Article shards of one site on Redis (`[redis] shards`, default 1).
    #[arg(long, env = "HOTRANK_REDIS_SHARDS")]
    redis_shards: Option<u32>,
}

impl StoreArgs {
    /// The configuration file (or the defaults) with these flags on top.
    fn load(&self) -> Result<Config, String> {
        let mut c = match &self.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
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
        if let Some(st) = &self.store {
            c.store = if st == "embedded" {
                StoreKind::Embedded
            } else {
                StoreKind::Redis
            };
            if st == "redis-cluster" {
                c.redis.cluster = true;
            }
        }
        if let Some(u) = &self.redis_url {
            c.redis.url = u.clone();
        }
        if let Some(p) = &self.redis_prefix {
            c.redis.prefix = p.clone();
        }
        if let Some(l) = &self.redis_layout {
            c.redis.layout = if l == "seed" {
                hotrank::config::RedisLayout::Seed
            } else {
                hotrank::config::RedisLayout::Hotrank
            };
        }
        if let Some(n) = self.redis_shards {
            c.redis.shards = n;
        }
        Ok(c)
    }
}

/// The store, the archive and the pipeline's journal: the `archive`
/// subcommands and the workers.
#[derive(clap::Args)]
struct ArchiveArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// PostgreSQL URL of the archive (`[archive] url`).
    #[arg(long, env = "HOTRANK_ARCHIVE_URL", hide_env_values = true)]
    archive_url: Option<String>,
    /// The pipeline journal's Redis (`[pipeline] log_url`), for disaster
    /// recovery (`hotrank archive restore --replay`).
    #[arg(long, env = "HOTRANK_PIPELINE_LOG_URL")]
    pipeline_log_url: Option<String>,
}

impl ArchiveArgs {
    fn load(&self) -> Result<Config, String> {
        let mut c = self.store.load()?;
        if let Some(u) = &self.archive_url {
            c.archive.url = u.clone();
        }
        if let Some(u) = &self.pipeline_log_url {
            c.pipeline.log_url = u.clone();
        }
        Ok(c)
    }
}

/// How a long-running process logs.
#[derive(clap::Args)]
struct LogArgs {
    /// Log format: text or json.
    #[arg(long, env = "HOTRANK_LOG_FORMAT", value_parser = ["text", "json"])]
    log_format: Option<String>,
}

impl LogArgs {
    fn apply(&self, c: &mut Config) {
        if let Some(f) = &self.log_format {
            c.log_format = if f == "json" {
                LogFormat::Json
            } else {
                LogFormat::Text
            };
        }
    }
}

/// Everything `hotrank serve` reads: the store, archive and journal, the
/// logs, and the server's own flags.
#[derive(clap::Args)]
struct ServeArgs {
    #[command(flatten)]
    archive: ArchiveArgs,
    #[command(flatten)]
    log: LogArgs,
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, env = "HOTRANK_LISTEN")]
    listen: Option<SocketAddr>,
    /// Ingest through the pipeline (`[pipeline] enabled`): needs
    /// `--store redis`.
    #[arg(long, env = "HOTRANK_PIPELINE")]
    pipeline: bool,
    /// With --pipeline: `all` (default) or a comma-separated subset of
    /// api, filter, count (`[pipeline] roles`).
    #[arg(long, env = "HOTRANK_ROLES")]
    roles: Option<String>,
    /// The admin token: `Authorization: Bearer <token>` for the admin
    /// endpoints and trusted ingest [default: generated into the data dir,
    /// its path logged].
    #[arg(long, env = "HOTRANK_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// The ingest token, for trusted backends: events it carries skip the
    /// per-IP limits [default: none].
    #[arg(long, env = "HOTRANK_INGEST_TOKEN", hide_env_values = true)]
    ingest_token: Option<String>,
}

impl ServeArgs {
    fn load(&self) -> Result<Config, String> {
        let mut c = self.archive.load()?;
        self.log.apply(&mut c);
        if let Some(l) = self.listen {
            c.listen = l;
        }
        if self.pipeline {
            c.pipeline.enabled = true;
        }
        if let Some(r) = &self.roles {
            c.pipeline.roles = r.clone();
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
    // Colour only for a person at a terminal: a file, a pipe or journald
    // gets plain text (and NO_COLOR turns it off everywhere).
    let colour = std::io::IsTerminal::is_terminal(&std::io::stdout())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour);
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

/// `hotrank serve` (and `hotrank worker`): the parts the configuration
/// asks for; the HTTP server when they include the API, until a signal.
async fn serve(config: Config) -> Result<(), String> {
    for w in config.validate()? {
        tracing::warn!("{w}");
    }
    let parts = app::Parts::start(&config).await?;
    let Some(store) = parts.store.clone() else {
        // Workers only.
        shutdown_signal().await;
        parts.stop().await;
        return Ok(());
    };
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let state =
        hotrank::server::build_state(config, store, parts.queue.clone(), Arc::new(SystemClock))?;
    let webhooks = parts.webhooks.clone();
    if let Some(w) = &webhooks {
        app::attach_webhooks(&state, w);
    }
    tracing::info!(%addr, "hotrank listening: dashboard at http://{addr}/");
    tokio::spawn(hotrank::gate::reload_on_sighup(state.bots.clone()));
    // Webhooks stop first: nothing decides or sends while the store flushes.
    let shutdown = async move {
        shutdown_signal().await;
        if let Some(w) = webhooks {
            w.stop().await;
        }
    };
    let served = hotrank::server::run(listener, state, shutdown)
        .await
        .map_err(|e| e.to_string());
    parts.stop().await;
    served
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

fn export(config: Config, file: Option<PathBuf>) -> Result<(), String> {
    config.validate()?;
    let (records, warning) = export_records(&runtime()?, &config)?;
    if let Some(w) = warning {
        eprintln!("warning: {w}");
    }
    let n = match file {
        Some(path) => {
            // The dump carries the identity key: as private as the data dir.
            let mut opts = std::fs::OpenOptions::new();
            opts.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
            let f = opts
                .open(&path)
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            write_records(&mut std::io::BufWriter::new(f), records).map_err(|e| e.to_string())?
        }
        None => write_records(
            &mut std::io::BufWriter::new(std::io::stdout().lock()),
            records,
        )
        .map_err(|e| e.to_string())?,
    };
    eprintln!("exported {n} records");
    Ok(())
}

fn import(config: Config, file: Option<PathBuf>) -> Result<(), String> {
    config.validate()?;
    let records = match file {
        Some(path) => {
            let f = std::fs::File::open(&path)
                .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
            read_records(std::io::BufReader::new(f)).map_err(|e| e.to_string())?
        }
        None => read_records(std::io::stdin().lock()).map_err(|e| e.to_string())?,
    };
    let (n, warning) = import_records(&runtime()?, &config, &records)?;
    if let Some(w) = warning {
        eprintln!("warning: {w}");
    }
    eprintln!("imported {n} articles");
    Ok(())
}

fn import_seed(
    config: Config,
    from: &str,
    from_prefix: &str,
    layout: Option<&str>,
) -> Result<(), String> {
    let layout: hotrank::cli::seed_import::SeedLayout = layout.unwrap_or_default().parse()?;
    let report = hotrank::cli::seed_import::import(&config, from, from_prefix, layout)?;
    for line in report.lines() {
        eprintln!("{line}");
    }
    Ok(())
}

fn open_archive(rt: &tokio::runtime::Runtime, config: &Config) -> Result<Archive, String> {
    if config.archive.url.is_empty() {
        return Err("no archive: set [archive] url or HOTRANK_ARCHIVE_URL".into());
    }
    rt.block_on(Archive::connect(&ArchiveOptions::from_config(
        &config.archive,
    )))
    .map_err(|e| e.to_string())
}

fn archive(cmd: ArchiveCommand) -> Result<(), String> {
    let rt = runtime()?;
    match cmd {
        ArchiveCommand::Export(args) => {
            let config = args.load()?;
            config.validate()?;
            if config.store == StoreKind::Redis && !config.pipeline.log_url.is_empty() {
                // docs/design.md, "Disaster recovery".
                return Err(
                    "archive export refuses a Redis with a pipeline journal ([pipeline] log_url): \
                     it would archive counts without the stream positions they include, and a \
                     restore would replay those events again; the archive writer keeps the \
                     archive current"
                        .into(),
                );
            }
            let archive = open_archive(&rt, &config)?;
            let started = std::time::Instant::now();
            let records = store_records(&rt, &config)?;
            let total = records
                .iter()
                .filter(|r| matches!(r, Record::Article { .. }))
                .count();
            eprintln!(
                "read {total} articles from the {} store in {:.1} s",
                config.store.as_str(),
                started.elapsed().as_secs_f64()
            );
            let at = SourcePosition::at(SystemClock.now());
            let w = rt
                .block_on(archive.export(&records, &at, |w| {
                    eprintln!(
                        "archive export: {}/{total} articles ({} changed), {} rows ({} changed)",
                        w.articles, w.articles_changed, w.rows, w.rows_changed
                    );
                }))
                .map_err(|e| e.to_string())?;
            eprintln!(
                "archived {} articles ({} changed), {} rows ({} changed) to schema {} in {:.1} s",
                w.articles,
                w.articles_changed,
                w.rows,
                w.rows_changed,
                archive.schema(),
                started.elapsed().as_secs_f64()
            );
        }
        ArchiveCommand::Restore(args) if args.replay => {
            let mut config = args.serve.load()?;
            config.pipeline.enabled = true;
            config.validate()?;
            let archive = open_archive(&rt, &config)?;
            let started = std::time::Instant::now();
            let done = rt.block_on(async {
                let pipe = app::open_pipeline(&config).await?;
                pipe.restore_and_replay(&archive, SystemClock.now(), |line| {
                    eprintln!("archive restore: {line}")
                })
                .await
                .map_err(|e| e.to_string())
            })?;
            eprintln!(
                "restored {} articles and replayed {} journal entries ({} applied, {} counted) in {:.1} s; pipeline epoch {}",
                done.articles,
                done.entries,
                done.applied,
                done.counted,
                started.elapsed().as_secs_f64(),
                done.epoch
            );
        }
        ArchiveCommand::Import(args) | ArchiveCommand::Restore(RestoreArgs { serve: args, .. }) => {
            let config = args.load()?;
            config.validate()?;
            let archive = open_archive(&rt, &config)?;
            let started = std::time::Instant::now();
            let records = rt
                .block_on(archive.records(|n| eprintln!("archive import: read {n} articles")))
                .map_err(|e| e.to_string())?;
            let n = load_records(&rt, &config, &records)?;
            eprintln!(
                "restored {n} articles into the {} store in {:.1} s",
                config.store.as_str(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    Ok(())
}

/// `hotrank redis-ack-loss` (docs: README, "Disaster recovery").
fn redis_ack_loss(config: Config) -> Result<(), String> {
    config.validate()?;
    if config.store != StoreKind::Redis {
        return Err("redis-ack-loss is for the Redis store (--store redis)".into());
    }
    if !config.pipeline.log_url.is_empty() {
        return Err(
            "this site keeps a pipeline journal ([pipeline] log_url): rebuild its Redis with \
             `hotrank archive restore --replay`, which counts every acknowledged event"
                .into(),
        );
    }
    let rt = runtime()?;
    let _in_runtime = rt.enter();
    let store = app::open_redis(&config)?;
    let (epoch, missing) = rt.block_on(store.set_epoch()).map_err(|e| e.to_string())?;
    if !missing {
        return Err(format!(
            "Redis holds this site's epoch {epoch}: it did not lose its data; nothing changed"
        ));
    }
    println!(
        "Redis holds site epoch {epoch} again: API nodes serve it as it is (what it lost is gone)"
    );
    Ok(())
}

fn repair(config: Config) -> Result<(), String> {
    config.validate()?;
    let settings = StoreSettings::from_config(&config);
    let r = EmbeddedStore::repair(&Durability::from_config(&config), &settings)
        .map_err(|e| e.to_string())?;
    let log = &r.log;
    println!(
        "started from snapshot {}; kept {} log records (last seq {})",
        r.snapshot_seq.map_or("none".to_string(), |s| s.to_string()),
        log.records,
        log.last_seq
    );
    for s in &log.skipped {
        println!(
            "skipped {} damaged bytes at {} offset {}: {}",
            s.bytes,
            s.file.display(),
            s.offset,
            s.reason
        );
    }
    for (a, b) in &log.missing {
        println!("lost records {a}..={b} (no intact copy)");
    }
    match (&r.new_snapshot_seq, &r.moved_to) {
        (Some(seq), Some(aside)) => println!(
            "wrote snapshot {seq}; the old log is in {} (delete it once you are satisfied)",
            aside.display()
        ),
        _ => println!("the log is not damaged: nothing changed"),
    }
    Ok(())
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
        Command::Worker(a) => a.serve.load().and_then(|mut config| {
            a.log.apply(&mut config);
            init_logs(config.log_format);
            config.pipeline.enabled = true;
            config.pipeline.roles = if a.role == "filter" { "filter" } else { "count" }.into();
            runtime()?.block_on(serve(config))
        }),
        Command::Export(a) => a.serve.load().and_then(|c| export(c, a.file)),
        Command::Import(a) => a.serve.load().and_then(|c| match &a.from_redis {
            Some(url) => import_seed(c, url, &a.from_prefix, a.layout.as_deref()),
            None => import(c, a.file),
        }),
        Command::Archive(cmd) => archive(cmd),
        Command::Repair(args) => args.load().and_then(repair),
        Command::RedisAckLoss(args) => args.load().and_then(redis_ack_loss),
        Command::CheckConfig(args) => args.load().and_then(|config| {
            let warnings = config.validate()?;
            for w in warnings {
                eprintln!("warning: {w}");
            }
            // Secrets are said to be set, never printed.
            print!(
                "{}",
                toml::to_string(&config.redacted()).map_err(|e| e.to_string())?
            );
            Ok(())
        }),
        Command::Simulate(args) => match hotrank::cli::simulate::run(args) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::FAILURE,
            Err(e) => Err(e),
        },
        Command::Replay(args) => hotrank::cli::replay::run(args),
        Command::Top(args) => hotrank::cli::top::run_top(args),
        Command::Stats(args) => hotrank::cli::top::run_stats(args),
        Command::Review(args) => hotrank::cli::review::run(args),
        Command::Ctr(args) => hotrank::cli::ctr::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hotrank: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every subcommand, with its path (`archive restore`).
    fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands() {
            let p = format!("{path} {}", sub.get_name()).trim().to_string();
            out.push((p.clone(), sub.clone()));
            walk(sub, &p, out);
        }
    }

    #[test]
    fn every_flag_of_every_subcommand_has_help() {
        Cli::command().debug_assert();
        let mut all = Vec::new();
        walk(&Cli::command(), "", &mut all);
        assert!(all.len() > 15, "{}", all.len());
        let mut missing = Vec::new();
        for (path, cmd) in &all {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                let help = arg.get_help().or(arg.get_long_help());
                if help.is_none_or(|h| h.to_string().trim().is_empty()) {
                    missing.push(format!("hotrank {path} {id}"));
                }
            }
        }
        assert!(missing.is_empty(), "flags without help: {missing:?}");
    }

    #[test]
    fn subcommands_list_only_the_flags_they_use() {
        let mut all = Vec::new();
        walk(&Cli::command(), "", &mut all);
        let flags = |name: &str| -> Vec<String> {
            let (_, cmd) = all.iter().find(|(p, _)| p == name).unwrap();
            cmd.get_arguments()
                .filter_map(|a| a.get_long().map(str::to_string))
                .collect()
        };
        let server_only = ["listen", "admin-token", "ingest-token", "roles", "pipeline"];
        for name in [
            "export",
            "import",
            "repair",
            "redis-ack-loss",
            "archive export",
            "archive import",
            "archive restore",
            "worker",
        ] {
            let f = flags(name);
            assert!(f.contains(&"data-dir".to_string()), "{name}: {f:?}");
            for s in server_only {
                assert!(!f.contains(&s.to_string()), "{name} lists --{s}: {f:?}");
            }
        }
        for name in ["export", "import", "repair", "redis-ack-loss"] {
            let f = flags(name);
            for s in ["archive-url", "pipeline-log-url", "log-format"] {
                assert!(!f.contains(&s.to_string()), "{name} lists --{s}: {f:?}");
            }
        }
        for name in ["serve", "check-config"] {
            let f = flags(name);
            for s in server_only {
                assert!(f.contains(&s.to_string()), "{name} lacks --{s}: {f:?}");
            }
        }
    }

    #[test]
    fn durations_are_written_one_way_and_old_bench_flags_still_parse() {
        let bench = |args: &[&str]| -> (i64, Option<i64>) {
            let cli = Cli::try_parse_from([&["hotrank", "bench"], args].concat())
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
            match cli.command {
                Command::Bench(b) => (b.duration_secs, b.spread_secs),
                _ => unreachable!(),
            }
        };
        assert_eq!(bench(&[]), (10, None));
        assert_eq!(
            bench(&["--duration", "2m", "--spread", "72h"]),
            (120, Some(259_200))
        );
        assert_eq!(
            bench(&["--duration-secs", "8", "--spread-secs", "60"]),
            (8, Some(60))
        );
        assert!(Cli::try_parse_from(["hotrank", "bench", "--duration", "soon"]).is_err());
        let top = Cli::try_parse_from(["hotrank", "top", "--interval", "1m"]).unwrap();
        assert!(matches!(top.command, Command::Top(t) if t.interval == 60));
    }
}
