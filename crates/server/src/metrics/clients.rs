//! Per-client totals, by IP address, in a bounded table.
//!
//! A call is attributed to its client without any table lookup: each connection
//! carries its own [`ConnCounters`] block, bumped once per call. The table is
//! touched only when a connection opens or closes (a closing connection's counts
//! are folded into its client's row) and by snapshots, which add the blocks of the
//! live connections.
//!
//! At most `max_clients` rows. When the table is full, a new client takes the row
//! of the client that has been without connections and mounts the longest (its
//! totals move to the `other` row); if every row has a connection or a mount, the
//! new client is counted in `other`. Memory is thus bounded by `max_clients` rows
//! plus one entry per open connection.
//!
//! Finding that row must not cost a new host a walk of the table (it runs
//! under the table's lock, at accept): idle rows are kept oldest first, and the
//! long-idle ones are typically clients that keep a mount. A row becomes a
//! candidate only by going idle (its last connection closes) or by losing its
//! last mount (UMNT, UMNTALL; [`MountList::removals`] counts them); a mount
//! insert only takes candidates away. So the table remembers where the last
//! search stopped: while no mount was removed, the rows before that point are
//! still mounted, and the next search starts there (rows that went idle since
//! have later keys, so they are still reached). Between two mount removals each
//! idle row is thus looked at once at most: O(1) amortised per new host, plus
//! one walk from the oldest row after each removal. And a search that found
//! nothing is not repeated until a row goes idle or a mount goes: closes of
//! connections counted in `other`, and new mounts, as in a boot storm, do not
//! count. The row taken is the one a full search from the oldest would take
//! (the oldest idle row without a mount); a mount removed while a search runs
//! is noticed by the next one.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use crossbeam_utils::CachePadded;

use super::note::CallNote;
use super::snapshot::ClientSnapshot;
use crate::nfs::MountList;

/// One connection's counters. Several service threads may process calls of one
/// connection at once (pipelining), so they are read-modify-writes, but on the
/// connection's own cache line: only threads serving that connection contend.
/// Relaxed: statistics only. The final values reach the closing fold through the
/// release/acquire of the connection's last reference count drop.
#[derive(Debug, Default)]
pub(crate) struct ConnCounters {
    calls: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

impl ConnCounters {
    /// Counts one call and its bytes.
    #[inline]
    pub(crate) fn record(&self, note: &CallNote) {
        self.calls.fetch_add(1, Relaxed);
        if note.bytes_read > 0 {
            self.bytes_read
                .fetch_add(u64::from(note.bytes_read), Relaxed);
        }
        if note.bytes_written > 0 {
            self.bytes_written
                .fetch_add(u64::from(note.bytes_written), Relaxed);
        }
    }
}

type Block = Arc<CachePadded<ConnCounters>>;

#[derive(Default)]
struct Row {
    calls: u64,
    bytes_read: u64,
    bytes_written: u64,
    /// Open connections, by connection id.
    live: HashMap<u64, Block>,
    /// When the last connection closed (a count of closes, for eviction order).
    idle_since: u64,
}

impl Row {
    fn fold(&mut self, c: &ConnCounters) {
        self.calls += c.calls.load(Relaxed);
        self.bytes_read += c.bytes_read.load(Relaxed);
        self.bytes_written += c.bytes_written.load(Relaxed);
    }

    fn absorb(&mut self, o: Row) {
        self.calls += o.calls;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
        self.live.extend(o.live);
    }

