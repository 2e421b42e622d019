//! `rnfs bench`: benchmarks that report numbers side by side with their
//! baselines. They assert nothing; the tests do that.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use rnfs_bench::sched::{self, BenchPolicy, Mode, Params};
use rnfs_sched::{Policy, PoolMode};

const SCHED_ABOUT: &str = "\
Reproduces the service-thread hand-off study of the Linux SUNRPC constant-time \
scheduler series (2023) for every scheduler policy, side by side in one run.

For each policy and thread count it reports the hand-off latency (from a \
transport being queued to a service thread picking it up): min, mean, p50, p99, \
max and a histogram in 300 ns bins; calls per second; wake-ups per call; the \
share of wake-ups that found nothing to do; the peak number of threads woken \
but not yet running; and voluntary and involuntary context switches per call \
(getrusage, whole process).

Modes: `inproc` drives the scheduler with synthetic transports (one poller \
thread per pool makes a transport readable again as soon as its call \
completes: a closed loop with --connections calls in flight). `loopback` \
starts an rnfs server on 127.0.0.1 and drives it with NULL calls over \
--connections TCP connections.

The `tokio` baseline (not run by default) replaces the scheduler in the \
in-process mode only: the poller spawns each call as a task on a tokio \
multi-thread runtime with as many workers as threads. Tokio does not count \
its wake-ups, so those columns show `-` (JSON `null`); loopback runs skip it, \
as the server has no tokio policy.

Runs alternate the policy order between repetitions. Results go to standard \
output as tables, and as JSON with --json.";

/// Benchmarks.
#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    pub(crate) which: Which,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Which {
    /// Scheduler hand-off latency and throughput, every policy side by side.
    #[command(long_about = SCHED_ABOUT)]
    Sched(SchedArgs),
    /// NFS per-call costs against directory size and open files (no O(n)).
    #[command(long_about = NFS_ABOUT)]
    Nfs(NfsArgs),
    /// Closed-loop calls through the rnfs client library against any server.
    #[command(long_about = CLIENT_ABOUT)]
    Client(ClientArgs),
    /// Parallel writers beside a stat / ls -l loop on a mounted file system.
    #[command(long_about = WRITEBACK_ABOUT)]
    Writeback(WritebackArgs),
    /// Closed-loop load (C connections x D calls in flight) against any NFSv3 server.
    #[command(long_about = LOAD_ABOUT)]
    Load(LoadArgs),
    /// A trivial ONC RPC server: the floor of server CPU per call.
    #[command(long_about = ECHO_ABOUT)]
    EchoServer(EchoArgs),
    /// Random pread/pwrite on a local file: the kernel's cost per op, no NFS.
    #[command(long_about = FILEIO_ABOUT)]
    Fileio(FileioArgs),
    /// Directory listings with a stat per entry, locally: the kernel's cost per entry.
    #[command(long_about = DIRIO_ABOUT)]
    Dirio(DirioArgs),
}

const LOAD_ABOUT: &str = "\
Closed-loop load against any NFSv3 server (rnfs, nfs-ganesha, knfsd): \
--connections TCP connections each keep --depth calls in flight; every reply \
is checked and answered at once with the next call. After --warmup seconds \
the run measures for --duration seconds and reports calls/s, MB/s, latency \
(min, p50, p90, p99, p99.9, max from an HDR histogram), failed calls by status \
name (NFS3ERR_*, RPC_*), the server's CPU time per call and its RSS (from \
/proc/PID/stat and /proc/PID/status over exactly the measured window, with \
--server-pid; resolution one clock tick), and this process's own CPU per call \
(getrusage), so that a result bound by the load generator is recognisable.

The measured calls bypass the client library: --threads threads each run one \
epoll loop over their share of the connections, with pre-encoded call headers, \
replies parsed in batches and the next calls sent with one writev. Sockets \
are non-blocking with TCP_NODELAY.

Ops (--op):

null: NULL (no MOUNT at all with ?nomount=1 in the URL).

getattr, access: GETATTR, or ACCESS of all six bits, of the test file.

lookup: LOOKUP of a random existing name in the directory.

read, write: --size bytes at a random --size-aligned offset of the test \
file. WRITEs are UNSTABLE, with a COMMIT after every --commit-every WRITEs per \
connection (COMMITs are counted as calls, not as bytes). The test file is \
sized with SETATTR, i.e. sparse: READs return zeros on every server without \
touching a disk, so they measure the server, not the storage.

create-remove: CREATE (GUARDED) of a new name in the connection's own \
scratch directory, then REMOVE of it. One call is the pair; its latency is \
the pair's. Pairs still open when the window ends are finished.

readdirplus: every in-flight call lists the directory page by page \
(maxcount --dir-page, dircount one eighth of it as the Linux client sends), \
starting over after eof. One call is one READDIRPLUS; entries/s, the call \
latency per entry returned and the server's CPU per entry are reported too.

