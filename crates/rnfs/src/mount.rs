//! `rnfs mount`: an NFS export as a FUSE file system.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

use anyhow::Context;
use nix::sys::signal::{SigSet, Signal};
use rnfs_client::NfsUrl;
use rnfs_fuse::{MountOptions, Unmounted};

/// The long help. `main.rs` gives the subcommand a one-line doc comment,
/// which replaces a struct-level `long_about`, so all of it goes after the
/// options.
const MOUNT_HELP: &str = "\
Mounts an NFSv3 export on a local directory through FUSE, using the rnfs client. \
The URL is nfs://host[:port]/export[/path][?mountport=N]: a path below the export \
mounts that directory. Without a port the server's portmapper is asked, then 2049.

rnfs mount stays in the foreground (it never daemonizes; run it under systemd, \
nohup or `&`) and serves the mount until it is unmounted: `umount MOUNTPOINT` \
(or `fusermount3 -u`) from anywhere, or SIGINT/SIGTERM to rnfs mount, which writes \
back every open file, unmounts (detaching the mount and aborting its FUSE \
connection if it is busy) and exits 0. Should that write-back hang (a hard mount \
whose server is gone), a second SIGINT/SIGTERM gives up on the server as umount -f \
does: every NFS call fails, what was not yet written back is lost, and rnfs mount \
exits 1.

Semantics are the Linux NFS client's: close-to-open consistency (open revalidates \
the attributes, close writes back and COMMITs), attributes cached between acregmin \
and acregmax seconds (acdirmin/acdirmax for directories, the timeout doubling \
while the object does not change), permission checks made by the server with the \
caller's uid, gid and groups. Writes go through the client's write-behind engine. \
Mounted by root, the mount is allow_other, like a kernel NFS mount. Unlinking an \
open file renames it to .rnfs* until its last close. Not supported: NFS locking \
(locks are local, as with nolock), extended attributes, RENAME_EXCHANGE.

