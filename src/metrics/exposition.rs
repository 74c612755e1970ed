//! The two text formats `/metrics` answers in, and the conversion between them.

/// The formats `/metrics` answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    /// Prometheus' text format 0.0.4: what a scraper gets unless it asks for OpenMetrics, and
    /// what promtool checks.
    Text004,
    /// OpenMetrics 1.0, for a scraper whose `Accept` names `application/openmetrics-text`.
    OpenMetrics,
}

impl Exposition {
    /// The format a scraper's `Accept` header asks for.
    pub fn negotiate(accept: Option<&str>) -> Exposition {
        match accept {
            Some(a)
                if a.to_ascii_lowercase()
                    .contains("application/openmetrics-text") =>
            {
                Exposition::OpenMetrics
            }
            _ => Exposition::Text004,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::Text004 => "text/plain; version=0.0.4; charset=utf-8",
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// Rewrites prometheus-client's OpenMetrics text as text format 0.0.4. The samples are the
/// same; the metadata differs: a counter's `# HELP` and `# TYPE` name its samples (`x_total`,
/// where OpenMetrics names the family `x`), an info family is a gauge named `x_info`, and
/// there is no `# UNIT` or `# EOF`.
pub(super) fn openmetrics_to_text004(om: &str) -> String {
    // A family's TYPE comes after its HELP: find the types first.
    let mut renamed: Vec<(&str, &str, &str)> = Vec::new(); // (family, sample name suffix, 0.0.4 type)
    for line in om.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            match rest.split_once(' ') {
                Some((name, "counter")) => renamed.push((name, "_total", "counter")),
                Some((name, "info")) => renamed.push((name, "_info", "gauge")),
                _ => {}
            }
        }
    }
    let rename = |name: &str| renamed.iter().find(|(n, ..)| *n == name).copied();
    let mut out = String::with_capacity(om.len());
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = line
            .strip_prefix("# HELP ")
            .map(|r| ("# HELP ", r))
            .or_else(|| line.strip_prefix("# TYPE ").map(|r| ("# TYPE ", r)));
        match meta {
            Some((kind, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                match rename(name) {
                    Some((_, suffix, ty)) if kind == "# TYPE " => {
                        out.push_str(&format!("# TYPE {name}{suffix} {ty}"));
                    }
                    Some((_, suffix, _)) => out.push_str(&format!("{kind}{name}{suffix} {tail}")),
                    None => out.push_str(line),
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_004_names_counters_by_their_samples_and_drops_openmetrics_markers() {
        let om = "# HELP gw_requests Requests.\n# TYPE gw_requests counter\n\
                  gw_requests_total{route=\"a\"} 2\n# HELP gw_build Build.\n# TYPE gw_build info\n\
                  gw_build_info{version=\"1\"} 1\n# HELP gw_up Up.\n# TYPE gw_up gauge\n\
                  # UNIT gw_up seconds\ngw_up 1\n# EOF\n";
        assert_eq!(
            openmetrics_to_text004(om),
            "# HELP gw_requests_total Requests.\n# TYPE gw_requests_total counter\n\
             gw_requests_total{route=\"a\"} 2\n# HELP gw_build_info Build.\n# TYPE gw_build_info gauge\n\
             gw_build_info{version=\"1\"} 1\n# HELP gw_up Up.\n# TYPE gw_up gauge\ngw_up 1\n"
        );
    }

    #[test]
    fn openmetrics_only_when_asked_for() {
        assert_eq!(Exposition::negotiate(None), Exposition::Text004);
        assert_eq!(
            Exposition::negotiate(Some("text/plain;version=0.0.4;q=0.5,*/*;q=0.1")),
            Exposition::Text004
        );
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(
            Exposition::negotiate(Some(prometheus)),
            Exposition::OpenMetrics
        );
    }
}