mix: an ls -l / rsync listing. In every 16 calls of a slot: one READDIRPLUS \
page (continuing its listing), then 7 GETATTR, 4 LOOKUP and 4 ACCESS of the \
entries that page returned. Every RPC is a call; the counts per procedure are \
in the JSON (calls_by_proc).

Fixtures live under the URL's directory in rnfs-bench-load/ and are reused: \
file-<N> (the test file), dir-<K>/ (entries f0 .. f<K-1>; a rerun lists it \
and creates only what is missing, many CREATEs in flight, with progress on \
standard error) and cr-<conn>/ (create-remove scratch). With --name-width W \
the directory is dir-<K>-w<W>/ and its names f followed by W zero-padded \
digits, so that a sweep over directory sizes lists names of one length at \
every size (unpadded, a million entries have longer names than a thousand, \
and fewer of them fit a READDIRPLUS reply). The ports come from \
the portmapper unless the URL gives ?nfsport= (and ?mountport=, default the \
NFS port).

--idle-connections N opens N more connections first; each sends one NULL, \
reads the reply and stays idle (not measured). The open-file limit is raised \
as needed (as root up to fs.nr_open), and on loopback they come from \
127.0.0.2, 127.0.0.3, ... to get past one address's ephemeral ports.

While the run lasts (and only then) /dev/cpu_dma_latency is held open at 0, \
when writable, so CPUs stay out of deep idle states; --no-dma-latency turns \
that off. The JSON says whether it was held.

The result goes to standard output as text, and with --json FILE as one JSON \
object (schema 1: tool, label, url, op, connections, depth, size, file_size, \
dir_entries, name_width, idle_connections, threads, warmup_s, duration_s, calls, \
calls_per_s, mb_per_s, latency_us, latency_cdf, errors, error_calls, server, \
loadgen, dma_latency_held, plus calls_by_proc, entries, us_per_entry and \
more); with --json - the JSON goes to standard output and the text to \
standard error. A closed connection or a refused MOUNT ends the run with an \
error (exit status 1).

Examples:
  rnfs serve --backend memory --listen 127.0.0.1:20490 &
  rnfs bench load --url 'nfs://127.0.0.1/export?nfsport=20490' --op getattr \\
      --connections 16 --depth 16 --duration 10 --server-pid $! --json -
  rnfs bench echo-server --listen 127.0.0.1:20500 &
  rnfs bench load --url 'nfs://127.0.0.1/?nfsport=20500&nomount=1' --op null \\
      --connections 16 --depth 16 --server-pid $!";

const ECHO_ABOUT: &str = "\
A trivial ONC RPC server, the physical floor of server CPU per call: it \
answers every call (any program, version and procedure) with an accepted \
SUCCESS reply with an AUTH_NONE verifier and no results, and does nothing \
else: one read and one write per batch of calls, records parsed as they \
stream through a fixed buffer. Each of --threads threads runs its own epoll \
loop and its own listening socket on the same port (SO_REUSEPORT).

It prints `listening on ADDR` on standard output and runs until SIGINT or \
SIGTERM. Drive it with `rnfs bench load --op null` and a URL with \
?nfsport=PORT&nomount=1; compare its --server-pid CPU per call with a real \
server's.

Example:
  rnfs bench echo-server --listen 127.0.0.1:20500 &
  rnfs bench load --url 'nfs://127.0.0.1/?nfsport=20500&nomount=1' --op null \\
      --connections 16 --depth 16 --duration 5 --server-pid $!";

const FILEIO_ABOUT: &str = "\
The I/O of `rnfs bench load --op read|write`, done directly on a local file \
with no NFS in between: the local baseline of the file-size sweep \
(bench/sweeps --only files). Run on the very file the server served, it \
measures what the kernel alone costs per op (page-cache misses on holes, \
block allocation, writeback on fsync), so that the server's CPU per call \
minus this CPU per op is rnfs's own cost per call.

--threads threads share one descriptor of --path and each repeats pread(2) \
(--op read) or pwrite(2) (--op write) of --size bytes at a random \
--size-aligned offset below --file-size, one op in flight per thread. A \
writer calls fsync(2) after every --commit-every writes of its own (0: never), \
as the load generator sends a COMMIT (an fsync on rnfs's local backend) after \
every --commit-every UNSTABLE WRITEs per connection; an fsync counts as an op \
(as a COMMIT counts as a call) but not as bytes.

After --warmup seconds the run measures for --duration seconds and reports \
ops/s, MB/s, latency (min, p50, p90, p99, p99.9, max from an HDR histogram) \
and this process's CPU time per op (getrusage(RUSAGE_SELF), user + system, \
over exactly the measured window: the threads' system calls, page faults \
and fsync writeback they do themselves; not the kernel's flusher threads, \
which the server's figure leaves out as well).

