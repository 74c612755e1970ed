//! A throwaway real `redis-server` on a loopback port (GUARDWIRE_REDIS_SERVER, else the one on
//! PATH; `tests/run` installs Debian's): no persistence, stopped when dropped, restartable on
//! the same port to show recovery.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
}

fn binary() -> String {
    std::env::var("GUARDWIRE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into())
}

impl RedisServer {
    pub fn start() -> RedisServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut s = RedisServer { child: None, port };
        s.restart();
        s
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Kills the server (its data goes with it: nothing is saved).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port, empty.
    pub fn restart(&mut self) {
        self.stop();
        let bin = binary();
        let mut child = Command::new(&bin)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("{bin}: {e} (install redis-server, or set GUARDWIRE_REDIS_SERVER)")
            });
        for _ in 0..250 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                self.child = Some(child);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("redis-server did not listen on {}", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
