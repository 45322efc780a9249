//! Files the gate keeps across restarts (watch state, the LLM route's spend), written so a
//! crash leaves the old file or the new one, never half of either.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Write `body` to `path` atomically: a temp file beside the target (created, never
/// reused), fsync, rename, then fsync the folder so the rename survives a crash. The
/// folder is created when missing. `name` names the temp file.
pub(crate) fn write_atomically(path: &Path, name: &str, body: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile_in(dir, name)?;
    let written = tmp
        .1
        .write_all(body)
        .and_then(|()| tmp.1.sync_all())
        .and_then(|()| std::fs::rename(&tmp.0, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp.0);
        return Err(e);
    }
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn tempfile_in(dir: &Path, name: &str) -> std::io::Result<(PathBuf, std::fs::File)> {
    let nanos = crate::base::clock::now_subsec_nanos();
    let tmp = dir.join(format!(".{name}.{}.{nanos}.tmp", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)?;
    Ok((tmp, file))
}