The file must exist and hold at least --file-size bytes (default: its own \
size); it is neither created nor extended, since the sweep's files are made \
by the load generator (rnfs-bench-load/file-<N>, sized with SETATTR, i.e. \
sparse). --create instead creates it, or extends it, sparse, to --file-size \
(ftruncate), for use on its own. Writes land inside [0, --file-size) and \
never change the file's size.

The result goes to standard output as text, and with --json FILE as one JSON \
object (tool rnfs-bench-fileio, schema 1: path, op, size, file_size, threads, \
commit_every, created, attrs, warmup_s, duration_s, ops, ops_per_s, mb_per_s, \
fsyncs, latency_us, cpu_s, cpu_us_per_op, cpu_window_s); with --json - the \
JSON goes to standard output and the text to standard error.

Examples:
  rnfs bench fileio --path /tmp/f --op read --file-size 1G --create
  rnfs bench fileio --path EXPORT/rnfs-bench-load/file-8589934592 --op write \\
      --size 4K --threads 16 --warmup 1 --duration 3 --json -";

const DIRIO_ABOUT: &str = "\
The file-system work of `rnfs bench load --op readdirplus`, done directly on \
a local directory with no NFS in between: the local baseline of the \
directory-size sweep (bench/sweeps --only dirs). Run on the very directory \
the server listed, it measures what the kernel alone costs per entry (the \
directory read, a name lookup and an inode's attributes per entry, cache \
misses as the directory outgrows the CPU's caches), so that the server's CPU \
per entry minus this CPU per entry is rnfs's own cost per entry.

One thread lists --path again and again: a fresh descriptor per listing \
(open(2) O_DIRECTORY), getdents64(2) into a --buffer-byte buffer, and one \
fstatat(2) with AT_SYMLINK_NOFOLLOW per entry other than . and ..: what any \
server answering READDIRPLUS with current attributes must ask the kernel. \
Without --handles it takes no file handles: a server that looks each \
entry's handle up by name pays for that itself; --handles adds it, as a \
statx(2) with STATX_INO by name standing in for name_to_handle_at(2) (the \
same path walk and inode read; rnfs's local backend does it for entries \
whose handle it has not cached). An entry removed between the two calls is \
skipped and counted as vanished.

After --warmup seconds the run measures for --duration seconds (finishing \
the stretch of entries under way, at most 4096) and reports entries/s, wall \
time and this process's CPU time per entry (getrusage(RUSAGE_SELF), user + \
system, over exactly the measured window), and the listings completed.

The result goes to standard output as text, and with --json FILE as one JSON \
object (tool rnfs-bench-dirio, schema 1: path, buffer, handles, directory_entries, \
warmup_s, duration_s, entries, entries_per_s, listings, vanished, cpu_s, \
cpu_ns_per_entry, ns_per_entry, cpu_window_s); with --json - the JSON goes \
to standard output and the text to standard error.

Examples:
  rnfs bench dirio --path /var/tmp
  rnfs bench dirio --path EXPORT/rnfs-bench-load/dir-1000000 --duration 3 --json -";

/// Options of `rnfs bench dirio`.
#[derive(Debug, Args)]
pub(crate) struct DirioArgs {
    /// The directory to list.
    #[arg(long, value_name = "DIR")]
    path: PathBuf,
    /// getdents64 buffer size (K, M suffixes; 1K to 1M).
    #[arg(long, default_value = "32K", value_parser = parse_size)]
    buffer: u64,
    /// Also look each entry's file handle up by name (a statx(STATX_INO)
    /// standing in for name_to_handle_at), as a server without a cached handle.
    #[arg(long)]
    handles: bool,
    /// Unmeasured seconds before the measured window.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Measured seconds.
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// Write the result as one JSON object to FILE (`-`: standard output).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum FileOpArg {
    /// pread(2) at random aligned offsets.
    Read,
    /// pwrite(2) at random aligned offsets, periodic fsync(2).
    Write,
}

/// Options of `rnfs bench fileio`.
#[derive(Debug, Args)]
pub(crate) struct FileioArgs {
    /// The file (it must exist and hold --file-size bytes, unless --create).
    #[arg(long, value_name = "FILE")]
    path: PathBuf,
    /// The I/O to repeat.
    #[arg(long, value_enum)]
    op: FileOpArg,
    /// Bytes per op (K, M suffixes; at most 1M).
    #[arg(long, default_value = "4K", value_parser = parse_size)]
    size: u64,
    /// Offsets lie below this (K, M, G suffixes; default: the file's size).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    file_size: Option<u64>,
    /// Threads, each with one op in flight.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: u32,
    /// Unmeasured seconds before the measured window.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Measured seconds.
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// An fsync after every N writes per thread (0: never).
    #[arg(long, default_value_t = 256)]
    commit_every: u32,
    /// Create the file, or extend it, sparse, to --file-size.
    #[arg(long, requires = "file_size")]
    create: bool,
    /// fstat(2) the file around each op, as an NFSv3 server must for the
    /// attributes in its reply: before and after a write (WRITE's wcc data),
    /// after a read (READ's post-op attributes). On a kernel with multigrain
    /// timestamps (Linux 6.13+) a write after an fstat also takes a
    /// fine-grained ctime and dirties the inode, as under an NFS server.
    #[arg(long)]
    attrs: bool,
    /// Write the result as one JSON object to FILE (`-`: standard output).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum LoadOpArg {
    /// NULL calls.
    Null,
    /// GETATTR of the test file.
    Getattr,
    /// LOOKUP of random names in the directory.
    Lookup,
    /// ACCESS of the test file.
    Access,
    /// READ at random offsets.
    Read,
    /// UNSTABLE WRITE at random offsets, periodic COMMIT.
    Write,
    /// CREATE then REMOVE of new names.
    CreateRemove,
    /// Directory listings, one page per call.
    Readdirplus,
    /// READDIRPLUS pages, then GETATTR/LOOKUP/ACCESS of their entries.
    Mix,
}

