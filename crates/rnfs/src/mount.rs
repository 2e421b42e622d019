//! `rnfs mount`: an NFS export as a FUSE file system (being built).

/// `rnfs mount` arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct MountArgs {
    /// The export, as nfs://host[:port]/export[/path].
    url: String,
    /// Where to mount it.
    mountpoint: std::path::PathBuf,
}

/// Mounts and serves until unmounted.
pub(crate) fn run(args: MountArgs) -> anyhow::Result<()> {
    anyhow::bail!(
        "rnfs mount {} {}: not built yet",
        args.url,
        args.mountpoint.display()
    )
}
