//! Installing the plugin into a CNI bin directory (for the node agent, or by hand with
//! `keelson-cni install <dir>`): the binary once, and the other names it answers to as
//! symlinks, each replaced atomically so a runtime never sees a half-written file.

use std::fs;
use std::io;
use std::path::Path;

/// File names the CNI bin directory must hold: the plugin, its IPAM name, and loopback.
pub const BIN_NAMES: [&str; 3] = ["keelson-cni", "keelson-ipam", "loopback"];

pub fn install(binary: &Path, bin_dir: &Path) -> io::Result<()> {
    fs::create_dir_all(bin_dir)?;
    let main = bin_dir.join(BIN_NAMES[0]);
    let tmp = bin_dir.join(format!(".{}.tmp-{}", BIN_NAMES[0], std::process::id()));
    fs::copy(binary, &tmp)?;
    fs::rename(&tmp, &main)?;
    for alias in &BIN_NAMES[1..] {
        let tmp = bin_dir.join(format!(".{alias}.tmp-{}", std::process::id()));
        let _ = fs::remove_file(&tmp);
        std::os::unix::fs::symlink(BIN_NAMES[0], &tmp)?;
        fs::rename(&tmp, bin_dir.join(alias))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installs_binary_and_aliases_replacing_old_ones() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src-bin");
        fs::write(&src, b"binary").unwrap();
        let bin = dir.path().join("bin");
        fs::create_dir_all(&bin).unwrap();
        fs::write(bin.join("loopback"), b"old loopback").unwrap();
        install(&src, &bin).unwrap();
        install(&src, &bin).unwrap();
        assert_eq!(fs::read(bin.join("keelson-cni")).unwrap(), b"binary");
        for alias in ["keelson-ipam", "loopback"] {
            assert_eq!(
                fs::read_link(bin.join(alias)).unwrap(),
                Path::new("keelson-cni")
            );
            assert_eq!(fs::read(bin.join(alias)).unwrap(), b"binary");
        }
        let names: Vec<_> = fs::read_dir(&bin)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
    }
}
