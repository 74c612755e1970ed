//! Giving memory back to the operating system after compiling packs.
//!
//! Building the automata of a large pack (regex determinization above all) allocates far more
//! temporary memory than the finished automata keep — with the load benchmark's realistic pack,
//! tens of MiB. glibc's allocator keeps freed memory mapped in its arenas, so without a trim
//! that peak would stay in the proxy's RSS for as long as it runs.

/// Returns freed heap memory to the operating system where the allocator supports it (glibc);
/// elsewhere a no-op.
#[allow(unsafe_code)]
pub fn release_unused() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}
