//! A private system bus (the real dbus-daemon, on a socket in the test's folder) and a
//! stand-in for logind on it: its Manager's Inhibit (a pipe whose write end is the lock; the
//! lock is released when every copy of it is closed), InhibitDelayMaxUSec and the
//! PrepareForShutdown signal. The agent's graceful shutdown is tested against it on this
//! machine; against the real logind in the VM scenario (`vm-tests/run shutdown`).

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keelson_testing::ChildGuard;

const CONFIG: &str = r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <listen>unix:path=SOCKET</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="root"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"#;

/// dbus-daemon, stopped on drop.
pub struct Bus {
    /// What DBUS_SYSTEM_BUS_ADDRESS is set to for the agent.
    pub address: String,
    _daemon: ChildGuard,
}

impl Bus {
    pub fn start(dir: &Path) -> Bus {
        let socket = dir.join("system_bus_socket");
        let config = dir.join("bus.conf");
        let text = CONFIG.replace("SOCKET", &socket.display().to_string());
        std::fs::write(&config, text).expect("bus config");
        let mut cmd = std::process::Command::new("dbus-daemon");
        cmd.arg(format!("--config-file={}", config.display()))
            .args(["--nofork", "--nopidfile"]);
        let daemon = ChildGuard::spawn_logged(&mut cmd, &dir.join("dbus-daemon.log"));
        let started = Instant::now();
        while !socket.exists() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "dbus-daemon did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Bus {
            address: format!("unix:path={}", socket.display()),
            _daemon: daemon,
        }
    }
}

/// One Inhibit call: what and how, and the read end of its lock.
struct Lock {
    what: String,
    mode: String,
    read_end: OwnedFd,
}

struct Manager {
    delay: Duration,
    locks: Arc<Mutex<Vec<Lock>>>,
}

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl Manager {
    fn inhibit(
        &self,
        what: String,
        _who: String,
        _why: String,
        mode: String,
    ) -> zbus::fdo::Result<zbus::zvariant::OwnedFd> {
        let (read_end, write_end) =
            nix::unistd::pipe().map_err(|e| zbus::fdo::Error::Failed(e.to_string()))?;
        let flags = nix::fcntl::OFlag::O_NONBLOCK;
        nix::fcntl::fcntl(&read_end, nix::fcntl::FcntlArg::F_SETFL(flags))
            .map_err(|e| zbus::fdo::Error::Failed(e.to_string()))?;
        let lock = Lock {
            what,
            mode,
            read_end,
        };
        self.locks.lock().unwrap().push(lock);
        // Sent and then closed here: the agent holds the only write end.
        Ok(write_end.into())
    }

    #[zbus(property, name = "InhibitDelayMaxUSec")]
    fn inhibit_delay_max_usec(&self) -> u64 {
        u64::try_from(self.delay.as_micros()).unwrap_or(u64::MAX)
    }
}

/// The stand-in, serving on its own runtime until dropped.
pub struct Logind {
    conn: zbus::Connection,
    locks: Arc<Mutex<Vec<Lock>>>,
    rt: tokio::runtime::Runtime,
}

impl Logind {
    /// Owns org.freedesktop.login1 on `bus`, with InhibitDelayMaxSec `delay`.
    pub fn start(bus: &Bus, delay: Duration) -> Logind {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let locks = Arc::new(Mutex::new(Vec::new()));
        let manager = Manager {
            delay,
            locks: locks.clone(),
        };
        let address = bus.address.clone();
        let conn = rt
            .block_on(async move {
                zbus::connection::Builder::address(address.as_str())?
                    .name("org.freedesktop.login1")?
                    .serve_at("/org/freedesktop/login1", manager)?
                    .build()
                    .await
            })
            .expect("logind stand-in on the bus");
        Logind { conn, locks, rt }
    }

    /// Sends PrepareForShutdown(start), as logind does when a shutdown begins (true) or is
    /// cancelled (false).
    pub fn prepare_for_shutdown(&self, start: bool) {
        let conn = self.conn.clone();
        self.rt
            .block_on(async move {
                conn.emit_signal(
                    None::<()>,
                    "/org/freedesktop/login1",
                    "org.freedesktop.login1.Manager",
                    "PrepareForShutdown",
                    &(start,),
                )
                .await
            })
            .expect("PrepareForShutdown sent");
    }

    /// How many shutdown delay locks were taken, and how many of them are still held.
    pub fn delay_locks(&self) -> (usize, usize) {
        let locks = self.locks.lock().unwrap();
        let delay: Vec<&Lock> = locks
            .iter()
            .filter(|l| l.what == "shutdown" && l.mode == "delay")
            .collect();
        let held = delay.iter().filter(|l| !released(&l.read_end)).count();
        (delay.len(), held)
    }
}

/// Whether every write end of the pipe is closed (a read finds its end).
fn released(read_end: &OwnedFd) -> bool {
    let mut byte = [0u8; 1];
    matches!(nix::unistd::read(read_end.as_fd(), &mut byte), Ok(0))
}
