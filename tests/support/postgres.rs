//! A private PostgreSQL cluster for tests: its own data folder in a temporary
//! directory and its own loopback port, started with the server binaries
//! Debian installs (`/usr/lib/postgresql/N/bin`, or `$PG_BIN`). PostgreSQL
//! refuses to run as root, so under root it runs as the `postgres` user.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running cluster, stopped (immediately) when dropped.
pub struct Postgres {
    dir: tempfile::TempDir,
    port: u16,
    bin: PathBuf,
}

impl Postgres {
    /// Makes and starts a new cluster that trusts local connections.
    pub fn start() -> Self {
        let bin = server_bin();
        let dir = tempfile::Builder::new()
            .prefix("wasm-agent-pg")
            .tempdir()
            .expect("temporary directory");
        let cluster = Self {
            port: free_port(),
            dir,
            bin,
        };
        if as_root() {
            chown_to_postgres(cluster.dir.path());
        }
        let data = cluster.data();
        cluster.run(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        cluster.resume();
        cluster.stop_when_this_process_ends();
        cluster
    }

    /// A URL of the cluster's `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server at once (as a crash would), keeping its data.
    pub fn stop(&self) {
        let data = self.data();
        self.run(
            "pg_ctl",
            &[
                "stop",
                "-D",
                data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
            ],
        );
    }

    /// Starts the server again on the same port and data.
    pub fn resume(&self) {
        let data = self.data();
        let socket_dir = self.dir.path();
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c max_connections=200",
            self.port,
            socket_dir.display()
        );
        let log = socket_dir.join("server.log");
        self.run(
            "pg_ctl",
            &[
                "start",
                "-D",
                data.to_str().unwrap(),
                "-w",
                "-o",
                &options,
                "-l",
                log.to_str().unwrap(),
            ],
        );
    }

    /// A cluster in a `static` is never dropped: a watchdog stops it and
    /// removes its folder once this process is gone.
    fn stop_when_this_process_ends(&self) {
        let stop = format!(
            "{} {} stop -D {} -m immediate",
            if as_root() {
                "runuser -u postgres --"
            } else {
                ""
            },
            self.bin.join("pg_ctl").display(),
            self.data().display()
        );
        let script = format!(
            "while kill -0 {} 2>/dev/null; do sleep 0.5; done; {stop} >/dev/null 2>&1; rm -rf {}",
            std::process::id(),
            self.dir.path().display()
        );
        // Never waited for: it outlives this process by design.
        #[allow(clippy::zombie_processes)]
        Command::new("sh")
            .args(["-c", &script])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the cluster's watchdog");
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn run(&self, program: &str, args: &[&str]) {
        let output = self
            .command(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
        assert!(
            output.status.success(),
            "{program} {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// One of the server's programs, run as `postgres` under root.
    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        let mut command = if as_root() {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(path);
            command
        } else {
            Command::new(path)
        };
        command.current_dir(self.dir.path());
        command
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.data();
        let _ = self
            .command("pg_ctl")
            .args(["stop", "-D", data.to_str().unwrap(), "-m", "immediate"])
            .output();
    }
}

fn as_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn server_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("PG_BIN") {
        return PathBuf::from(bin);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL server binaries: install postgresql or set PG_BIN")
        .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    found.sort();
    found
        .pop()
        .expect("no /usr/lib/postgresql/*/bin/initdb: install postgresql or set PG_BIN")
}

fn chown_to_postgres(dir: &Path) {
    let status = Command::new("chown")
        .args(["-R", "postgres:postgres"])
        .arg(dir)
        .status()
        .expect("chown");
    assert!(
        status.success(),
        "cannot give {} to postgres",
        dir.display()
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free loopback port")
}
