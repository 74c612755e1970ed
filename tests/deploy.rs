//! The deployment package (`deploy/`) against the tools a platform team's pipeline runs on it:
//! hadolint and checkov on the Dockerfile, kubernetes-validate (strict, Kubernetes 1.37
//! schemas) and checkov on the manifests, `systemd-analyze security` on the unit. The linters
//! come from tests/deploy/requirements.txt (tests/run installs them into target/ops-venv and
//! sets GUARDWIRE_OPS_BIN), so those tests are `#[ignore]`d in a plain `cargo test`. The
//! manifest's ConfigMap is also loaded by the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A linter of target/ops-venv (or GUARDWIRE_OPS_BIN).
fn ops(name: &str) -> PathBuf {
    std::env::var_os("GUARDWIRE_OPS_BIN")
        .map_or_else(
            || Path::new(ROOT).join("target/ops-venv/bin"),
            PathBuf::from,
        )
        .join(name)
}

/// Runs `program` in the repository; (exit success, stdout + stderr).
fn run(program: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(program)
        .args(args)
        .current_dir(ROOT)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (tests/run installs it from tests/deploy/requirements.txt)",
                program.display()
            )
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// checkov on `files`: every check passes and none is skipped.
fn checkov(framework: &str, files: &[&str]) {
    // --skip-download: no guidelines fetched from Prisma Cloud (tests stay on 127.0.0.1).
    let mut args = vec!["--framework", framework, "--compact", "--skip-download"];
    for f in files {
        args.extend(["-f", f]);
    }
    let (ok, out) = run(&ops("checkov"), &args);
    assert!(ok, "checkov: {out}");
    assert!(
        out.contains("Failed checks: 0, Skipped checks: 0") && !out.contains("Passed checks: 0,"),
        "checkov: {out}"
    );
}

#[test]
#[ignore = "needs hadolint and checkov (tests/run installs them)"]
fn the_dockerfile_passes_hadolint_and_checkov() {
    let (ok, out) = run(&ops("hadolint"), &["deploy/Dockerfile"]);
    assert!(ok && out.trim().is_empty(), "hadolint: {out}");
    checkov("dockerfile", &["deploy/Dockerfile"]);
}

#[test]
#[ignore = "needs kubernetes-validate and checkov (tests/run installs them)"]
fn the_kubernetes_manifests_pass_kubernetes_validate_and_checkov() {
    let (ok, out) = run(
        &ops("kubernetes-validate"),
        &["--strict", "deploy/kubernetes.yaml"],
    );
    assert!(ok, "kubernetes-validate: {out}");
    for kind in [
        "namespace",
        "configmap",
        "deployment",
        "service",
        "poddisruptionbudget",
        "horizontalpodautoscaler",
        "networkpolicy",
    ] {
        assert!(
            out.contains(&format!("passed for resource {kind}/")),
            "{kind}: {out}"
        );
    }
    checkov(
        "kubernetes",
        &[
            "deploy/kubernetes.yaml",
            "deploy/kubernetes-servicemonitor.yaml",
        ],
    );
}

#[test]
#[ignore = "needs systemd-analyze (Debian package systemd; tests/run installs it)"]
fn the_systemd_unit_is_sandboxed() {
    let (ok, out) = run(
        Path::new("systemd-analyze"),
        &["security", "--offline=true", "deploy/guardwire.service"],
    );
    assert!(ok, "systemd-analyze: {out}");
    let level = out
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for guardwire.service: ")
                .nth(1)
        })
        .unwrap_or_else(|| panic!("no exposure level in {out}"));
    let rating = level.split_whitespace().nth(1).unwrap_or("");
    // systemd's scale, best first: PERFECT, SAFE, OK, MEDIUM, EXPOSED, UNSAFE.
    assert!(
        ["PERFECT", "SAFE", "OK", "MEDIUM"].contains(&rating),
        "rated {level}"
    );
}

