//! Putting a server together: secrets, state, background upkeep, and
//! [`run`], which serves until `shutdown` resolves and then flushes.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::api::{self, AppState};
use crate::clock::Clock;
use crate::config::{Config, HttpConfig, parse_cidr};
use crate::gate::{BotDetector, Identity};
use crate::secrets::{identity_secret, load_or_create, random_hex};
use crate::store::{Queue, Store};

mod conns;
mod parse_errors;

use conns::Conns;
use parse_errors::ParseErrorsAsJson;

/// Installs the process-wide Prometheus recorder once and returns its handle.
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let latency = [
                0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05,
                0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
            ];
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &latency)
                .expect("non-empty buckets")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed (tests embedding
            // several servers): then this handle simply renders nothing new.
            let _ = metrics::set_global_recorder(recorder);
            crate::metrics::start();
            handle
        })
        .clone()
}

/// Builds the handlers' shared state. Secrets (the admin token if none is
/// configured, and the key of every identity hash) live in the data dir.
pub fn build_state(
    config: Config,
    store: Arc<dyn Store>,
    queue: Option<Arc<dyn Queue>>,
    clock: Arc<dyn Clock>,
) -> Result<AppState, String> {
    let secret = identity_secret(&config.data_dir)?;
    let admin_token = match &config.admin_token {
        Some(t) => t.clone(),
        None => {
            let (t, created) = load_or_create(&config.data_dir, "admin_token", || random_hex(24))?;
            let path = config.data_dir.join("admin_token");
            if created {
                tracing::info!(path = %path.display(), "generated an admin token");
            } else {
                tracing::info!(path = %path.display(), "admin token loaded");
            }
            t
        }
    };
    let config_limits = config.limits.clone();
    let movement = config.rankings.movement;
    let ctr = crate::ctr::Ctr::open(&config).map_err(|e| e.to_string())?;
    let bots = BotDetector::from_config(&config.gate).map_err(|e| e.to_string())?;
    let trusted_proxies = config
        .trusted_proxies
        .iter()
        .map(|p| parse_cidr(p).ok_or_else(|| format!("trusted_proxies: bad entry {p:?}")))
        .collect::<Result<Vec<_>, _>>()?;
    let curation = Arc::new(crate::app::open_curation(&config)?);
    Ok(AppState::new(api::Shared {
        store,
        curation,
        queue,
        closing: tokio::sync::watch::Sender::new(false),
        config: Arc::new(config),
        identity: Identity::new(secret),
        bots: Arc::new(bots),
        clock,
        admin_token: admin_token.into(),
        trusted_proxies: trusted_proxies.into(),
        metrics: Some(metrics_handle()),
        budgets: Arc::new(api::budget::Budgets::new(&config_limits)),
        // After metrics_handle(): the handles bind to the installed recorder.
        ingest_meters: api::IngestMeters::new(),
        webhooks: OnceLock::new(),
        movements: Arc::new(api::movement::Movements::new(movement)),
        ctr: Arc::new(ctr),
    }))
}

/// Serves the API on `listener` until `shutdown` resolves, then stops
/// accepting, lets in-flight requests finish, and flushes the store.
pub async fn run(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let http = state.config.http.clone();
    let cap = conns::connection_cap(&http).map_err(std::io::Error::other)?;
    let store = state.store.clone();
    let state_ctr = state.ctr.clone();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let upkeep = tokio::spawn(upkeep(state.clone(), stop_rx));
    let rankings = tokio::spawn(keep_rankings(state.clone()));
    let trusted = state.trusted_proxies.clone();
    let closing = state.closing.clone();
    let shutdown = async move {
        shutdown.await;
        closing.send_replace(true);
    };
    serve(listener, api::router(state), &http, cap, trusted, shutdown).await;
    let _ = stop_tx.send(true);
    let _ = upkeep.await;
    if let Err(e) = state_ctr.flush() {
        tracing::error!(error = %e, "writing the click-through counts at shutdown failed");
    }
    // A rebuild in progress is dropped: it leaves nothing a query relies
    // on, and the store's shutdown gives back its claim.
    rankings.abort();
    let _ = rankings.await;
    if let Err(e) = store.shutdown().await {
        tracing::error!(error = %e, "flushing the store at shutdown failed");
        return Err(std::io::Error::other(e.to_string()));
    }
    tracing::info!("shut down cleanly");
    Ok(())
}

