//! A private Redis server for tests: Debian's `redis-server` on its own
//! loopback port, keeping nothing on disk.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A running server, killed when dropped.
pub struct Redis {
    port: u16,
    child: Mutex<Option<Child>>,
}

impl Redis {
    /// Starts a server on a free port and waits until it answers.
    pub fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|addr| addr.port())
            .expect("a free loopback port");
        let redis = Self {
            port,
            child: Mutex::new(None),
        };
        redis.resume();
        redis
    }

    /// Its URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server at once (its data is gone with it).
    pub fn stop(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port.
    pub fn resume(&self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (install redis-server: tests/install-servers.sh)");
        *self.child.lock().unwrap() = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.command(&["PING"]).as_deref() != Some("+PONG") {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends one command (RESP) and returns the first line of the answer.
    pub fn command(&self, args: &[&str]) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        stream.write_all(request.as_bytes()).ok()?;
        let mut answer = Vec::new();
        let mut byte = [0u8; 1];
        while stream.read(&mut byte).ok()? == 1 && byte[0] != b'\n' {
            answer.push(byte[0]);
        }
        Some(String::from_utf8_lossy(&answer).trim_end().to_string())
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}