/// The manifest's ConfigMap holds a config the real binary loads, and the repository's default
/// pack unchanged (so the two cannot drift apart).
#[test]
fn the_kubernetes_configmap_loads_and_carries_the_default_pack() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("deploy/kubernetes.yaml")).unwrap();
    let configmap = serde_norway::Deserializer::from_str(&text)
        .map(|doc| <serde_json::Value as serde::Deserialize>::deserialize(doc).unwrap())
        .find(|doc| doc["kind"] == "ConfigMap")
        .expect("a ConfigMap");
    let data = &configmap["data"];
    let pack = data["default.yaml"].as_str().unwrap();
    let shipped =
        std::fs::read_to_string(Path::new(ROOT).join("config/packs/default.yaml")).unwrap();
    assert_eq!(
        pack, shipped,
        "the ConfigMap's pack is config/packs/default.yaml"
    );
    // Laid out as the Deployment mounts it: /app/config/{guardwire.yaml, packs/default.yaml}.
    let app = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(app.path().join("config/packs")).unwrap();
    let config = data["guardwire.yaml"].as_str().unwrap();
    std::fs::write(app.path().join("config/guardwire.yaml"), config).unwrap();
    std::fs::write(app.path().join("config/packs/default.yaml"), pack).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_guardwire"))
        .args(["check", "--config", "config/guardwire.yaml"])
        .current_dir(app.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("listen 0.0.0.0:8080"), "{text}");
    assert!(text.contains("pack config/packs/default.yaml"), "{text}");
}

/// The YAML documents of a file under deploy/.
fn documents(file: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(Path::new(ROOT).join(file)).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| <serde_json::Value as serde::Deserialize>::deserialize(doc).unwrap())
        .collect()
}

/// The ServiceMonitor scrapes the operators' port (admin.listen), which only a Service of its
/// own carries: the clients' Service has no /metrics to offer.
#[test]
fn the_service_monitor_scrapes_the_operators_port_not_the_clients() {
    let manifests = documents("deploy/kubernetes.yaml");
    let monitor = documents("deploy/kubernetes-servicemonitor.yaml");
    let monitor = monitor
        .iter()
        .find(|d| d["kind"] == "ServiceMonitor")
        .unwrap();
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["path"], "/metrics");
    let port_name = endpoint["port"].as_str().unwrap();
    let selector = monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap();
    let services: Vec<&serde_json::Value> = manifests
        .iter()
        .filter(|d| d["kind"] == "Service")
        .collect();
    let selected: Vec<&&serde_json::Value> = services
        .iter()
        .filter(|s| {
            selector
                .iter()
                .all(|(k, v)| s["metadata"]["labels"][k.as_str()] == *v)
        })
        .collect();
    assert_eq!(selected.len(), 1, "the ServiceMonitor selects one Service");
    let port = selected[0]["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == port_name)
        .expect("the scraped port is on the selected Service");
    let number = port["port"].as_u64().unwrap();
    // That is admin.listen's port, and the container names it.
    let configmap = manifests.iter().find(|d| d["kind"] == "ConfigMap").unwrap();
    let config: serde_json::Value =
        serde_norway::from_str(configmap["data"]["guardwire.yaml"].as_str().unwrap()).unwrap();
    let listen = config["admin"]["listen"].as_str().unwrap();
    assert!(listen.ends_with(&format!(":{number}")), "{listen}");
    assert!(
        config["admin"]["token"].is_null(),
        "no token: the clients' port serves no /metrics"
    );
    let deployment = manifests
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .unwrap();
    let container_ports = &deployment["spec"]["template"]["spec"]["containers"][0]["ports"];
    assert!(container_ports
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["containerPort"].as_u64() == Some(number) && p["name"] == port["targetPort"]));
    // No other Service carries it.
    for s in services.iter().filter(|s| !std::ptr::eq(**s, *selected[0])) {
        for p in s["spec"]["ports"].as_array().unwrap() {
            assert_ne!(p["port"].as_u64(), Some(number), "{s}");
        }
    }
}