/// The accept loop: hyper's HTTP/1 connection with its header-read timer
/// (`http.header_timeout_secs`, which also ends idle keep-alive
/// connections) and parser limits (its bare answers replaced by the JSON
/// error, [`parse_errors`]), at most [`conns::connection_cap`] open at
/// once (the one idle longest gives way to a new one), and a graceful
/// shutdown that lets in-flight requests finish.
async fn serve(
    listener: TcpListener,
    app: axum::Router,
    http: &HttpConfig,
    (cap, fd_limit): (usize, Option<u64>),
    trusted: Arc<[(std::net::IpAddr, u8)]>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(http.header_timeout_secs))
        .max_buf_size(http.parser_buffer_bytes())
        .keep_alive(true);
    if let Some(n) = http.parser_max_headers() {
        builder.max_headers(n);
    }
    tracing::info!(
        cap,
        max_connections = http.max_connections,
        descriptor_limit = fd_limit,
        reserved_fds = http.reserved_fds,
        "connection cap"
    );
    let conns = Conns::new(cap);
    let limits = Arc::new(http.clone());
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of file descriptors (the cap leaves room, but
                    // other files count too) and the like: the connections
                    // we hold close by their timeouts; try again soon.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let Some(slot) = conns.admit().await else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (app, limits_, trusted) = (app.clone(), limits.clone(), trusted.clone());
        let conn = slot.conn.clone();
        let svc = tower::service_fn(move |mut req: axum::http::Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            let refused = api::head_refusal(&limits_, req.uri(), req.headers()).map(|resp| {
                let client = api::request_client(req.extensions(), req.headers(), &trusted);
                (resp, client)
            });
            let app = app.clone();
            conn.busy();
            let conn = conn.clone();
            async move {
                let resp = match refused {
                    Some((resp, client)) => {
                        api::record_request(
                            "unmatched",
                            req.method(),
                            resp.status(),
                            Duration::ZERO,
                            client,
                        );
                        Ok(resp)
                    }
                    None => app.oneshot(req).await,
                };
                conn.idle();
                resp
            }
        });
        let io = TokioIo::new(ParseErrorsAsJson::new(stream, limits.clone(), peer.ip()));
        let conn = graceful.watch(builder.serve_connection(io, TowerToHyperService::new(svc)));
        tokio::spawn(async move {
            tokio::select! {
                ended = conn => if let Err(e) = ended {
                    tracing::debug!(error = %e, %peer, "connection ended with an error");
                },
                // Dropping the connection closes it.
                _ = slot.conn.shed() => {}
            }
            drop(slot);
        });
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(SHUTDOWN_GRACE) => {
            tracing::warn!("requests still running after {SHUTDOWN_GRACE:?}; stopping anyway");
        }
    }
}

/// How long a shutdown waits for in-flight requests.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Every few seconds, on a task of its own (a rebuild can take many
/// seconds and must not hold up the upkeep):
/// [`crate::store::Store::keep_rankings`].
async fn keep_rankings(state: AppState) {
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = state.store.keep_rankings(state.clock.now()).await {
            // (The upkeep logs the store going away and coming back.)
            tracing::debug!(error = %e, "keeping rankings up to date failed; trying again");
        }
    }
}

/// Every few seconds: store upkeep (retention, snapshots), and a readiness
/// check that logs once when the store goes away and once when it is back.
async fn upkeep(state: AppState, mut stop: tokio::sync::watch::Receiver<bool>) {
    let (store, clock) = (state.store.clone(), state.clock.clone());
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut healthy = true;
    let mut last_ctr_flush = std::time::Instant::now();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        state.budgets.sweep(clock.now_ms());
        flush_ctr(&state, &mut last_ctr_flush);
        let result = match store.ready().await {
            Ok(()) => store.maintain(clock.now()).await,
            Err(e) => Err(e),
        };
        match (result, healthy) {
            (Ok(()), false) => {
                tracing::info!("store is available again");
                healthy = true;
            }
            (Err(e), true) => {
                tracing::error!(error = %e, "store unavailable");
                healthy = false;
            }
            _ => {}
        }
        metrics::gauge!("hotrank_store_up").set(if healthy { 1.0 } else { 0.0 });
    }
}

/// Writes the click-through counts every `ctr.flush_secs` (on a blocking
/// thread: it syncs a file).
fn flush_ctr(state: &AppState, last: &mut std::time::Instant) {
    let every = Duration::from_secs(state.config.ctr.flush_secs);
    if last.elapsed() < every {
        return;
    }
    *last = std::time::Instant::now();
    let ctr = state.ctr.clone();
    tokio::task::spawn_blocking(move || {
        if let Err(e) = ctr.flush() {
            metrics::counter!("hotrank_ctr_flush_failures_total").increment(1);
            tracing::warn!(error = %e, "writing the click-through counts failed; trying again");
        }
    });
}
