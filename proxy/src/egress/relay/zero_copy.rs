//! Tunnel bytes moved in the kernel: once a tunnel's first message is judged, a direction
//! that carries bulk moves its bytes socket → pipe → socket with splice(2), so a byte of an
//! opaque TLS stream is never copied into the gate's memory. Half-close and accounting are
//! those of a user-space copy: a direction that reads end-of-stream shuts down the write side
//! of the other socket, the other direction goes on until it ends too, and every byte moved is
//! recorded in the tunnel's [`Activity`] (byte counters and the idle clock) as it is written.
//!
//! Small messages are copied, as HAProxy's `splice-auto` does: a direction starts by reading
//! into its shard's buffer and writing straight out (a read and a write cost less than a pair
//! of splices and a pipe), and switches to splice for good after [`BULK_READS`] reads in a row
//! filled the buffer, when its peer is sending in bulk. A direction takes its pipe (two
//! descriptors) at that switch, so an idle tunnel, or one of requests and short answers, holds
//! none, and no buffer either: the buffer is the shard's, and only the bytes of a write the
//! socket could not take at once wait in a buffer of the direction's own. `serve` raises the
//! soft open-file limit to the hard one at start ([`raise_open_file_limit`]), as a Go proxy's
//! runtime does, so pipes do not crowd out the sockets a listener accepts.
//!
//! Where splice cannot run, a direction goes on copying, with the same half-close and
//! accounting: when no pipe can be had (no file descriptors left: that direction only), or
//! when the kernel refuses splice on the first splice of a direction before any byte moved
//! through it (`ENOSYS`, `EPERM` under a seccomp filter, `EINVAL`: remembered for the process,
//! and logged once).

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::fcntl::{OFlag, SpliceFFlags, splice};
use tokio::io::Interest;
use tokio::net::TcpStream;

use super::meter::{Activity, Direction};

/// Bytes asked of one splice: a default pipe's capacity (16 pages).
const CHUNK: usize = 64 * 1024;
/// The shard's buffer for directions that copy: one TLS record's worth.
const COPY_BUF: usize = 16 * 1024;
/// Reads in a row that filled [`COPY_BUF`] after which a direction splices.
const BULK_READS: u32 = 2;

thread_local! {
    /// The buffer copying directions read into and write from without waiting in between;
    /// every tunnel of a shard lives on its thread, so one buffer serves them all.
    static SCRATCH: RefCell<Vec<u8>> = RefCell::new(vec![0; COPY_BUF]);
}

/// Set once the kernel refused splice: every later direction copies in user space.
static UNAVAILABLE: AtomicBool = AtomicBool::new(false);

/// How a tunnel's bytes moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Moved {
    /// At least one direction carried bulk and spliced it in the kernel.
    Spliced,
    /// Every byte was copied in user space: small messages only, or splice unavailable.
    Copied,
}

// === impl Moved ===

impl Moved {
    /// Stable name for logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Spliced => "splice",
            Self::Copied => "copy",
        }
    }
}

/// Move bytes both ways between `client` and `upstream` until both directions reached
/// end-of-stream, or one failed (its error is returned and the other direction stops).
/// Bytes towards the upstream count as [`Direction::In`], bytes back as [`Direction::Out`].
pub(crate) async fn relay(
    client: &TcpStream,
    upstream: &TcpStream,
    activity: &Activity,
) -> io::Result<Moved> {
    relay_with(client, upstream, activity, true).await
}

/// [`relay`], splicing bulk only when `try_splice` (and the kernel has not refused it).
async fn relay_with(
    client: &TcpStream,
    upstream: &TcpStream,
    activity: &Activity,
    try_splice: bool,
) -> io::Result<Moved> {
    let towards = pump(client, upstream, activity, Direction::In, try_splice);
    let back = pump(upstream, client, activity, Direction::Out, try_splice);
    let (a, b) = tokio::try_join!(towards, back)?;
    Ok(if a == Moved::Spliced || b == Moved::Spliced {
        Moved::Spliced
    } else {
        Moved::Copied
    })
}

/// Why a spliced direction stopped early.
enum Stop {
    /// The kernel refused splice before any byte moved: copy instead.
    Unsupported(Errno),
    /// A socket error: the tunnel ends.
    Failed(io::Error),
}

impl From<io::Error> for Stop {
    fn from(e: io::Error) -> Self {
        Self::Failed(e)
    }
}

/// One direction, `src` → `dst`: copied while its messages are small, spliced once it
/// carries bulk (when it may).
async fn pump(
    src: &TcpStream,
    dst: &TcpStream,
    activity: &Activity,
    direction: Direction,
    try_splice: bool,
) -> io::Result<Moved> {
    let may_splice = try_splice && !UNAVAILABLE.load(Ordering::Relaxed);
    let switch = may_splice.then_some(BULK_READS);
    if copied(src, dst, activity, direction, switch).await? == Copying::Ended {
        return Ok(Moved::Copied);
    }
    // Bulk: the pipe is taken now, with nothing of this direction left in user space.
    if let Ok((read_end, write_end)) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK) {
        match spliced(src, dst, (&read_end, &write_end), activity, direction).await {
            Ok(()) => return Ok(Moved::Spliced),
            Err(Stop::Failed(e)) => return Err(e),
            Err(Stop::Unsupported(errno)) => {
                if !UNAVAILABLE.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        event = "tunnel.splice_unavailable", errno = %errno,
                        "the kernel refuses splice(2): tunnels copy their bytes in user space"
                    );
                }
            }
        }
    }
    copied(src, dst, activity, direction, None).await?;
    Ok(Moved::Copied)
}

