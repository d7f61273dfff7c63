//! How much host memory the process may use: the limit that keeps the operating system from
//! killing it.
//!
//! Linux grants more memory than it has (overcommit): a request for twice the machine's memory
//! succeeds, and the process is killed (`SIGKILL`, no message) only when the pages are touched.
//! So the CPU allocator checks requests itself, before the global allocator sees them:
//!
//! - **A cap on what it hands out in all**: by default the smaller of the machine's physical
//!   memory (`MemTotal`) and the memory limit of the process's cgroup (v2 `memory.max` or v1
//!   `memory.limit_in_bytes`, the tightest along the cgroup's path), see [`host_limit`].
//! - **A check of each large request against what is free now**: a block of at least
//!   [`CHECKED_BYTES`] is refused when it exceeds `MemAvailable` or the cgroup's headroom
//!   (limit minus usage), see [`host_available`]. Other processes' memory counts too.
//!
//! A refused request is an out-of-memory error like any other: the engine shrinks its caches,
//! retries, and only then reports `OutOfMemory` for that op. Off Linux both figures are
//! unknown and neither check applies.

use std::path::{Path, PathBuf};

/// The smallest request checked against the memory free now: reading it costs a few
/// microseconds, nothing beside filling a block this large (milliseconds).
pub const CHECKED_BYTES: usize = 64 << 20;

/// The most host memory this process can use: the smaller of physical memory and its cgroup's
/// limit. `None` where neither is known (off Linux).
///
/// # Examples
///
/// ```
/// if let Some(limit) = eddy_vm::alloc::host_limit() {
///     assert!(limit > 0);
/// }
/// ```
pub fn host_limit() -> Option<usize> {
    min_known(meminfo("MemTotal:"), cgroup().map(|c| c.limit))
}

/// The host memory this process could get now: the smaller of `MemAvailable` and its
/// cgroup's headroom. `None` where neither is known (off Linux).
///
/// # Examples
///
/// ```
/// if let (Some(free), Some(limit)) = (eddy_vm::alloc::host_available(), eddy_vm::alloc::host_limit()) {
///     assert!(free <= limit);
/// }
/// ```
pub fn host_available() -> Option<usize> {
    let headroom = cgroup().map(|c| c.limit.saturating_sub(c.usage));
    let free = min_known(meminfo("MemAvailable:"), headroom);
    // `MemAvailable` is below `MemTotal`, the headroom below the limit: never above the limit.
    min_known(free, host_limit())
}

fn min_known(a: Option<usize>, b: Option<usize>) -> Option<usize> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A `/proc/meminfo` field, in bytes.
fn meminfo(field: &str) -> Option<usize> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    let kib: usize = line[field.len()..]
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// A cgroup's memory limit and usage, in bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Cgroup {
    limit: usize,
    usage: usize,
}

/// The process's cgroup memory figures: the tightest limit along its path, and the usage where
/// that limit is set. `None` if no limit is set (or cgroups are not mounted).
fn cgroup() -> Option<Cgroup> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let root = Path::new("/sys/fs/cgroup");
    // v2: `0::/path`; v1: `N:memory:/path` (or `N:memory,...:/path`).
    let v2 = own.lines().find_map(|l| l.strip_prefix("0::"));
    let v1 = own.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then_some(path)
    });
    let found = v2.and_then(|p| tightest(root, p, "memory.max", "memory.current"));
    found.or_else(|| {
        v1.and_then(|p| {
            tightest(
                &root.join("memory"),
                p,
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            )
        })
    })
}

/// Walks from `mount/path` up to `mount`, and returns the smallest limit found (with the usage
/// beside it). A limit of `max`, or one above 2^60 (v1's "unlimited"), is no limit.
fn tightest(mount: &Path, path: &str, limit_file: &str, usage_file: &str) -> Option<Cgroup> {
    let mut dir: PathBuf = mount.join(path.trim_start_matches('/'));
    let mut best: Option<Cgroup> = None;
    loop {
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
        if let Some(limit) = read(limit_file).and_then(|s| parse_limit(&s)) {
            let usage = read(usage_file)
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            if best.is_none_or(|b| limit < b.limit) {
                best = Some(Cgroup { limit, usage });
            }
        }
        if dir == mount || !dir.pop() || !dir.starts_with(mount) {
            return best;
        }
    }
}

fn parse_limit(s: &str) -> Option<usize> {
    let v: u64 = s.trim().parse().ok()?;
    (v < 1 << 60).then(|| usize::try_from(v).unwrap_or(usize::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_as_the_kernel_writes_them() {
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712\n"), None, "v1's unlimited");
        assert_eq!(parse_limit("1073741824\n"), Some(1 << 30));
        assert_eq!(min_known(Some(3), None), Some(3));
        assert_eq!(min_known(Some(3), Some(2)), Some(2));
        assert_eq!(min_known(None, None), None);
    }

    #[test]
    fn the_tightest_limit_along_the_path_wins() {
        let root = std::env::temp_dir().join(format!("eddy-cgroup-{}", std::process::id()));
        let leaf = root.join("a/b");
        std::fs::create_dir_all(&leaf).unwrap();
        std::fs::write(root.join("memory.max"), "max\n").unwrap();
        std::fs::write(root.join("a/memory.max"), "2048\n").unwrap();
        std::fs::write(root.join("a/memory.current"), "512\n").unwrap();
        std::fs::write(leaf.join("memory.max"), "4096\n").unwrap();
        let got = tightest(&root, "/a/b", "memory.max", "memory.current");
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(
            got,
            Some(Cgroup {
                limit: 2048,
                usage: 512
            })
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_machine_has_a_limit_and_free_memory_below_it() {
        let (limit, free) = (host_limit().unwrap(), host_available().unwrap());
        assert!(free <= limit && limit > 0, "free {free}, limit {limit}");
    }
}
