//! The standard `process_*` metrics (CPU, memory, file descriptors, start time), read from
//! `/proc` at each scrape, with the names and units every Prometheus client library uses, so
//! the dashboards and alerts written for them work unchanged. Linux only; elsewhere they stay 0.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

/// Clock ticks per second of `/proc/<pid>/stat` (USER_HZ: 100 on every Linux architecture the
/// kernel exports to user space).
const USER_HZ: f64 = 100.0;

pub(super) struct ProcessMetrics {
    cpu: Counter<f64, AtomicU64>,
    /// CPU seconds already added to `cpu` (a counter only goes up by increments).
    cpu_reported: Mutex<f64>,
    resident: Gauge,
    virtual_memory: Gauge,
    open_fds: Gauge,
    max_fds: Gauge,
    start_time: Gauge<f64, AtomicU64>,
}

impl ProcessMetrics {
    /// Registers the metrics (unprefixed) in `registry`.
    pub(super) fn register(registry: &mut Registry) -> ProcessMetrics {
        let m = ProcessMetrics {
            cpu: Counter::default(),
            cpu_reported: Mutex::new(0.0),
            resident: Gauge::default(),
            virtual_memory: Gauge::default(),
            open_fds: Gauge::default(),
            max_fds: Gauge::default(),
            start_time: Gauge::default(),
        };
        registry.register(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            m.cpu.clone(),
        );
        // The gauges, by name and help (the Prometheus client libraries' wording).
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                &m.resident,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                &m.virtual_memory,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                &m.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                &m.max_fds,
            ),
        ];
        for (name, help, gauge) in gauges {
            registry.register(name, help, gauge.clone());
        }
        registry.register(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            m.start_time.clone(),
        );
        m
    }

    /// Reads `/proc` into the metrics (before each scrape is encoded). What cannot be read
    /// keeps its last value.
    pub(super) fn refresh(&self) {
        let Some(now) = Snapshot::read() else {
            return;
        };
        if let Ok(mut reported) = self.cpu_reported.lock() {
            if now.cpu_seconds > *reported {
                self.cpu.inc_by(now.cpu_seconds - *reported);
                *reported = now.cpu_seconds;
            }
        }
        let set = |g: &Gauge, v: Option<u64>| {
            if let Some(v) = v {
                g.set(i64::try_from(v).unwrap_or(i64::MAX));
            }
        };
        set(&self.resident, now.resident_bytes);
        set(&self.virtual_memory, now.virtual_bytes);
        set(&self.open_fds, now.open_fds);
        set(&self.max_fds, now.max_fds);
        if let Some(t) = now.start_time {
            self.start_time.set(t);
        }
    }
}

/// One reading of `/proc/self`.
#[derive(Debug, Default, PartialEq)]
struct Snapshot {
    cpu_seconds: f64,
    resident_bytes: Option<u64>,
    virtual_bytes: Option<u64>,
    open_fds: Option<u64>,
    max_fds: Option<u64>,
    start_time: Option<f64>,
}

impl Snapshot {
    fn read() -> Option<Snapshot> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
        let boot = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let mut s = Snapshot::parse(&stat, &status, &limits, &boot)?;
        s.open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as u64);
        Some(s)
    }

    /// `stat`: /proc/self/stat; `status`: /proc/self/status; `limits`: /proc/self/limits;
    /// `boot`: /proc/stat (for `btime`, the boot time the start time counts from).
    fn parse(stat: &str, status: &str, limits: &str, boot: &str) -> Option<Snapshot> {
        // The command name (field 2) is in parentheses and may hold spaces: count from after it.
        let fields: Vec<&str> = stat
            .get(stat.rfind(')')? + 1..)?
            .split_whitespace()
            .collect();
        // fields[0] is field 3 (state): field n is fields[n - 3].
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        let cpu_seconds = (field(14)? + field(15)?) as f64 / USER_HZ;
        let kib = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                .map(|k| k * 1024)
        };
        let max_fds = limits
            .lines()
            .find_map(|l| l.strip_prefix("Max open files"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok());
        let btime = boot
            .lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<u64>().ok());
        let start_time = btime
            .zip(field(22))
            .map(|(b, ticks)| b as f64 + ticks as f64 / USER_HZ);
        Some(Snapshot {
            cpu_seconds,
            resident_bytes: kib("VmRSS:"),
            virtual_bytes: kib("VmSize:"),
            open_fds: None,
            max_fds,
            start_time,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn proc_files_are_read_with_spaces_in_the_command_name() {
        let stat = "4242 (guard wire) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 75 0 0 20 0 \
                    9 0 123456 104857600 2560 18446744073709551615";
        let status = "Name:\tguardwire\nVmSize:\t  102400 kB\nVmRSS:\t   10240 kB\n";
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        let boot = "cpu  1 2 3\nbtime 1764000000\n";
        let s = Snapshot::parse(stat, status, limits, boot).unwrap();
        assert_eq!(
            s,
            Snapshot {
                cpu_seconds: 3.25,
                resident_bytes: Some(10240 * 1024),
                virtual_bytes: Some(102400 * 1024),
                open_fds: None,
                max_fds: Some(1024),
                start_time: Some(1764000000.0 + 1234.56),
            }
        );
        assert_eq!(Snapshot::parse("garbage", "", "", ""), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_can_be_read() {
        let s = Snapshot::read().unwrap();
        assert!(
            s.resident_bytes.unwrap() > 0 && s.open_fds.unwrap() > 0,
            "{s:?}"
        );
        assert!(s.start_time.unwrap() > 1.0e9, "{s:?}");
    }
}
