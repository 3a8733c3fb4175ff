//! CPU time and memory of a server process, from /proc (Linux).

/// User + system CPU time of the process, in microseconds.
pub(crate) fn cpu_us(pid: u32) -> Option<f64> {
    // utime and stime: fields 14 and 15.
    cpu_fields_us(&format!("/proc/{pid}/stat"), 2)
}

/// CPU time of this process and of the children it has waited for (wrk), in microseconds: the
/// load generator's own cost.
pub(crate) fn own_cpu_us() -> Option<f64> {
    // utime, stime, cutime, cstime: fields 14 to 17.
    cpu_fields_us("/proc/self/stat", 4)
}

/// The sum of `count` CPU-time fields from field 14 on of a `stat` file, in microseconds.
fn cpu_fields_us(path: &str, count: usize) -> Option<f64> {
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the parenthesised command name start at field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().skip(11).take(count).collect();
    if fields.len() < count {
        return None;
    }
    let mut ticks = 0.0;
    for field in fields {
        ticks += field.parse::<f64>().ok()?;
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
