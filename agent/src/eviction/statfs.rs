//! Free space of a filesystem (statvfs) and of the runtime's image filesystem, shared by the
//! eviction manager's observations and image garbage collection.

use std::path::Path;

use super::thresholds::Observation;
use crate::cri::Cri;

/// The runtime's image filesystem (CRI ImageFsInfo): bytes and inodes.
pub async fn image_fs(cri: &dyn Cri) -> Option<(Observation, Observation)> {
    let r = cri.image_fs_info().await.ok()?;
    let mountpoint = r.image_filesystems.into_iter().next()?.fs_id?.mountpoint;
    fs(Path::new(&mountpoint))
}

/// Bytes and inodes free for unprivileged users on the filesystem holding `path`.
pub fn fs(path: &Path) -> Option<(Observation, Observation)> {
    let s = nix::sys::statvfs::statvfs(path).ok()?;
    let block = s.fragment_size();
    let bytes = Observation {
        available: s.blocks_available() * block,
        capacity: s.blocks() * block,
    };
    let inodes = Observation {
        available: s.files_available(),
        capacity: s.files(),
    };
    Some((bytes, inodes))
}