Mount options (-o, comma-separated, as mount.nfs spells them):
  ro, rw                  read-only or read-write (rw)
  acregmin=S, acregmax=S  attribute cache bounds for files (3, 60)
  acdirmin=S, acdirmax=S  attribute cache bounds for directories (30, 60)
  actimeo=S               all four at once
  noac                    no attribute caching
  cto, nocto              close-to-open revalidation on open (cto)
  timeo=DS                RPC timeout in deciseconds (600)
  retrans=N               retransmissions before a soft mount fails a call (2)
  hard, soft              retry for ever, or fail after retrans with ETIMEDOUT
                          (ECONNRESET when the connection is lost), as the
                          kernel client's soft,softerr (hard: soft mounts can
                          lose written data when a server is slow)
  nconnect=N              TCP connections to the server, 1-16 (1)
  rsize=B, wsize=B        READ/WRITE size, 4096-1048576 (the server's preference;
                          for wsize at most 262144 with write-behind on, which
                          keeps a stat() of a file being written quick)
  wb_max_outstanding=N    WRITEs in flight per file (write-behind; 0 = legacy,
                          synchronous writes) (16)
  wb_max_outstanding_kb=K KiB of WRITEs in flight per file, 0 = no limit
                          (2048). A stat() of a file being written waits for
                          them, so this bounds its latency; one WRITE is always
                          allowed. A single writer over a long fast link wants
                          its bandwidth-delay product here.
  wb_dirty_mb=M           dirty MiB all files may hold before writers wait (256)
  wb_expire=S             data written S seconds ago is written back and
                          committed, by a flusher thread if the file is idle
                          (30, as Linux's vm.dirty_expire_centisecs), 1-3600
  threads=N               threads serving FUSE requests (16)
  allow_other, noallow_other
                          let other users use the mount (default: when root)
  exec, noexec            programs on the mount may run, or not (exec)
  suid, nosuid, dev, nodev
                          set-id bits and device files (nosuid,nodev, as FUSE;
                          suid and dev only when root mounts)
  port=P, mountport=P     the NFS and MOUNT ports, for a URL that names none
  sync                    refused: writes are written back in the background,
                          and fsync(2) or close(2) waits for them
  vers=3, proto=tcp, mountproto=tcp, mountvers=3, sec=sys, nolock,
  defaults, _netdev, nofail, auto, noauto, user, nouser, bg, fg, dirsync,
  atime, noatime, relatime, strictatime, lazytime, nodiratime (the server
  keeps access times), comment=..., x-systemd.* and other x-...:
                          accepted (fstab lines), no effect

Examples:
  rnfs mount nfs://server/export /mnt
  rnfs mount -o ro,actimeo=5 nfs://10.0.0.2:2049/data/projects /mnt/projects
  rnfs mount -o wb_max_outstanding=0 nfs://server/export /mnt   # write-behind off
  umount /mnt                                                   # ends rnfs mount";

/// `rnfs mount` arguments.
#[derive(Debug, clap::Args)]
#[command(after_long_help = MOUNT_HELP)]
pub(crate) struct MountArgs {
    /// Mount options, comma-separated (see --help); may be given more than once.
    #[arg(short = 'o', value_name = "OPTIONS")]
    options: Vec<String>,
    /// Stay in the foreground (always the case; accepted for compatibility).
    #[arg(short = 'f', long)]
    foreground: bool,
    /// The export, as nfs://host[:port]/export[/path].
    url: String,
    /// Where to mount it (an existing directory).
    mountpoint: PathBuf,
}

/// The unmount's states (`run`): not asked for yet, writing back and
/// unmounting, done (detached or unmounted), or failed (a later signal tries
/// again).
const UNMOUNT_IDLE: u8 = 0;
const UNMOUNT_RUNNING: u8 = 1;
const UNMOUNT_DONE: u8 = 2;
const UNMOUNT_FAILED: u8 = 3;

/// Mounts and serves until unmounted.
pub(crate) fn run(args: MountArgs) -> anyhow::Result<()> {
    let url = NfsUrl::parse(&args.url)?;
    let mut options = MountOptions::default();
    for list in &args.options {
        options.apply(list)?;
    }
    // Block the signals before any thread starts: every thread inherits the
    // mask, so only the waiting thread below takes them.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals
        .thread_block()
        .context("cannot block SIGINT/SIGTERM")?;
    let handle = rnfs_fuse::spawn(&url, &args.mountpoint, options)?;
    let unmounter = handle.unmounter();
    let gave_up = Arc::new(AtomicBool::new(false));
    let gave_up_here = Arc::clone(&gave_up);
    // Where the unmount thread is: a signal gives up only while it writes back.
    let unmount_state = Arc::new(AtomicU8::new(UNMOUNT_IDLE));
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            while let Ok(signal) = signals.wait() {
                // Acquire: pairs with the unmount thread's Release, so DONE
                // means its write-back is over.
                match unmount_state.load(Ordering::Acquire) {
                    UNMOUNT_DONE => {
                        tracing::info!("{signal} again: already unmounted");
                        continue;
                    }
                    UNMOUNT_RUNNING => {
                        // Still writing back: the server does not answer.
                        tracing::warn!("{signal} again while unmounting");
                        // Relaxed: read after `join`, which synchronizes.
                        gave_up_here.store(true, Ordering::Relaxed);
                        unmounter.give_up();
                        continue;
                    }
                    _ => {} // IDLE, or FAILED: (try again to) unmount
                }
                tracing::info!("{signal}: unmounting");
                unmount_state.store(UNMOUNT_RUNNING, Ordering::Relaxed);
                // On its own thread, so that a second signal is taken while
                // it writes back.
                let unmounter = unmounter.clone();
                let state = Arc::clone(&unmount_state);
                let spawned = std::thread::Builder::new()
                    .name("unmount".into())
                    .spawn(move || {
                        let outcome = unmounter.unmount();
                        let next = match outcome {
                            Ok(Unmounted::Clean) => UNMOUNT_DONE,
                            Ok(Unmounted::Detached { aborted }) => {
                                tracing::warn!(
                                    "the mount was busy: detached (connection aborted: {aborted})"
                                );
                                UNMOUNT_DONE
                            }
                            Err(e) => {
                                tracing::error!("{e}");
                                UNMOUNT_FAILED
                            }
                        };
                        // Release: see the signal thread's Acquire.
                        state.store(next, Ordering::Release);
                    });
                if let Err(e) = spawned {
                    tracing::error!("cannot start the unmount thread: {e}");
                }
            }
        })
        .context("cannot start the signal thread")?;
    handle.join()?;
    if gave_up.load(Ordering::Relaxed) {
        anyhow::bail!(
            "unmounted {} after giving up on the server: data not written back was lost",
            args.mountpoint.display()
        );
    }
    tracing::info!("unmounted {}", args.mountpoint.display());
    Ok(())
}