impl From<LoadOpArg> for rnfs_bench::load::LoadOp {
    fn from(op: LoadOpArg) -> Self {
        use rnfs_bench::load::LoadOp;
        match op {
            LoadOpArg::Null => LoadOp::Null,
            LoadOpArg::Getattr => LoadOp::Getattr,
            LoadOpArg::Lookup => LoadOp::Lookup,
            LoadOpArg::Access => LoadOp::Access,
            LoadOpArg::Read => LoadOp::Read,
            LoadOpArg::Write => LoadOp::Write,
            LoadOpArg::CreateRemove => LoadOp::CreateRemove,
            LoadOpArg::Readdirplus => LoadOp::Readdirplus,
            LoadOpArg::Mix => LoadOp::Mix,
        }
    }
}

/// Options of `rnfs bench load`.
#[derive(Debug, Args)]
pub(crate) struct LoadArgs {
    /// The export: nfs://HOST[:PORT]/EXPORT[?nfsport=P&mountport=P&nomount=1].
    #[arg(long)]
    url: String,
    /// The call to repeat.
    #[arg(long, value_enum)]
    op: LoadOpArg,
    /// Measured TCP connections.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    connections: u32,
    /// Calls in flight per connection.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    depth: u32,
    /// READ/WRITE size (K, M suffixes; at most 1M).
    #[arg(long, default_value = "4K", value_parser = parse_size)]
    size: u64,
    /// Size of the test file (K, M, G suffixes).
    #[arg(long, default_value = "64M", value_parser = parse_size)]
    file_size: u64,
    /// Entries of the lookup/readdirplus/mix directory.
    #[arg(long, default_value_t = 1000)]
    dir_entries: u64,
    /// Digits of the directory's entry names, zero-padded (0: f0, f1, ...
    /// unpadded, in dir-K; W: f followed by W digits, in dir-K-wW).
    #[arg(long, default_value_t = 0, value_name = "W",
          value_parser = clap::value_parser!(u8).range(0..=20))]
    name_width: u8,
    /// A COMMIT after every N WRITEs per connection (0: never).
    #[arg(long, default_value_t = 256)]
    commit_every: u32,
    /// READDIRPLUS maxcount in bytes (K, M suffixes); dircount is one eighth.
    #[arg(long, default_value = "32K", value_parser = parse_size)]
    dir_page: u64,
    /// Unmeasured seconds before the measured window.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Measured seconds.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// The server's process id: its CPU time and RSS over the measured window.
    #[arg(long, value_name = "PID")]
    server_pid: Option<u32>,
    /// Extra connections that send one NULL and then stay idle.
    #[arg(long, default_value_t = 0)]
    idle_connections: u32,
    /// Load-generator threads (each an epoll loop over its share of connections).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: u32,
    /// Free text copied into the JSON.
    #[arg(long)]
    label: Option<String>,
    /// Write the result as one JSON object to FILE (`-`: standard output).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Do not hold /dev/cpu_dma_latency at 0 during the run.
    #[arg(long)]
    no_dma_latency: bool,
}

/// Options of `rnfs bench echo-server`.
#[derive(Debug, Args)]
pub(crate) struct EchoArgs {
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// Event-loop threads (each with its own listening socket on the port).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: u32,
}

const CLIENT_ABOUT: &str = "\
Drives any NFSv3 server through the rnfs client library: --threads threads \
share one client (one TCP connection unless --connections), each with one call \
in flight, repeating --op for --duration seconds after --warmup. READ and WRITE \
go to random --size-aligned offsets of a --file-size test file \
(rnfs-bench-client.dat, created in the export's root and reused). Reports \
calls/s, MB/s, latency percentiles, this process's CPU time per call and, when \
the client was built with the lock-stats feature, lock acquisitions per call.

Example (seed 002: 32 KiB random reads):
  rnfs bench client --url nfs://127.0.0.1:2049/srv --op read --size 32768 --threads 8,16,64";

