//! CPU time and memory of a server process, from /proc (Linux).

/// User + system CPU time of the process, in microseconds.
pub(crate) fn cpu_us(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) * 1_000_000.0 / clock_ticks())
}

/// CPU time of this process and of the children it has waited for (wrk), in microseconds: the
/// load generator's own cost.
pub(crate) fn own_cpu_us() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let mut ticks = 0.0;
    // utime, stime, cutime, cstime: fields 14 to 17.
    for i in 11..15 {
        ticks += fields.get(i)?.parse::<f64>().ok()?;
    }
    Some(ticks * 1_000_000.0 / clock_ticks())
}

fn clock_ticks() -> f64 {
    // Linux exposes USER_HZ as 100 on every mainstream architecture.
    100.0
}

fn status_kb(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| {
        l.strip_prefix(key)?
            .trim()
            .strip_suffix(" kB")?
            .trim()
            .parse()
            .ok()
    })
}

/// Peak resident memory (VmHWM), in KiB.
pub(crate) fn peak_rss_kb(pid: u32) -> Option<u64> {
    status_kb(pid, "VmHWM:")
}

/// Current resident memory (VmRSS), in KiB.
pub(crate) fn rss_kb(pid: u32) -> Option<u64> {
    status_kb(pid, "VmRSS:")
}
