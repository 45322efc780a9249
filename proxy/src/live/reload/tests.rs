use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::mpsc;

use super::*;
use crate::api::Shared;

/// A policy whose store sits in `dir`, told apart from others by `mark`.
fn policy_text(dir: &Path, mark: &str) -> String {
    format!(
        "version: v1\nstore:\n  root: {}\nwebsiteBlocklist:\n  domains: [\"{mark}.example\"]\n",
        dir.join("store").display()
    )
}

/// A gate's policy reloader and a one-line echo listener on one single-threaded runtime (as
/// a shard runs them), on a thread of its own: whatever blocks that runtime stops the echo.
struct Reloading {
    gate: Arc<GateState>,
    echo: SocketAddr,
}

fn start(path: &Path) -> Reloading {
    let policy = Policy::load(path).expect("the first policy loads");
    let runtime = Runtime::build(policy).expect("its runtime builds");
    let shared = Shared::new(runtime).expect("metrics register");
    let gate = Arc::clone(&shared.gate);
    let (tx, rx) = mpsc::channel();
    let (reloader_gate, path) = (Arc::clone(&gate), path.to_path_buf());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            tx.send(listener.local_addr().expect("addr"))
                .expect("the test waits");
            tokio::spawn(poll_with_timeout(
                reloader_gate,
                path,
                Duration::from_millis(50),
                Duration::from_secs(2),
            ));
            loop {
                let Ok((mut s, _)) = listener.accept().await else {
                    continue;
                };
                use tokio::io::AsyncWriteExt;
                let _ = s.write_all(b"alive\n").await;
            }
        });
    });
    let echo = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the runtime starts");
    Reloading { gate, echo }
}

impl Reloading {
    /// Whether the runtime that runs the reloader still answers, within a second.
    fn answers(&self) -> bool {
        let Ok(mut s) = std::net::TcpStream::connect_timeout(&self.echo, Duration::from_secs(1))
        else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut line = [0u8; 6];
        s.read_exact(&mut line).is_ok() && &line == b"alive\n"
    }

    fn reloads(&self, result: &str) -> u64 {
        self.gate
            .metrics
            .policy_reloads
            .with_label_values(&[result])
            .get()
    }

    fn sha(&self) -> String {
        self.gate.runtime.load().policy.sha256.clone()
    }

    /// Wait (on this thread) until `done` holds, up to 10 s.
    fn wait(&self, what: &str, done: impl Fn(&Self) -> bool) {
        let until = std::time::SystemTime::now() + Duration::from_secs(10);
        while !done(self) {
            assert!(std::time::SystemTime::now() < until, "timed out: {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo must create {}", path.display());
}

#[test]
fn a_fifo_in_place_of_the_policy_is_a_reload_error_and_the_listeners_keep_answering() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("policy.yaml");
    std::fs::write(&path, policy_text(dir.path(), "first")).expect("write");
    let gate = start(&path);
    let good = gate.sha();
    assert!(gate.answers(), "the runtime answers before the swap");

    // The policy becomes a FIFO nobody writes to (a blocking open would wait forever).
    std::fs::remove_file(&path).expect("remove");
    mkfifo(&path);
    gate.wait("the FIFO is refused as a reload", |g| {
        g.reloads("invalid") >= 1
    });
    assert_eq!(gate.sha(), good, "the last good policy stays");
    for _ in 0..5 {
        assert!(
            gate.answers(),
            "the runtime keeps answering with the FIFO in place"
        );
        std::thread::sleep(Duration::from_millis(60));
    }
    assert_eq!(
        gate.reloads("invalid"),
        1,
        "one error per change, not one per poll"
    );

    // The FIFO goes, a new policy comes: it is loaded.
    std::fs::remove_file(&path).expect("remove the FIFO");
    let mut f = std::fs::File::create(&path).expect("create");
    f.write_all(policy_text(dir.path(), "second").as_bytes())
        .expect("write");
    drop(f);
    gate.wait("the new policy is loaded", |g| g.reloads("ok") >= 1);
    assert_ne!(gate.sha(), good, "the new policy is in force");
    assert!(gate.answers());
}

#[test]
fn a_vanished_policy_file_keeps_the_last_good_policy() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("policy.yaml");
    std::fs::write(&path, policy_text(dir.path(), "first")).expect("write");
    let gate = start(&path);
    let good = gate.sha();
    std::fs::remove_file(&path).expect("remove");
    gate.wait("the missing file is a reload error", |g| {
        g.reloads("invalid") >= 1
    });
    assert_eq!(gate.sha(), good, "the last good policy stays");
    assert!(gate.answers());
    // A blocklist file that turns into a FIFO is read without blocking too.
    let list = dir.path().join("blocked.txt");
    mkfifo(&list);
    let text = format!(
        "{}  sharedFiles: [\"{}\"]\n",
        policy_text(dir.path(), "third"),
        list.display()
    );
    std::fs::write(&path, text).expect("write");
    gate.wait("the policy naming a FIFO loads", |g| g.reloads("ok") >= 1);
    assert!(gate.answers());
    let warnings = gate.gate.runtime.load().warnings.clone();
    assert!(
        warnings.iter().any(|w| w.contains("FIFO")),
        "the FIFO is named in a warning: {warnings:?}"
    );
}
