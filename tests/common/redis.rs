//! A throw-away `redis-server` for integration tests.
//!
//! [`RedisServer::start`] launches `redis-server` (or the binary named by the
//! `REDIS_SERVER_BIN` environment variable) on a free loopback port with
//! persistence disabled and its working directory in a temporary folder,
//! waits until it answers `PING`, and kills it when dropped.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
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
}

impl RedisServer {
    /// Starts a server with default settings.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// Starts a server with extra command-line arguments, e.g.
    /// `&["--hll-sparse-max-bytes", "500"]`.
    pub fn start_with(extra_args: &[&str]) -> RedisServer {
        let bin = std::env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".to_string());
        let mut last_err = String::new();
        for _ in 0..ATTEMPTS {
            let port = free_port();
            let dir = tempfile::tempdir().expect("create temp dir for redis-server");
            let extra: Vec<String> = extra_args.iter().map(|s| s.to_string()).collect();
            let child = spawn(&bin, port, dir.path(), &extra);
            let mut server = RedisServer {
                child,
                port,
                _dir: dir,
                extra,
            };
            match server.wait_ready() {
                Ok(()) => return server,
                Err(e) => last_err = e, // dropped (killed) here; try another port
            }
        }
        panic!("redis-server did not start after {ATTEMPTS} attempts: {last_err}");
    }

    /// Starts a server that keeps its data across [`RedisServer::restart`]:
    /// append-only file, fsynced before each reply.
    pub fn start_durable() -> RedisServer {
        RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"])
    }

    /// Kills the server (SIGKILL: no shutdown save).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again on the same port and directory, after [`Self::kill`].
    pub fn restart(&mut self) {
        let bin = std::env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "redis-server".to_string());
        self.child = spawn(&bin, self.port, self._dir.path(), &self.extra);
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
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(bin: &str, port: u16, dir: &std::path::Path, extra: &[String]) -> Child {
    let port_s = port.to_string();
    let mut cmd = Command::new(bin);
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
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    match cmd.spawn() {
        Ok(c) => c,
        Err(e) => panic!("cannot start `{bin}` (is redis-server installed?): {e}"),
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
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
