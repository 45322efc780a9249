//! Reading the files a policy names without waiting on anything but the disk.
//!
//! `open(2)` on a FIFO waits for a writer and a read on one waits for data, forever: a FIFO
//! (or a socket or device) put in place of the policy, a rule file, a blocklist file or a key
//! file would park whichever thread reads it. These readers open without blocking and refuse
//! anything but a regular file, so such a file is an error naming the path, not a hang.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The bytes of the regular file at `path` (symlinks followed); any other kind of file is an
/// [`std::io::ErrorKind::InvalidInput`] error saying what it is.
pub fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file ({})", kind_of(&meta.file_type())),
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0).min(1 << 20));
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// [`read_regular`] as UTF-8 text.
pub fn read_regular_to_string(path: &Path) -> std::io::Result<String> {
    String::from_utf8(read_regular(path)?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()))
}

fn kind_of(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_dir() {
        "a directory"
    } else {
        "not a file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_at_once_and_a_regular_file_is_read() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let fifo = dir.path().join("policy.yaml");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(made.success(), "mkfifo must create the FIFO");
        // No writer ever opens it: a blocking open would never return.
        let err = read_regular(&fifo).expect_err("a FIFO is not a policy file");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("FIFO"), "{err}");
        let err = read_regular(dir.path()).expect_err("a directory is refused");
        assert!(err.to_string().contains("directory"), "{err}");
        let file = dir.path().join("ok.yaml");
        std::fs::write(&file, b"version: v1\n").expect("write");
        assert_eq!(read_regular(&file).expect("read"), b"version: v1\n");
        assert_eq!(
            read_regular_to_string(&file).expect("read"),
            "version: v1\n"
        );
    }
}