/// `src` → pipe → `dst` until `src` ends.
async fn spliced(
    src: &TcpStream,
    dst: &TcpStream,
    (read_end, write_end): (&OwnedFd, &OwnedFd),
    activity: &Activity,
    direction: Direction,
) -> Result<(), Stop> {
    let flags = SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK;
    let mut moved_any = false;
    loop {
        // The pipe is empty here, so `EAGAIN` can only mean the socket has nothing to read.
        let filled = loop {
            src.readable().await?;
            match src.try_io(Interest::READABLE, || {
                splice(src, None, write_end, None, CHUNK, flags).map_err(io::Error::from)
            }) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if !moved_any && refused(&e) => {
                    return Err(Stop::Unsupported(Errno::from_raw(
                        e.raw_os_error().unwrap_or(0),
                    )));
                }
                Err(e) => return Err(Stop::Failed(e)),
            }
        };
        if filled == 0 {
            shutdown_write(dst)?;
            return Ok(());
        }
        moved_any = true;
        // The pipe holds `filled` bytes: `EAGAIN` here means the socket's send buffer is full.
        let mut left = filled;
        while left > 0 {
            dst.writable().await?;
            match dst.try_io(Interest::WRITABLE, || {
                splice(read_end, None, dst, None, left, flags).map_err(io::Error::from)
            }) {
                Ok(0) => return Err(Stop::Failed(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    left -= n;
                    activity.record(direction, n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(Stop::Failed(e)),
            }
        }
    }
}

/// Errors that say the kernel will not splice these descriptors at all.
fn refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error().map(Errno::from_raw),
        Some(Errno::ENOSYS | Errno::EPERM | Errno::EINVAL | Errno::EOPNOTSUPP)
    )
}

/// How a copying direction stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Copying {
    /// `src` ended; `dst` was shut down for writing.
    Ended,
    /// `switch_after` full reads in a row, every byte read written: splice from here.
    Bulk,
}

/// What one read and its immediate write did.
enum Step {
    /// Nothing to read after all.
    Again,
    /// End-of-stream.
    End,
    /// `n` bytes read; any the socket did not take are in `pending`.
    Read(usize),
}

/// `src` → the shard's buffer → `dst`, until `src` ends or, with `switch_after`, that many
/// reads in a row filled the buffer.
async fn copied(
    src: &TcpStream,
    dst: &TcpStream,
    activity: &Activity,
    direction: Direction,
    switch_after: Option<u32>,
) -> io::Result<Copying> {
    let mut full_reads = 0u32;
    let mut pending: Vec<u8> = Vec::new();
    loop {
        src.readable().await?;
        // Read and write without waiting in between, so the buffer is free again at once.
        let step = SCRATCH.with_borrow_mut(|buf| -> io::Result<Step> {
            let n = match src.try_read(buf) {
                Ok(0) => return Ok(Step::End),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Step::Again),
                Err(e) => return Err(e),
            };
            let mut sent = 0;
            while sent < n {
                match dst.try_write(&buf[sent..n]) {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(m) => {
                        sent += m;
                        activity.record(direction, m);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
            pending.extend_from_slice(&buf[sent..n]);
            Ok(Step::Read(n))
        })?;
        let n = match step {
            Step::Again => continue,
            Step::End => {
                shutdown_write(dst)?;
                return Ok(Copying::Ended);
            }
            Step::Read(n) => n,
        };
        // What the socket could not take waits here, in this direction's own buffer.
        let mut sent = 0;
        while sent < pending.len() {
            dst.writable().await?;
            match dst.try_write(&pending[sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(m) => {
                    sent += m;
                    activity.record(direction, m);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        if !pending.is_empty() {
            pending = Vec::new();
        }
        full_reads = if n == COPY_BUF { full_reads + 1 } else { 0 };
        if switch_after.is_some_and(|after| full_reads >= after) {
            return Ok(Copying::Bulk);
        }
    }
}

/// Raise the soft limit on open files to the hard one; returns `(before, after)`, `None`
/// when the limit could not be read or set (the gate runs with what it has).
pub(crate) fn raise_open_file_limit() -> Option<(u64, u64)> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft >= hard {
        return Some((soft, soft));
    }
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).ok()?;
    Some((soft, hard))
}

/// Half-close: no more bytes towards `dst` (a peer that already went away is no error).
fn shutdown_write(dst: &TcpStream) -> io::Result<()> {
    match nix::sys::socket::shutdown(dst.as_raw_fd(), nix::sys::socket::Shutdown::Write) {
        Ok(()) | Err(Errno::ENOTCONN) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests;
