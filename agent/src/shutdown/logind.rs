//! logind on the system bus, used as the kubelet uses it: its InhibitDelayMaxUSec, a delay
//! inhibitor lock on shutdown (held as long as the descriptor logind hands out stays open), the
//! PrepareForShutdown signal, and a reload through systemd after the drop-in changed.
//! The bus is the system bus (DBUS_SYSTEM_BUS_ADDRESS, else /run/dbus/system_bus_socket).

use std::os::fd::OwnedFd;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::StreamExt;
use zbus::proxy::{Builder, CacheProperties};
use zbus::{Connection, Proxy};

const LOGIND: &str = "org.freedesktop.login1";
const LOGIND_PATH: &str = "/org/freedesktop/login1";
const MANAGER: &str = "org.freedesktop.login1.Manager";

pub struct Logind {
    conn: Connection,
    manager: Proxy<'static>,
}

impl Logind {
    pub async fn connect() -> zbus::Result<Logind> {
        let conn = Connection::system().await?;
        // logind announces no change of InhibitDelayMaxUSec: read it each time.
        let manager = Builder::new(&conn)
            .destination(LOGIND)?
            .path(LOGIND_PATH)?
            .interface(MANAGER)?
            .cache_properties(CacheProperties::No)
            .build()
            .await?;
        Ok(Logind { conn, manager })
    }

    /// How long logind waits for delay inhibitors (InhibitDelayMaxSec, 5 s unless configured).
    pub async fn inhibit_delay(&self) -> zbus::Result<Duration> {
        let usec: u64 = self.manager.get_property("InhibitDelayMaxUSec").await?;
        Ok(Duration::from_micros(usec))
    }

    /// A delay lock on shutdown, released when the descriptor is closed.
    pub async fn inhibit(&self) -> zbus::Result<OwnedFd> {
        let why = "Keelson agent needs time to stop pods at node shutdown";
        let args = ("shutdown", "keelson-agent", why, "delay");
        let fd: zbus::zvariant::OwnedFd = self.manager.call("Inhibit", &args).await?;
        Ok(fd.into())
    }

    /// PrepareForShutdown's argument each time logind sends it: true as a shutdown begins,
    /// false when it is cancelled.
    pub async fn shutdowns(&self) -> zbus::Result<BoxStream<'static, bool>> {
        let signals = self.manager.receive_signal("PrepareForShutdown").await?;
        let starting = signals.filter_map(|m| async move { m.body().deserialize::<bool>().ok() });
        Ok(starting.boxed())
    }

    /// Has logind read its configuration again: SIGHUP sent by systemd (KillUnit), as the
    /// kubelet reloads it.
    pub async fn reload(&self) -> zbus::Result<()> {
        let systemd = Proxy::new(
            &self.conn,
            "org.freedesktop.systemd1",
            "/org/freedesktop/systemd1",
            "org.freedesktop.systemd1.Manager",
        )
        .await?;
        let hup = nix::sys::signal::Signal::SIGHUP as i32;
        let args = ("systemd-logind.service", "all", hup);
        systemd.call::<_, _, ()>("KillUnit", &args).await
    }
}
