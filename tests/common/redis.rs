//! A throw-away `redis-server` for integration tests.
//!
//! [`RedisServer::start`] launches `redis-server` (or the binary named by the
//! `REDIS_SERVER_BIN` environment variable) on a free loopback port with
//! persistence disabled and its working directory in a temporary folder,
//! waits until it answers `PING`, and kills it when dropped.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ChildStdin;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long to wait for a freshly started server to answer PING.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
/// Attempts with different ports (another process may grab the port between
/// choosing it and the server binding it).
const ATTEMPTS: usize = 5;

/// A running `redis-server` child process, killed on drop.
pub struct RedisServer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
    extra: Vec<String>,
    /// Watched servers run under a shell that kills them when this pipe
    /// closes, at the latest when the test process exits: a fixture kept
    /// in a `static` (never dropped) leaves nothing behind.
    watch: Option<ChildStdin>,
    watched: bool,
}

impl RedisServer {
    /// Starts a server with default settings.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Starts a server with extra command-line arguments, e.g.
    /// `&["--hll-sparse-max-bytes", "500"]`.
    pub fn start_with(extra_args: &[&str]) -> RedisServer {
        RedisServer::start_node(extra_args, false, false)
    }

    /// `cluster_bus`: a cluster node, which also needs a bus port: its own
    /// free one on Redis 7 (`--cluster-port`), the client port + 10000 on
    /// Redis 6.2 (which has no such option).
    fn start_node(extra_args: &[&str], watched: bool, cluster_bus: bool) -> RedisServer {
        let bin = std::env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".to_string());
        let mut last_err = String::new();
        for _ in 0..ATTEMPTS {
            let fixed_bus = cluster_bus && server_major() < 7;
            let port = if fixed_bus {
                free_port_pair(10_000)
            } else {
                free_port()
            };
            let dir = tempfile::tempdir().expect("create temp dir for redis-server");
            let mut extra: Vec<String> = extra_args.iter().map(|s| s.to_string()).collect();
            if cluster_bus && !fixed_bus {
                extra.extend(["--cluster-port".to_string(), free_port().to_string()]);
            }
            let mut child = spawn(&bin, port, dir.path(), &extra, watched);
            let watch = child.stdin.take();
            let mut server = RedisServer {
                child,
                port,
                _dir: dir,
                extra,
                watch,
                watched,
            };
            match server.wait_ready() {
                Ok(()) => return server,
                Err(e) => last_err = e, // dropped (killed) here; try another port
            }
        }
        panic!("redis-server did not start after {ATTEMPTS} attempts: {last_err}");
    }

    /// One server shared by every test of this binary (watched: it goes
    /// when the test process exits). Tests keep apart by key prefix
    /// ([`unique_prefix`]).
    pub fn shared() -> &'static RedisServer {
        static SHARED: OnceLock<RedisServer> = OnceLock::new();
        SHARED.get_or_init(|| RedisServer::start_node(&[], true, false))
    }

    /// Starts a server that keeps its data across [`RedisServer::restart`]:
    /// append-only file, fsynced before each reply.
    pub fn start_durable() -> RedisServer {
        RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"])
    }

    /// Kills the server (SIGKILL: no shutdown save).
    pub fn kill(&mut self) {
        if self.watch.take().is_some() {
            // The watching shell kills the server and exits.
            let _ = self.child.wait();
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again on the same port and directory, after [`Self::kill`].
    pub fn restart(&mut self) {
        let bin = std::env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".to_string());
        self.kill(); // reaps what is left of the previous run
        self.child = spawn(&bin, self.port, self._dir.path(), &self.extra, self.watched);
        self.watch = self.child.stdin.take();
        self.wait_ready()
            .expect("redis-server restarts on its port");
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "redis-server on port {} exited: {status}",
                    self.port
                ));
            }
            if ping(self.port) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "redis-server on port {} did not answer PING",
                    self.port
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The TCP port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A client for this server.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid redis url")
    }

    /// A new synchronous connection.
    pub fn connection(&self) -> redis::Connection {
        self.client()
            .get_connection()
            .expect("connect to test redis-server")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn spawn(bin: &str, port: u16, dir: &std::path::Path, extra: &[String], watched: bool) -> Child {
    let port_s = port.to_string();
    let mut cmd = if watched {
        let mut c = Command::new("sh");
        c.args([
            "-c",
            "\"$0\" \"$@\" & r=$!; read _; kill -9 $r; wait $r",
            bin,
        ]);
        c
    } else {
        Command::new(bin)
    };
    cmd.args([
        "--port",
        &port_s,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ])
    .args(["--daemonize", "no", "--protected-mode", "no"])
    .args(extra)
    .current_dir(dir)
    .stdin(if watched {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    match cmd.spawn() {
        Ok(c) => c,
        Err(e) => panic!("cannot start `{bin}` (is redis-server installed?): {e}"),
    }
}

/// A loopback port nothing listens on (for servers tests start).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

/// A free port `p` whose `p + offset` is free too (a Redis 6.2 cluster
/// node's bus port).
fn free_port_pair(offset: u16) -> u16 {
    loop {
        let p = free_port();
        if let Some(q) = p.checked_add(offset)
            && TcpListener::bind(("127.0.0.1", q)).is_ok()
        {
            return p;
        }
    }
}

/// The major version of the `redis-server` the tests run (`REDIS_SERVER_BIN`
/// or the one on `PATH`), read once from `--version` (`v=7.0.15`).
pub fn server_major() -> u32 {
    static MAJOR: OnceLock<u32> = OnceLock::new();
    *MAJOR.get_or_init(|| {
        let bin = std::env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".to_string());
        let out = Command::new(&bin)
            .arg("--version")
            .output()
            .unwrap_or_else(|e| panic!("cannot run `{bin} --version`: {e}"));
        let text = String::from_utf8_lossy(&out.stdout);
        text.split_whitespace()
            .find_map(|w| w.strip_prefix("v="))
            .and_then(|v| v.split('.').next())
            .and_then(|m| m.parse().ok())
            .unwrap_or_else(|| panic!("cannot read a version from `{bin} --version`: {text}"))
    })
}

fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got += n,
        }
    }
    &buf == b"+PONG\r\n"
}