const WRITEBACK_ABOUT: &str = "\
Seed 003: --writers threads each write --size bytes sequentially (write(2) of \
--block bytes) to their own new file in --dir and close it, while one more \
thread loops: stat() every file being written, then `ls -l` the directory \
(readdir plus an lstat per entry), pausing --interval-ms between rounds. \
Reports the writers' aggregate MB/s (first write to last close) and the \
latency of stat() and of one `ls -l`. Point --dir at a mounted NFS file system \
(e.g. `rnfs mount -o wb_max_outstanding=16` vs `=0`); bench/writeback.sh runs \
both side by side.";

fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => {
            let mult = match t[i..].to_ascii_lowercase().as_str() {
                "k" | "kib" => 1u64 << 10,
                "m" | "mib" => 1 << 20,
                "g" | "gib" => 1 << 30,
                "t" | "tib" => 1 << 40,
                other => return Err(format!("unknown size suffix {other:?} (use K, M, G or T)")),
            };
            (&t[..i], mult)
        }
        None => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("not a size: {s:?}"))
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ClientOpArg {
    /// NULL calls.
    Null,
    /// GETATTR of the test file.
    Getattr,
    /// READ at random offsets.
    Read,
    /// UNSTABLE WRITE at random offsets.
    Write,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum LoadModeArg {
    /// --threads OS threads, blocking calls.
    Threads,
    /// --threads tasks on one tokio thread, async calls.
    Async,
    /// As async, with replies handed over by the connection's reader thread
    /// instead of read on the runtime (for comparison).
    AsyncReaderThread,
}

/// Options of `rnfs bench client`.
#[derive(Debug, Args)]
pub(crate) struct ClientArgs {
    /// The export, as nfs://host[:port]/export.
    #[arg(long)]
    url: String,
    /// Calls to make (comma separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [ClientOpArg::Read])]
    op: Vec<ClientOpArg>,
    /// Thread counts (comma separated).
    #[arg(long, value_delimiter = ',', default_values_t = [8, 16, 64],
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: Vec<u32>,
    /// Concurrency by OS threads making blocking calls, or by tasks on one
    /// thread awaiting the async API.
    #[arg(long, value_enum, default_value_t = LoadModeArg::Threads)]
    mode: LoadModeArg,
    /// TCP connections of the client.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    connections: u32,
    /// READ/WRITE size (K, M suffixes).
    #[arg(long, default_value = "32K", value_parser = parse_size)]
    size: u64,
    /// Size of the test file (K, M, G suffixes).
    #[arg(long, default_value = "256M", value_parser = parse_size)]
    file_size: u64,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Unmeasured warm-up seconds before each run.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Repetitions (medians are reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// Also write every run as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// Options of `rnfs bench writeback`.
#[derive(Debug, Args)]
pub(crate) struct WritebackArgs {
    /// Directory on the file system under test.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Parallel writers.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=1024))]
    writers: u32,
    /// Bytes per writer (K, M, G suffixes).
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    size: u64,
    /// Bytes per write(2).
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    block: u64,
    /// Pause between stat-loop rounds, in milliseconds.
    #[arg(long, default_value_t = 50)]
    interval_ms: u64,
    /// Also write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

const NFS_ABOUT: &str = "\
Measures that no per-call cost of the NFS server grows with directory size or \
with the number of files in use, each big case side by side with its small \
baseline in the same run: LOOKUP of random names in a directory of --small and \
of --big entries; a complete READDIRPLUS listing (64 KiB replies) of --list-small \
and of --big entries, as time per entry; 4 KiB READs of random files among 1 and \
among --files files.

The server runs in this process on 127.0.0.1 with the local backend over \
directories created under --dir (kept for later runs: creating a million files \
takes a minute), driven by one client with one call in flight. Results are \
medians over --repeat repetitions, with the ratio of each big case to its \
baseline.

Local baselines, on the same trees in the same repetitions, do the kernel's \
part of that work without NFS, so that growth in the kernel can be told apart \
from rnfs's own cost: readdirplus-local lists each directory with getdents64 \
and, per entry, a lookup by name standing in for name_to_handle_at (statx, \
not following) and fstatat (not following), as the privileged local backend \
does (skipped when not root); read-local opens every file once, as the \
server's open-file cache holds them, and per call does fstat, a 4 KiB pread \
at offset 0 and fstat again; it runs after the server has stopped (its own \
repetitions), since beside the server's cache it would need two descriptors \
per file. The table ends with rnfs's own cost of the big case against the \
small one: (NFS - local) per READDIRPLUS entry (p50) and per \
READ (mean). The cpu ns column is this process's CPU time (user + system) \
per call or entry: client and in-process server together for the NFS cases.";

/// Options of `rnfs bench nfs`.
#[derive(Debug, Args)]
pub(crate) struct NfsArgs {
    /// Scratch directory for the test trees (created; reused between runs).
    #[arg(long, value_name = "DIR", default_value = "/tmp/rnfs-bench-nfs")]
    dir: PathBuf,
    /// Entries of the small LOOKUP directory.
    #[arg(long, default_value_t = 10)]
    small: usize,
    /// Entries of the big directory.
    #[arg(long, default_value_t = 1_000_000)]
    big: usize,
    /// Entries of the small READDIRPLUS directory.
    #[arg(long, default_value_t = 1000)]
    list_small: usize,
    /// Distinct files read in the open-files case (compared with 1).
    #[arg(long, default_value_t = 10_000)]
    files: usize,
    /// Measured seconds per LOOKUP and READ run.
    #[arg(long, default_value_t = 2.0)]
    duration: f64,
    /// Repetitions (medians are reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// Service threads.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: u32,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum ModeArg {
    /// Synthetic transports: the scheduler alone.
    Inproc,
    /// A real server and NULL calls over loopback TCP.
    Loopback,
    /// Both.
    Both,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum PolicyArg {
    /// Lock-free queue, O(1) idle stack, one waker.
    Lwq,
    /// As lwq, with the task handed to the thread woken for it.
    LwqHandoff,
    /// Baseline: mutex and linear walk of all threads.
    Listwalk,
    /// Baseline: broadcast wake-up.
    Wakeall,
    /// Baseline, in-process only: each call spawned on a tokio multi-thread
    /// runtime with as many workers as threads.
    Tokio,
}

impl From<PolicyArg> for BenchPolicy {
    fn from(p: PolicyArg) -> BenchPolicy {
        match p {
            PolicyArg::Lwq => BenchPolicy::Sched(Policy::Lwq),
            PolicyArg::LwqHandoff => BenchPolicy::Sched(Policy::LwqHandoff),
            PolicyArg::Listwalk => BenchPolicy::Sched(Policy::ListWalk),
            PolicyArg::Wakeall => BenchPolicy::Sched(Policy::WakeAll),
            PolicyArg::Tokio => BenchPolicy::Tokio,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum PoolModeArg {
    /// One pool.
    Global,
    /// One pool per CPU.
    Percpu,
    /// One pool per NUMA node.
    Pernode,
    /// As Linux chooses.
    Auto,
}

impl From<PoolModeArg> for PoolMode {
    fn from(p: PoolModeArg) -> PoolMode {
        match p {
            PoolModeArg::Global => PoolMode::Global,
            PoolModeArg::Percpu => PoolMode::PerCpu,
            PoolModeArg::Pernode => PoolMode::PerNode,
            PoolModeArg::Auto => PoolMode::Auto,
        }
    }
}

/// Options of `rnfs bench sched`.
#[derive(Debug, Args)]
pub(crate) struct SchedArgs {
    /// Which harness to run.
    #[arg(long, value_enum, default_value_t = ModeArg::Both)]
    mode: ModeArg,
    /// Policies to compare (comma separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [PolicyArg::Lwq, PolicyArg::LwqHandoff, PolicyArg::Listwalk, PolicyArg::Wakeall])]
    policies: Vec<PolicyArg>,
    /// Service thread counts (comma separated).
    #[arg(long, value_delimiter = ',', default_values_t = [8, 32, 128, 512, 2048],
          value_parser = clap::value_parser!(u32).range(1..=65_536))]
    threads: Vec<u32>,
    /// Transports (TCP connections in loopback mode), each with one call in flight.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    connections: u32,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 2.0)]
    duration: f64,
    /// Unmeasured warm-up seconds before each run.
    #[arg(long, default_value_t = 0.5)]
    warmup: f64,
    /// Repetitions of the whole matrix (report medians over them).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// CPU work per call in the in-process mode, in nanoseconds (busy loop).
    #[arg(long, default_value_t = 0)]
    work_ns: u64,
    /// lwq's bound on threads woken but not yet running (above 1, another
    /// thread is woken only while more tasks are queued than threads waking).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    max_waking: u32,
    /// Pool layout.
    #[arg(long, value_enum, default_value_t = PoolModeArg::Global)]
    pool_mode: PoolModeArg,
    /// Loopback client threads (default: one per 16 connections, at most 4).
    #[arg(long, default_value_t = 0)]
    client_threads: u32,
    /// Also write every run as JSON to this file (`-` for standard output).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

fn seconds(name: &str, s: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(s)
        .with_context(|| format!("--{name} must be a non-negative number of seconds"))
}

pub(crate) fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.which {
        Which::Sched(a) => run_sched(a),
        Which::Nfs(a) => run_nfs(a),
        Which::Client(a) => run_client(a),
        Which::Writeback(a) => run_writeback(a),
        Which::Load(a) => run_load(a),
        Which::EchoServer(a) => run_echo(a),
        Which::Fileio(a) => run_fileio(a),
        Which::Dirio(a) => run_dirio(a),
    }
}

fn run_dirio(a: DirioArgs) -> anyhow::Result<()> {
    use rnfs_bench::dirio::{self, DirIoParams};
    let mut p = DirIoParams::new(a.path);
    p.buffer = u32::try_from(a.buffer).context("--buffer must be 1K to 1M")?;
    p.handles = a.handles;
    p.warmup = seconds("warmup", a.warmup)?;
    p.duration = seconds("duration", a.duration)?;
    let result = dirio::run(&p)?;
    print_result(a.json, &result)
}

fn run_fileio(a: FileioArgs) -> anyhow::Result<()> {
    use rnfs_bench::fileio::{self, FileIoParams, FileOp};
    let op = match a.op {
        FileOpArg::Read => FileOp::Read,
        FileOpArg::Write => FileOp::Write,
    };
    let mut p = FileIoParams::new(a.path, op);
    p.size = u32::try_from(a.size).context("--size must be 1 to 1M")?;
    p.file_size = a.file_size;
    p.threads = a.threads;
    p.warmup = seconds("warmup", a.warmup)?;
    p.duration = seconds("duration", a.duration)?;
    p.commit_every = a.commit_every;
    p.create = a.create;
    p.attrs = a.attrs;
    let result = fileio::run(&p)?;
    print_result(a.json, &result)
}

fn run_load(a: LoadArgs) -> anyhow::Result<()> {
    use rnfs_bench::load::{self, LoadParams};
    let mut p = LoadParams::new(a.url, a.op.into());
    p.connections = a.connections;
    p.depth = a.depth;
    p.size = u32::try_from(a.size).context("--size must be 1 to 1M")?;
    p.file_size = a.file_size;
    p.dir_entries = a.dir_entries;
    p.name_width = a.name_width;
    p.commit_every = a.commit_every;
    p.dir_page = u32::try_from(a.dir_page).context("--dir-page must be 1K to 1M")?;
    p.warmup = seconds("warmup", a.warmup)?;
    p.duration = seconds("duration", a.duration)?;
    p.server_pid = a.server_pid;
    p.idle_connections = a.idle_connections;
    p.threads = a.threads;
    p.label = a.label;
    p.dma_latency = !a.no_dma_latency;
    let result = load::run(&p)?;
    print_result(a.json, &result)
}

fn run_echo(a: EchoArgs) -> anyhow::Result<()> {
    use nix::sys::signal::{SigSet, Signal};
    // Block the signals before any thread starts: every thread inherits the
    // mask, and this thread takes them with sigwait.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals
        .thread_block()
        .context("cannot block SIGINT/SIGTERM")?;
    let server = rnfs_bench::echo::EchoServer::start(a.listen, a.threads as usize)
        .with_context(|| format!("cannot listen on {}", a.listen))?;
    println!("listening on {}", server.local_addr());
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let signal = signals.wait().context("waiting for a signal failed")?;
    eprintln!("{signal}: shutting down");
    server.shutdown();
    Ok(())
}

/// Prints a result as text, and as JSON to `json` (a file, or standard
/// output for `-`, the text then going to standard error).
fn print_result<T: serde::Serialize + std::fmt::Display>(
    json: Option<PathBuf>,
    result: &T,
) -> anyhow::Result<()> {
    if json.as_ref().is_some_and(|j| j.as_os_str() == "-") {
        eprintln!("{result}");
        println!("{}", serde_json::to_string_pretty(result)?);
        Ok(())
    } else {
        println!("{result}");
        write_json(json, result)
    }
}

fn write_json<T: serde::Serialize>(path: Option<PathBuf>, value: &T) -> anyhow::Result<()> {
    if let Some(path) = path {
        std::fs::write(&path, serde_json::to_string_pretty(value)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn run_client(a: ClientArgs) -> anyhow::Result<()> {
    use rnfs_bench::client::{client_load, ClientLoadParams, ClientOp, LoadMode};
    let url = rnfs_client::NfsUrl::parse(&a.url)?;
    let size = u32::try_from(a.size)
        .ok()
        .filter(|s| (1..=1 << 20).contains(s))
        .context("--size must be 1 to 1M")?;
    let warmup = seconds("warmup", a.warmup)?;
    let duration = seconds("duration", a.duration)?;
    let mode = match a.mode {
        LoadModeArg::Threads => LoadMode::Threads,
        LoadModeArg::Async => LoadMode::Async,
        LoadModeArg::AsyncReaderThread => LoadMode::AsyncReaderThread,
    };
    let mut all = Vec::new();
    println!(
        "{:<8} {:>7} {:>12} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "op", "threads", "calls/s", "MB/s", "p50 us", "p99 us", "max us", "cpu us/op", "locks/op"
    );
    for &op in &a.op {
        let op = match op {
            ClientOpArg::Null => ClientOp::Null,
            ClientOpArg::Getattr => ClientOp::Getattr,
            ClientOpArg::Read => ClientOp::Read,
            ClientOpArg::Write => ClientOp::Write,
        };
        for &threads in &a.threads {
            let mut runs = Vec::new();
            for _ in 0..a.repeat {
                runs.push(client_load(&ClientLoadParams {
                    url: url.clone(),
                    op,
                    threads,
                    mode,
                    connections: a.connections,
                    size,
                    file_size: a.file_size,
                    warmup,
                    duration,
                })?);
            }
            let med = |f: &dyn Fn(&rnfs_bench::client::ClientLoadRow) -> f64| {
                let mut v: Vec<f64> = runs.iter().map(f).collect();
                rnfs_bench::report::median(&mut v)
            };
            let locks = med(&|r| r.locks_per_call.unwrap_or(f64::NAN));
            println!(
                "{:<8} {:>7} {:>12.0} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>10.2} {:>10}",
                format!("{op:?}").to_lowercase(),
                threads,
                med(&|r| r.calls_per_sec),
                med(&|r| r.mb_per_sec),
                med(&|r| r.latency.p50 as f64) / 1e3,
                med(&|r| r.latency.p99 as f64) / 1e3,
                med(&|r| r.latency.max as f64) / 1e3,
                med(&|r| r.cpu_us_per_call),
                if locks.is_nan() {
                    "-".to_owned()
                } else {
                    format!("{locks:.2}")
                },
            );
            all.extend(runs);
        }
    }
    write_json(a.json, &all)
}

fn run_writeback(a: WritebackArgs) -> anyhow::Result<()> {
    let p = rnfs_bench::client::WritebackParams {
        dir: a.dir,
        writers: a.writers,
        size: a.size,
        block: usize::try_from(a.block)
            .ok()
            .filter(|b| *b >= 1)
            .context("--block must be at least 1")?,
        interval: Duration::from_millis(a.interval_ms),
    };
    let row = rnfs_bench::client::writeback(&p)?;
    println!(
        "writers {} x {} MiB: {:.1} MB/s in {:.1} s; stat p50 {:.2} ms p99 {:.2} ms max {:.2} ms ({} calls); ls -l p50 {:.2} ms p99 {:.2} ms max {:.2} ms ({} runs)",
        p.writers,
        p.size >> 20,
        row.write_mb_per_sec,
        row.seconds,
        row.stat.p50 as f64 / 1e6,
        row.stat.p99 as f64 / 1e6,
        row.stat.max as f64 / 1e6,
        row.stat.count,
        row.ls_l.p50 as f64 / 1e6,
        row.ls_l.p99 as f64 / 1e6,
        row.ls_l.max as f64 / 1e6,
        row.ls_l.count,
    );
    write_json(a.json, &row)
}

fn run_nfs(a: NfsArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        a.small >= 1 && a.list_small >= 1 && a.big >= 1 && a.files >= 1,
        "sizes must be at least 1"
    );
    let params = rnfs_bench::nfs::NfsParams {
        dir: a.dir,
        small: a.small,
        big: a.big,
        list_small: a.list_small,
        files: a.files,
        duration: seconds("duration", a.duration)?,
        repeat: a.repeat as usize,
        threads: a.threads as usize,
    };
    // As `rnfs serve` does: the open-file cache is sized from this limit.
    crate::raise_fd_limit();
    let rows = rnfs_bench::nfs::run(&params)?;
    println!("{}", rnfs_bench::nfs::table(&rows));
    write_json(a.json, &rows)
}

fn run_sched(a: SchedArgs) -> anyhow::Result<()> {
    let modes = match a.mode {
        ModeArg::Inproc => vec![Mode::InProcess],
        ModeArg::Loopback => vec![Mode::Loopback],
        ModeArg::Both => vec![Mode::InProcess, Mode::Loopback],
    };
    let params = Params {
        modes,
        policies: a.policies.iter().map(|&p| p.into()).collect(),
        threads: a.threads.iter().map(|&t| t as usize).collect(),
        connections: a.connections as usize,
        duration: seconds("duration", a.duration)?,
        warmup: seconds("warmup", a.warmup)?,
        repeat: a.repeat as usize,
        work: Duration::from_nanos(a.work_ns),
        max_waking: a.max_waking as usize,
        pool_mode: a.pool_mode.into(),
        client_threads: a.client_threads as usize,
    };
    let mut first = true;
    let rows = sched::run(&params, |row| {
        let table = sched::table(std::slice::from_ref(row));
        let mut lines = table.lines();
        let header = lines.next().unwrap_or_default();
        if first {
            eprintln!("{header}");
            first = false;
        }
        for l in lines {
            eprintln!("{l}");
        }
    })?;
    println!("{}", sched::table(&rows));
    println!("{}", sched::histogram_table(&rows));
    println!("{}", sched::summary(&rows));
    if let Some(path) = a.json {
        let json = serde_json::to_string_pretty(&rows)?;
        if path.as_os_str() == "-" {
            println!("{json}");
        } else {
            std::fs::write(&path, json)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    Ok(())
}
