//! Handing the heap's free memory back to the system.

/// Asks the C allocator to return the memory it holds free to the system, and says whether
/// any came back.
///
/// glibc keeps what a thread frees in that thread's arena and returns only the free space at
/// the top of each heap, so after a burst (many connections opened and closed) a process
/// stays as large as at its peak although little of that memory is in use. This calls
/// `malloc_trim(0)`, which returns every free page. [`crate::http::serve`] calls it after
/// connections close (see [`crate::http::HttpConfig::release_memory`]); call it yourself after
/// a burst of your own. It locks each arena in turn while it runs: call it from a blocking
/// thread, not on every request. With another C library (musl, macOS, Windows) it does
/// nothing and returns `false`; with another global allocator (jemalloc, mimalloc) it only
/// trims what glibc itself holds.
pub fn release_free_memory() -> bool {
    trim()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)] // The crate's one unsafe call: see the `[lints]` of its Cargo.toml.
fn trim() -> bool {
    // SAFETY: `malloc_trim` takes no pointer and has no precondition; glibc serializes it with
    // every other allocator call through the arenas' locks.
    unsafe { libc::malloc_trim(0) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() -> bool {
    false
}

#[cfg(test)]
mod tests {
    #[test]
    fn freed_memory_can_be_handed_back() {
        // Many small blocks freed, but one kept at the end: glibc cannot give back the space
        // below it without trimming.
        let mut blocks: Vec<Vec<u8>> = (0..20_000).map(|i| vec![i as u8; 1024]).collect();
        let keep = blocks.pop();
        drop(blocks);
        let released = super::release_free_memory();
        assert_eq!(
            released,
            cfg!(all(target_os = "linux", target_env = "gnu")),
            "glibc returns the freed pages; elsewhere nothing is done"
        );
        drop(keep);
    }
}