/// A throw-away Redis Cluster: `primaries` primaries with `replicas`
/// replicas each, every node a [`RedisServer`] with `--cluster-enabled yes`
/// on free loopback ports (client and bus port), joined by `redis-cli
/// --cluster create`. Dropping it kills every node.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start(primaries: usize, replicas: usize) -> RedisCluster {
        RedisCluster::start_opts(primaries, replicas, false)
    }

    /// One 3-primary cluster for the whole test binary, shared by its
    /// tests (each uses [`unique_prefix`]); its nodes die with the process.
    pub fn shared() -> &'static RedisCluster {
        static SHARED: OnceLock<RedisCluster> = OnceLock::new();
        SHARED.get_or_init(|| RedisCluster::start_opts(3, 0, true))
    }

    fn start_opts(primaries: usize, replicas: usize, watched: bool) -> RedisCluster {
        let mut nodes = Vec::new();
        for _ in 0..primaries * (1 + replicas) {
            nodes.push(RedisServer::start_node(
                &[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "1000",
                    // A replica takes over whatever its last contact with the
                    // primary (tests kill primaries right after writes).
                    "--cluster-replica-validity-factor",
                    "0",
                ],
                watched,
                true,
            ));
        }
        let cli = std::env::var("REDIS_CLI_BIN").unwrap_or_else(|_| "redis-cli".to_string());
        let mut cmd = Command::new(&cli);
        cmd.arg("--cluster").arg("create");
        for n in &nodes {
            cmd.arg(format!("127.0.0.1:{}", n.port()));
        }
        cmd.args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"]);
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run `{cli}`: {e}"));
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let c = RedisCluster { nodes };
        c.wait_ok(primaries * (1 + replicas));
        c.wait_replicas_online(replicas);
        c
    }

    /// Until every primary has `replicas` replicas online: before, a
    /// primary cannot meet `WAIT` (`redis.wait_replicas`) and a test's
    /// first write would get a rightful 503.
    pub fn wait_replicas_online(&self, replicas: usize) {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            let ok = self.nodes.iter().filter(|n| ping(n.port())).all(|n| {
                let role = self.cli(n.port(), &["ROLE"]);
                !role.starts_with("master") || self.in_sync_replicas(n.port()) >= replicas
            });
            if ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the cluster's replicas did not come online"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Until every live node says `cluster_state:ok` and knows `known`
    /// nodes, all slots covered.
    pub fn wait_ok(&self, known: usize) {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            let ok = self.nodes.iter().filter(|n| ping(n.port())).all(|n| {
                let info = self.cli(n.port(), &["CLUSTER", "INFO"]);
                info.contains("cluster_state:ok")
                    && info.contains("cluster_slots_assigned:16384")
                    && info.contains(&format!("cluster_known_nodes:{known}"))
            });
            if ok {
                return;
            }
            assert!(Instant::now() < deadline, "the cluster did not become ok");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `redis-cli -p PORT ARGS...` output.
    pub fn cli(&self, port: u16, args: &[&str]) -> String {
        let cli = std::env::var("REDIS_CLI_BIN").unwrap_or_else(|_| "redis-cli".to_string());
        let out = Command::new(cli)
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Seed URLs, comma-separated (`--redis-url` for `redis-cluster`).
    pub fn url(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.url())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The port of the node that serves `slot` as primary now, as the
    /// first live node sees it (`None`: no healthy primary has it).
    pub fn primary_of(&self, slot: u16) -> Option<u16> {
        for n in &self.nodes {
            if !ping(n.port()) {
                continue;
            }
            let nodes = self.cli(n.port(), &["CLUSTER", "NODES"]);
            for line in nodes.lines() {
                let f: Vec<&str> = line.split_whitespace().collect();
                if f.len() < 8 || !f[2].contains("master") || f[2].contains("fail") {
                    continue;
                }
                for range in &f[8..] {
                    let mut it = range.split('-');
                    let (Some(a), b) = (it.next(), it.next()) else {
                        continue;
                    };
                    let (Ok(a), Ok(b)) = (a.parse::<u16>(), b.unwrap_or(a).parse::<u16>()) else {
                        continue;
                    };
                    if (a..=b).contains(&slot) {
                        let port = f[1].split(['@', ':']).nth(1).unwrap_or("0");
                        return port.parse().ok();
                    }
                }
            }
            break;
        }
        None
    }

    /// How many replicas the node on `port` has in sync: with `INFO
    /// replication`, its `connected_slaves` and its `slaveN:` lines with
    /// `state=online` (a replica still loading the primary's data is not).
    pub fn in_sync_replicas(&self, port: u16) -> usize {
        let info = self.cli(port, &["INFO", "replication"]);
        let connected: usize = info
            .lines()
            .find_map(|l| l.strip_prefix("connected_slaves:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        let online = info
            .lines()
            .filter(|l| l.starts_with("slave") && l.contains(":ip=") && l.contains("state=online"))
            .count();
        online.min(connected)
    }

    /// The replication offsets of the node on `port`: its own
    /// (`master_repl_offset`) and what each online replica acknowledged.
    /// A failover promotes a replica with whatever it acknowledged: once
    /// every replica has passed an offset, each holds what was written
    /// before it.
    pub fn replication_offsets(&self, port: u16) -> (u64, Vec<u64>) {
        let info = self.cli(port, &["INFO", "replication"]);
        let own = info
            .lines()
            .find_map(|l| l.strip_prefix("master_repl_offset:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        let replicas = info
            .lines()
            .filter(|l| l.starts_with("slave") && l.contains("state=online"))
            .filter_map(|l| {
                l.split(',')
                    .find_map(|f| f.strip_prefix("offset="))
                    .and_then(|v| v.trim().parse().ok())
            })
            .collect();
        (own, replicas)
    }

    /// The node on `port`.
    pub fn node(&mut self, port: u16) -> &mut RedisServer {
        self.nodes
            .iter_mut()
            .find(|n| n.port() == port)
            .expect("a node on that port")
    }
}

/// Where a Redis-store test runs: one `redis-server`, or a cluster.
pub enum Backend {
    One(RedisServer),
    Cluster(RedisCluster),
}

impl Backend {
    pub fn url(&self) -> String {
        match self {
            Backend::One(s) => s.url(),
            Backend::Cluster(c) => c.url(),
        }
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Backend::Cluster(_))
    }

    /// Store options for a site under `prefix`.
    pub fn options(&self, prefix: &str) -> hotrank::store::redis::RedisOptions {
        hotrank::store::redis::RedisOptions {
            url: self.url(),
            prefix: prefix.into(),
            cluster: self.is_cluster(),
            ..Default::default()
        }
    }

    /// The key names of a site under `prefix`.
    pub fn keys(&self, prefix: &str) -> hotrank::store::redis::Keys {
        if self.is_cluster() {
            hotrank::store::redis::Keys::tagged(prefix)
        } else {
            hotrank::store::redis::Keys::new(prefix)
        }
    }
}

impl RedisCluster {
    /// SIGKILLs the node on `port` (its `process_id` from `INFO`).
    pub fn kill_port(&self, port: u16) {
        let info = self.cli(port, &["INFO", "server"]);
        let pid = info
            .lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .expect("process_id in INFO")
            .trim()
            .to_string();
        let st = Command::new("kill")
            .args(["-9", &pid])
            .status()
            .expect("run kill");
        assert!(st.success(), "kill -9 {pid}");
    }
}

/// Options for a site of its own (a [`unique_prefix`]) on the binary's
/// [`RedisServer::shared`] server, over `shards` article shards
/// (`[redis] shards`, issue 13).
pub fn shared_site(shards: u32) -> hotrank::store::redis::RedisOptions {
    hotrank::store::redis::RedisOptions {
        url: RedisServer::shared().url(),
        prefix: unique_prefix(),
        shards,
        ..Default::default()
    }
}

/// Options for a site of its own on the binary's [`RedisCluster::shared`]
/// cluster, over `shards` article shards (more than one: issue 13's split
/// layout, one site over several primaries).
pub fn shared_cluster_site(shards: u32) -> hotrank::store::redis::RedisOptions {
    hotrank::store::redis::RedisOptions {
        url: RedisCluster::shared().url(),
        prefix: unique_prefix(),
        cluster: true,
        shards,
        ..Default::default()
    }
}

/// A key prefix no other test of this process uses (`t<n>:`).
pub fn unique_prefix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("t{}:", NEXT.fetch_add(1, Ordering::SeqCst))
}