    fn snapshot(&self, addr: String, mounts: Vec<String>) -> ClientSnapshot {
        let mut s = ClientSnapshot {
            addr,
            connections: self.live.len() as u64,
            calls: self.calls,
            bytes_read: self.bytes_read,
            bytes_written: self.bytes_written,
            mounts,
        };
        for c in self.live.values() {
            s.calls += c.calls.load(Relaxed);
            s.bytes_read += c.bytes_read.load(Relaxed);
            s.bytes_written += c.bytes_written.load(Relaxed);
        }
        s
    }
}

#[derive(Default)]
struct Rows {
    by_ip: HashMap<IpAddr, Row>,
    other: Row,
    closes: u64,
    /// The rows without a connection, by `idle_since` (unique: a count of
    /// closes), oldest first: the eviction candidates.
    idle: BTreeMap<u64, IpAddr>,
    /// Rows put into `idle`: only those can become candidates, besides the
    /// mounted ones when a mount goes.
    idled: u64,
    /// `(idled, mount list removals)` when an eviction last found no row to
    /// free: until either moves, none can be found, and none is sought.
    evict_failed: Option<(u64, u64)>,
    /// `(key, mount list removals)` where the last search stopped: every row
    /// of `idle` with a smaller key had a mount when looked at, and still has
    /// while no mount was removed since. Rows that went idle later have
    /// larger keys (a count of closes).
    resume: Option<(u64, u64)>,
    /// Evictions that looked at the candidates.
    #[cfg(test)]
    searches: u64,
    /// Idle rows those evictions looked at (each a search of the mount list).
    #[cfg(test)]
    visited: u64,
}

/// The client table.
pub(crate) struct ClientTable {
    max_rows: usize,
    mounts: Arc<MountList>,
    rows: Mutex<Rows>,
}

impl ClientTable {
    pub(crate) fn new(max_rows: usize, mounts: Arc<MountList>) -> Self {
        ClientTable {
            max_rows,
            mounts,
            rows: Mutex::new(Rows::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Rows> {
        // Totals stay consistent if a holder panicked.
        self.rows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers connection `id` of `ip` (at accept).
    pub(crate) fn open(self: &Arc<Self>, ip: IpAddr, id: u64) -> ClientConn {
        let block = Block::default();
        let mut guard = self.lock();
        let rows = &mut *guard;
        let in_other = !rows.by_ip.contains_key(&ip)
            && rows.by_ip.len() >= self.max_rows
            && !self.evict_one(rows);
        let row = if in_other {
            &mut rows.other
        } else {
            let row = rows.by_ip.entry(ip).or_default();
            if row.live.is_empty() {
                // No longer idle (a new row is in neither map).
                rows.idle.remove(&row.idle_since);
            }
            row
        };
        row.live.insert(id, Arc::clone(&block));
        drop(guard);
        ClientConn {
            table: Arc::clone(self),
            ip,
            id,
            in_other,
            counters: block,
        }
    }

    /// Frees the row idle the longest (no connection, no mount), moving its
    /// totals to `other`; on a connection from a new client to a full table
    /// only. The idle rows are looked at oldest first, each with one search
    /// of the mount list, from where the last search stopped if no mount was
    /// removed since (the rows before it are still mounted: an insert never
    /// unmounts), and not at all while no row went idle and no mount went
    /// since the last search found none. Between two removals each idle row
    /// is looked at once at most, where starting from the oldest each time
    /// walked past every long-idle mounted client per new host. (A resume
    /// point rather than, say, a set of the unmounted idle rows: that would
    /// need the mount list to tell the table of every mount and unmount; this
    /// needs one counter, bumped only by removals.)
    fn evict_one(&self, rows: &mut Rows) -> bool {
        // Read before the search: a removal during it counts past this value
        // (see `MountList::removals`), so the next eviction starts over.
        let removals = self.mounts.removals();
        if rows.evict_failed == Some((rows.idled, removals)) {
            return false;
        }
        #[cfg(test)]
        {
            rows.searches += 1;
        }
        let from = match rows.resume {
            Some((key, seen)) if seen == removals => key,
            _ => 0,
        };
        let victim = rows
            .idle
            .range(from..)
            .find(|(_, ip)| {
                #[cfg(test)]
                {
                    rows.visited += 1;
                }
                !self.mounts.has_host(&ip.to_string())
            })
            .map(|(since, ip)| (*since, *ip));
        let Some((since, ip)) = victim else {
            rows.evict_failed = Some((rows.idled, removals));
            // Every idle key is at most `closes`: a row going idle later
            // comes after this point.
            rows.resume = Some((rows.closes + 1, removals));
            return false;
        };
        // The rows before `since` were mounted; the next search starts at
        // the row after it.
        rows.resume = Some((since, removals));
        rows.idle.remove(&since);
        if let Some(row) = rows.by_ip.remove(&ip) {
            rows.other.absorb(row);
        }
        true
    }

    fn close(&self, conn: &ClientConn) {
        let mut guard = self.lock();
        let rows = &mut *guard;
        rows.closes += 1;
        let closes = rows.closes;
        let row = if conn.in_other {
            Some(&mut rows.other)
        } else {
            rows.by_ip.get_mut(&conn.ip)
        };
        // A row with a live connection is never evicted; `other` always exists.
        if let Some(row) = row {
            if let Some(block) = row.live.remove(&conn.id) {
                row.fold(&block);
            }
            if row.live.is_empty() {
                row.idle_since = closes;
                if !conn.in_other {
                    rows.idle.insert(closes, conn.ip);
                    rows.idled += 1;
                }
            }
        }
    }

    /// One row per client, busiest first, then `other` if it counted anything.
    pub(crate) fn snapshot(&self) -> Vec<ClientSnapshot> {
        let mut mounts: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (host, path) in self.mounts.entries() {
            mounts.entry(host).or_default().push(path);
        }
        let rows = self.lock();
        let mut out: Vec<ClientSnapshot> = rows
            .by_ip
            .iter()
            .map(|(ip, row)| {
                let addr = ip.to_string();
                let m = mounts.get(&addr).cloned().unwrap_or_default();
                row.snapshot(addr, m)
            })
            .collect();
        out.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.addr.cmp(&b.addr)));
        let other = rows.other.snapshot("other".to_owned(), Vec::new());
        if other.connections > 0 || other.calls > 0 {
            out.push(other);
        }
        out
    }
}

/// A connection's registration in the client table; dropping it (when the
/// connection is dropped) folds the connection's counts into its client's row.
pub(crate) struct ClientConn {
    table: Arc<ClientTable>,
    ip: IpAddr,
    id: u64,
    in_other: bool,
    counters: Block,
}

impl ClientConn {
    /// The connection's counters.
    #[inline]
    pub(crate) fn counters(&self) -> &ConnCounters {
        &self.counters
    }
}

impl Drop for ClientConn {
    fn drop(&mut self) {
        self.table.close(self);
    }
}

impl std::fmt::Debug for ClientConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConn")
            .field("ip", &self.ip)
            .field("in_other", &self.in_other)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn table(max: usize) -> (Arc<ClientTable>, Arc<MountList>) {
        let mounts = Arc::new(MountList::default());
        (Arc::new(ClientTable::new(max, Arc::clone(&mounts))), mounts)
    }

    /// The `n`th of many hosts (10.0.0.0 up).
    fn host(n: u32) -> IpAddr {
        IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + n))
    }

