//! CPU detection: which tier of the vector kernels ([`super::simd`]) this process runs.
//!
//! Two tiers on x86-64: AVX-512 (F, BW, VBMI) and AVX2 (with POPCNT and BMI1); everywhere else
//! the scalar code. `GUARDWIRE_SIMD=off` in the environment keeps the scalar code,
//! `GUARDWIRE_SIMD=avx2` stops at the AVX2 tier. Decided once per process. A leaf of the
//! scanner, apart from the kernels: the callers of the kernels (the start filter, the wake marks)
//! ask it which path to take, and the kernels' entry points check against it that the CPU has
//! the features they are compiled for.

use std::sync::OnceLock;

/// Which kernels run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Level {
    Scalar,
    Avx2,
    Avx512,
}

/// The kernels this process uses: the best tier the CPU has, capped by `GUARDWIRE_SIMD`
/// (`off` or `avx2`).
pub(super) fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let cap = match std::env::var("GUARDWIRE_SIMD") {
            Ok(v) if v.eq_ignore_ascii_case("off") => Level::Scalar,
            Ok(v) if v.eq_ignore_ascii_case("avx2") => Level::Avx2,
            _ => Level::Avx512,
        };
        detected()
            .iter()
            .copied()
            .rfind(|&l| l <= cap)
            .unwrap_or(Level::Scalar)
    })
}

/// Whether any vector kernels run.
pub(super) fn enabled() -> bool {
    level() > Level::Scalar
}

/// Every tier this CPU can run, the scalar code first.
pub(super) fn detected() -> &'static [Level] {
    static DETECTED: OnceLock<Vec<Level>> = OnceLock::new();
    DETECTED.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let mut levels = vec![Level::Scalar];
            if has!("avx2") && has!("popcnt") && has!("bmi1") {
                levels.push(Level::Avx2);
            }
            if has!("avx512f") && has!("avx512bw") && has!("avx512vbmi") && has!("popcnt") {
                levels.push(Level::Avx512);
            }
            levels
        }
        #[cfg(not(target_arch = "x86_64"))]
        vec![Level::Scalar]
    })
}
