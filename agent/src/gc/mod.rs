//! Garbage collection of the node's images (`images`), every five minutes as the kubelet's
//! image GC manager, and on demand when the eviction manager reclaims disk.

pub mod images;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use crate::cri::Cri;

/// How often image usage is checked (the kubelet's ImageGCPeriod).
pub const PERIOD: Duration = Duration::from_secs(300);

pub type SharedImageGc = Arc<Mutex<images::ImageGc>>;

pub async fn run(cri: Arc<dyn Cri>, policy: images::Policy, gc: SharedImageGc) {
    loop {
        tokio::time::sleep(PERIOD).await;
        let Some((bytes, _)) = crate::eviction::statfs::image_fs(cri.as_ref()).await else {
            continue;
        };
        let Some(to_free) = policy.to_free(bytes.capacity, bytes.available) else {
            continue;
        };
        let freed = gc
            .lock()
            .await
            .free(cri.as_ref(), to_free, policy.min_age)
            .await;
        match freed {
            Ok((freed, _)) if freed < to_free => tracing::warn!(
                to_free,
                freed,
                "image garbage collection could not free enough: the image filesystem stays past --image-gc-high-threshold"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "image garbage collection failed"),
        }
    }
}