    /// `n` hosts (from `first`) that mount and go idle, as Linux clients do.
    fn mounted_idle(t: &Arc<ClientTable>, mounts: &MountList, first: u32, n: u32) {
        for i in first..first + n {
            mounts.insert(&host(i).to_string(), "/x");
            drop(t.open(host(i), u64::from(i)));
        }
    }

    fn row<'a>(rows: &'a [ClientSnapshot], addr: &str) -> Option<&'a ClientSnapshot> {
        rows.iter().find(|r| r.addr == addr)
    }

    #[test]
    fn live_and_closed_connections_are_summed() {
        let (t, _) = table(4);
        let a = t.open(ip(1), 1);
        let b = t.open(ip(1), 2);
        a.counters().record(&CallNote {
            export: None,
            bytes_read: 10,
            bytes_written: 0,
            reply_held: false,
        });
        b.counters().record(&CallNote::default());
        let s = t.snapshot();
        let r = row(&s, "127.0.0.1").unwrap();
        assert_eq!((r.connections, r.calls, r.bytes_read), (2, 2, 10));
        drop(a);
        let s = t.snapshot();
        let r = row(&s, "127.0.0.1").unwrap();
        assert_eq!((r.connections, r.calls, r.bytes_read), (1, 2, 10));
        drop(b);
        let s = t.snapshot();
        assert_eq!(row(&s, "127.0.0.1").unwrap().connections, 0);
        assert_eq!(row(&s, "127.0.0.1").unwrap().calls, 2);
    }

    /// A full table of clients that mounted and went idle (as Linux clients
    /// do: they close an idle connection and keep the mount) frees no row,
    /// and new hosts do not search it again and again until a client leaves
    /// or a mount goes: a boot storm of new clients once searched every row
    /// and built a set of every mount, per connection, in the poller.
    #[test]
    fn a_full_table_of_mounted_clients_is_searched_once_until_it_changes() {
        let (t, mounts) = table(4);
        for i in 1..=4 {
            mounts.insert(&format!("127.0.0.{i}"), "/x");
            drop(t.open(ip(i), u64::from(i)));
        }
        let conns: Vec<_> = (10..200).map(|i| t.open(ip(i), u64::from(i))).collect();
        assert_eq!(t.lock().searches, 1, "new hosts searched the table each");
        assert!(row(&t.snapshot(), "127.0.0.10").is_none());
        // A mount goes: the next new host takes its client's row.
        assert!(mounts.remove("127.0.0.2", "/x"));
        let new = t.open(ip(201), 201);
        let s = t.snapshot();
        assert!(row(&s, "127.0.0.201").is_some());
        assert!(row(&s, "127.0.0.2").is_none());
        assert_eq!(t.lock().searches, 2);
        // A client with a row comes back and leaves: its row is idle again,
        // and the oldest idle row without a mount is the one taken.
        mounts.remove("127.0.0.1", "/x");
        mounts.remove("127.0.0.3", "/x");
        drop(t.open(ip(3), 300));
        let _next = t.open(ip(202), 202);
        let s = t.snapshot();
        assert!(row(&s, "127.0.0.1").is_none(), "the oldest idle row stayed");
        assert!(row(&s, "127.0.0.3").is_some());
        drop((conns, new));
    }

    /// A boot storm: while the table is full of mounted idle clients, each
    /// new host opens a connection (counted in `other`), mounts, and closes
    /// it. Neither the close nor the mount can free a row, so the table is
    /// searched once, not once per host (a close in `other` or any mount
    /// once threw the negative cache away: 2,000 searches of 1,000 rows).
    #[test]
    fn a_boot_storm_of_mounting_hosts_searches_a_full_table_once() {
        let (t, mounts) = table(1000);
        mounted_idle(&t, &mounts, 0, 1000);
        for i in 1000..3000 {
            let conn = t.open(host(i), u64::from(i));
            assert!(conn.in_other);
            mounts.insert(&host(i).to_string(), "/x");
            drop(conn);
        }
        let rows = t.lock();
        assert_eq!(
            rows.searches, 1,
            "searched again after a close in other or a mount"
        );
        assert_eq!(rows.visited, 1000);
    }

    /// Many one-shot hosts behind long-idle mounted clients: each new host
    /// takes the previous one's row without walking past the mounted rows
    /// again (it once did: 255 rows looked at per connection).
    #[test]
    fn one_shot_hosts_do_not_walk_past_mounted_idle_rows_each() {
        let (t, mounts) = table(256);
        mounted_idle(&t, &mounts, 0, 255);
        let hosts = 2000;
        for i in 255..255 + hosts {
            drop(t.open(host(i), u64::from(i)));
        }
        let visited = t.lock().visited;
        assert!(
            visited <= u64::from(255 + 2 * hosts),
            "{visited} idle rows looked at for {hosts} new hosts"
        );
        let s = t.snapshot();
        assert!((0..255).all(|i| row(&s, &host(i).to_string()).is_some()));
        assert!(row(&s, &host(254 + hosts).to_string()).is_some());
        assert!(row(&s, &host(253 + hosts).to_string()).is_none());
    }

    /// The search resumes after the rows it found mounted; rows that go idle
    /// later are found, and a mount that goes sends the search back to the
    /// oldest row: the row taken is still the oldest idle one without a mount.
    #[test]
    fn the_search_resumes_past_mounted_rows_until_a_mount_goes() {
        let (t, mounts) = table(4);
        mounted_idle(&t, &mounts, 1, 3);
        drop(t.open(host(4), 4));
        drop(t.open(host(5), 5));
        assert_eq!(t.lock().visited, 4, "1, 2, 3 mounted, then 4 taken");
        drop(t.open(host(6), 6));
        assert_eq!(t.lock().visited, 5, "5 taken at once");
        // Mounted 2 comes back and leaves: idle after 6.
        drop(t.open(host(2), 20));
        // 3's mount goes: the next host takes 3's row, not 6's.
        assert!(mounts.remove(&host(3).to_string(), "/x"));
        drop(t.open(host(7), 7));
        let s = t.snapshot();
        assert!(row(&s, &host(3).to_string()).is_none());
        assert!(row(&s, &host(6).to_string()).is_some());
        assert_eq!(t.lock().visited, 7, "from the oldest: 1 mounted, 3 taken");
        // Then 6 (past 3's key), then 7 (past mounted 2).
        drop(t.open(host(8), 8));
        drop(t.open(host(9), 9));
        let s = t.snapshot();
        assert!(row(&s, &host(6).to_string()).is_none());
        assert!(row(&s, &host(7).to_string()).is_none());
        assert_eq!(t.lock().visited, 10);
        let _held = [t.open(host(10), 10), t.open(host(11), 11)];
        assert_eq!(t.lock().visited, 12, "8, then 9");
        // Only mounted 1 and 2 are idle: none is taken, none looked at.
        assert!(t.open(host(12), 12).in_other);
        assert_eq!(t.lock().visited, 12);
        // A mount removed with UMNTALL also counts: 1's row is taken.
        assert_eq!(mounts.remove_host(&host(1).to_string()), ["/x"]);
        assert!(!t.open(host(13), 13).in_other);
        assert!(row(&t.snapshot(), &host(1).to_string()).is_none());
        assert_eq!(t.lock().visited, 13);
    }

    #[test]
    fn a_full_table_overflows_into_other_and_evicts_idle_rows() {
        let (t, mounts) = table(2);
        let a = t.open(ip(1), 1);
        let b = t.open(ip(2), 2);
        let c = t.open(ip(3), 3);
        c.counters().record(&CallNote::default());
        let s = t.snapshot();
        assert_eq!(s.len(), 3);
        assert!(row(&s, "127.0.0.3").is_none());
        assert_eq!(row(&s, "other").unwrap().calls, 1);
        // Client 1 closes, but has a mount: not evicted.
        mounts.insert("127.0.0.1", "/x");
        a.counters().record(&CallNote::default());
        drop(a);
        let d = t.open(ip(4), 4);
        assert!(row(&t.snapshot(), "127.0.0.4").is_none());
        drop(d);
        // Client 2 closes without a mount: its row goes to the next new client.
        b.counters().record(&CallNote::default());
        drop(b);
        let e = t.open(ip(5), 5);
        let s = t.snapshot();
        assert!(row(&s, "127.0.0.2").is_none());
        assert_eq!(row(&s, "127.0.0.5").unwrap().connections, 1);
        assert_eq!(row(&s, "127.0.0.1").unwrap().mounts, ["/x"]);
        // Client 2's call moved to `other`; totals are kept.
        assert_eq!(row(&s, "other").unwrap().calls, 2);
        assert_eq!(s.iter().map(|r| r.calls).sum::<u64>(), 3);
        drop((c, e));
        assert!(t.snapshot().len() <= 3);
    }

    /// The cost of a full table's evictions in the two patterns above, at a
    /// larger scale. Run in release:
    /// `cargo test --release -p rnfs-server --lib eviction_cost -- --ignored --nocapture`
    #[test]
    #[ignore = "benchmark"]
    fn eviction_cost() {
        let (t, mounts) = table(1000);
        mounted_idle(&t, &mounts, 0, 1000);
        let start = std::time::Instant::now();
        for i in 1000..3000 {
            let conn = t.open(host(i), u64::from(i));
            mounts.insert(&host(i).to_string(), "/x");
            drop(conn);
        }
        let storm = start.elapsed();
        let rows = t.lock();
        println!(
            "boot storm, 1,000 mounted idle rows, 2,000 hosts that open, mount, close: \
             {storm:?} ({:?} per host), {} searches, {} rows looked at",
            storm / 2000,
            rows.searches,
            rows.visited
        );
        drop(rows);

        let (t, mounts) = table(256);
        mounted_idle(&t, &mounts, 0, 255);
        let start = std::time::Instant::now();
        for i in 255..20_255 {
            drop(t.open(host(i), u64::from(i)));
        }
        let oneshot = start.elapsed();
        let rows = t.lock();
        println!(
            "255 mounted idle rows of 256, 20,000 one-shot hosts: \
             {oneshot:?} ({:?} per host), {} searches, {} rows looked at",
            oneshot / 20_000,
            rows.searches,
            rows.visited
        );
    }
}
