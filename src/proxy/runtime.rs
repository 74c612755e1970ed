//! What a request runs on, swapped as a whole on reload: the routes (configured ones, then one
//! per protocol), their compiled policies, the client keys, the audit log and client TLS.

use super::auth;
use crate::audit::Audit;
use crate::config::{AuthHeader, Config, PoisonedTools, StoredContext, UnknownContent};
use crate::error::StartError;
use crate::policy::judged::CheckRefs;
use crate::policy::{Policy, PolicyCache, PolicyError, PolicyLoader};
use crate::protocol::Protocol;
use crate::upstream::UpstreamBase;
use std::sync::Arc;

/// One path family served by one protocol and one upstream.
pub struct Route {
    /// The `route` metrics label.
    pub name: &'static str,
    pub protocol: &'static dyn Protocol,
    /// `None` when the provider is not configured: its paths answer 404.
    pub upstream: Option<UpstreamBase>,
    pub policy: Arc<Policy>,
    /// A configured route's path prefix; `None` for the protocol's standard paths.
    pub prefix: Option<String>,
    /// Removed from the path before forwarding.
    pub strip_prefix: Option<String>,
    /// Paths of a configured route forwarded unchecked (`routes[].passthrough_paths`).
    pub passthrough: Vec<String>,
    /// The header a swapped-in provider key goes in.
    pub auth_header: AuthHeader,
    /// What happens to answer strings the protocol's decoder does not model.
    pub unknown_content: UnknownContent,
    /// What happens to requests that refer to provider-stored content.
    pub stored_context: StoredContext,
    /// Streamed OpenAI-style requests ask for usage (`routes[].request_usage`).
    pub request_usage: bool,
    /// Request headers forwarded besides the protocol's allowlist (`forward_headers`).
    pub forward_headers: Vec<http::HeaderName>,
    /// Where clients reach the route's prefix, for discovery documents (`routes[].public_url`).
    pub public_url: Option<String>,
    /// MCP routes: what a `tools/list` answer does with a tool that fails the checks.
    pub poisoned_tools: PoisonedTools,
}

/// Everything a request needs that can be swapped as a whole on reload.
pub struct Runtime {
    pub config: Config,
    /// Configured routes (longest prefix first), then one per protocol.
    pub routes: Vec<Route>,
    pub audit: Arc<Audit>,
    /// The body capture (`capture:`), when `capture.path` is set.
    pub capture: Option<Arc<crate::capture::Capture>>,
    /// Client keys; when not empty, every proxied request needs one.
    pub keys: Vec<auth::ClientKey>,
    /// TLS for client connections, when configured.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The judges and `exec:` handlers judged checks call, with their gates.
    pub judges: Arc<crate::judge::Judges>,
    /// The same judges and handlers behind gates of their own, for the packs' `evals:`.
    pub eval_judges: Arc<crate::judge::Judges>,
    /// The distinct compiled policies of routes and keys, reused by the next reload for every
    /// pack list whose files did not change.
    pub policies: PolicyCache,
    /// A hash of the config (as parsed, environment included) and of every pack file's text:
    /// 48 bits, for the `guardwire_config_hash` gauge.
    pub config_hash: u64,
    /// The values the metrics' `model` label may take (`metrics.models` and the models of
    /// `prices`), longest first.
    model_labels: Vec<&'static str>,
}

impl Route {
    /// The path (and query) a request for `path_and_query` goes upstream with: the route's
    /// `strip_prefix` removed.
    pub fn forwarded<'p>(&self, path_and_query: &'p str) -> std::borrow::Cow<'p, str> {
        let Some(rest) = self
            .strip_prefix
            .as_deref()
            .and_then(|s| path_and_query.strip_prefix(s))
        else {
            return path_and_query.into();
        };
        if rest.starts_with('/') {
            rest.into()
        } else {
            format!("/{rest}").into()
        }
    }
}

fn header_names(list: &[crate::config::ForwardHeader]) -> Vec<http::HeaderName> {
    list.iter().map(|h| h.0.clone()).collect()
}

impl Runtime {
    /// Builds one route per protocol and compiles the packs named in `config` (each distinct
    /// list of pack files once, however many routes and keys name it).
    pub fn build(config: Config) -> Result<Runtime, StartError> {
        Self::build_after(config, None)
    }

    /// Like [`Runtime::build`], reusing `previous`'s compiled policy for every pack list whose
    /// files have the same contents (a reload compiles only what changed).
    pub fn build_after(config: Config, previous: Option<&Runtime>) -> Result<Runtime, StartError> {
        let refs = check_refs(&config)?;
        let judges = crate::judge::Judges::build(&config, previous.map(|r| &*r.judges), "")
            .map_err(StartError::Setup)?;
        let eval_judges =
            crate::judge::Judges::build(&config, previous.map(|r| &*r.eval_judges), "eval:")
                .map_err(StartError::Setup)?;
        let mut runtime = Self::compile(
            config,
            PolicyLoader::new(previous.map(|r| &r.policies), refs),
            [Arc::new(judges), Arc::new(eval_judges)],
        );
        crate::heap::release_unused();
        // A key's requests still running on the old runtime keep counting against its limit.
        if let (Ok(rt), Some(previous)) = (&mut runtime, previous) {
            for key in &mut rt.keys {
                if let Some(was) = previous.keys.iter().find(|k| k.id == key.id) {
                    key.in_flight = Arc::clone(&was.in_flight);
                }
            }
        }
        // The body capture's writer goes on across a reload that leaves `capture:` as it was.
        if let Ok(rt) = &mut runtime {
            let running = previous
                .and_then(|p| p.capture.as_ref())
                .filter(|c| c.settings == rt.config.capture);
            rt.capture = match running {
                Some(c) => Some(Arc::clone(c)),
                None => {
                    crate::capture::Capture::open(&rt.config.capture).map_err(StartError::Setup)?
                }
            };
        }
        runtime
    }

    fn compile(
        config: Config,
        mut loader: PolicyLoader<'_>,
        [judges, eval_judges]: [Arc<crate::judge::Judges>; 2],
    ) -> Result<Runtime, StartError> {
        let policy = loader
            .policy(&config.packs)
            .map_err(packs_error(&config, "packs".into()))?;
        let audit = Arc::new(Audit::open(&config.audit).map_err(StartError::Setup)?);
        let upstream = |url: &crate::config::BaseUrl| {
            UpstreamBase::new(url).map_err(|e| StartError::Setup(format!("upstream {e}")))
        };
        let mut configured: Vec<_> = config.routes.iter().enumerate().collect();
        configured.sort_by_key(|(_, r)| std::cmp::Reverse(r.path_prefix.len()));
        let mut routes = Vec::new();
        for (i, rc) in configured {
            let checked = rc.checked.as_ref().ok_or_else(|| {
                StartError::Setup(format!(
                    "routes ({}): the config was not validated",
                    rc.name
                ))
            })?;
            let protocol = crate::protocol::by_id(checked.protocol);
            routes.push(Route {
                name: auth::intern(&rc.name),
                protocol,
                upstream: Some(upstream(&checked.upstream)?),
                policy: match &rc.packs {
                    Some(packs) => loader.policy(packs).map_err(packs_error(
                        &config,
                        format!("routes[{i}] ({}).packs", rc.name),
                    ))?,
                    None => Arc::clone(&policy),
                },
                prefix: Some(rc.path_prefix.clone()),
                strip_prefix: rc.strip_prefix.clone(),
                passthrough: rc.passthrough_paths.clone(),
                auth_header: checked.upstream_auth.unwrap_or(protocol.auth_header()),
                unknown_content: rc.unknown_content.unwrap_or(config.unknown_content),
                stored_context: rc.stored_context.unwrap_or(config.stored_context),
                request_usage: rc.request_usage,
                poisoned_tools: rc.poisoned_tools.unwrap_or_default(),
                forward_headers: header_names(
                    rc.forward_headers
                        .as_deref()
                        .unwrap_or(&config.forward_headers),
                ),
                public_url: rc.public_url.clone(),
            });
        }
        for protocol in crate::protocol::all() {
            routes.push(Route {
                name: protocol.name(),
                protocol,
                upstream: match config.upstreams.get(protocol.provider()) {
                    Some(url) => Some(upstream(url)?),
                    None => None,
                },
                policy: Arc::clone(&policy),
                prefix: None,
                strip_prefix: None,
                passthrough: Vec::new(),
                auth_header: protocol.auth_header(),
                unknown_content: config.unknown_content,
                stored_context: config.stored_context,
                request_usage: true,
                poisoned_tools: PoisonedTools::default(),
                forward_headers: header_names(&config.forward_headers),
                public_url: None,
            });
        }
        let mut keys = Vec::new();
        for (i, k) in config.keys.iter().enumerate() {
            let setup = |e: String| StartError::Setup(format!("keys[{i}] ({}): {e}", k.id));
            let key_policy = match &k.packs {
                Some(packs) => Some(
                    loader
                        .policy(packs)
                        .map_err(packs_error(&config, format!("keys[{i}] ({}).packs", k.id)))?,
                ),
                None => None,
            };
            let mut key = auth::ClientKey::new(
                &k.id,
                k.secret().map_err(setup)?,
                key_policy,
                k.upstream_key().map_err(setup)?,
            );
            key.max_in_flight = k.max_concurrent_requests;
            key.limits = k.limits().map_err(setup)?.map(Arc::new);
            keys.push(key);
        }
        check_mcp_tool_checks(&config, &routes, &keys)?;
        let tls = match &config.tls {
            Some(t) => Some(crate::tls::server_config(t).map_err(StartError::Setup)?),
            None => None,
        };
        let policies = loader.finish();
        check_eval_metrics(&policies)?;
        let config_hash = {
            use std::hash::{Hash, Hasher};
            let mut h = std::hash::DefaultHasher::new();
            // Secrets only as digests: the gauge is read by whoever scrapes /metrics.
            format!("{:?}", config.with_secrets_digested()).hash(&mut h);
            policies.hash_sources(&mut h);
            h.finish() >> 16
        };
        let mut model_labels: Vec<&'static str> = config
            .metrics
            .models
            .iter()
            .chain(config.prices.keys())
            .map(|m| auth::intern(m))
            .collect();
        model_labels.sort_by_key(|m| (std::cmp::Reverse(m.len()), *m));
        model_labels.dedup();
        Ok(Runtime {
            config,
            routes,
            audit,
            capture: None,
            keys,
            tls,
            judges,
            eval_judges,
            policies,
            config_hash,
            model_labels,
        })
    }

    /// The metrics' `model` label for a requested model: the longest configured name it starts
    /// with (as prices match), else `other`.
    pub fn model_label(&self, model: Option<&str>) -> &'static str {
        model
            .and_then(|m| self.model_labels.iter().find(|l| m.starts_with(**l)))
            .copied()
            .unwrap_or("other")
    }

    pub(super) fn route_for(&self, path: &str) -> Option<&Route> {
        self.routes.iter().find(|r| match &r.prefix {
            Some(prefix) => path.starts_with(prefix.as_str()),
            None => r.protocol.matches(path),
        })
    }
}

/// The judges and `exec:` handlers packs may name; a handler may not take a catalog type's name.
/// The names the config's packs may refer to (judges, `exec:` handlers, embedders, `pack_env`).
pub fn check_refs(config: &Config) -> Result<CheckRefs, StartError> {
    if let Some(name) = config
        .exec
        .keys()
        .find(|n| crate::policy::catalog::canonical(n).is_some())
    {
        return Err(StartError::Setup(format!(
            "exec.{name}: the name is a check type of the PromptKit catalog; pick another"
        )));
    }
    Ok(CheckRefs {
        judges: config.judges.iter().map(|j| j.name.clone()).collect(),
        exec: config.exec.keys().cloned().collect(),
        embedders: config
            .judges
            .iter()
            .filter(|j| j.protocol != "anthropic_messages")
            .map(|j| (j.name.clone(), j.embedding_model.clone()))
            .collect(),
        env: config.pack_env.clone(),
        wordnet_dir: Some(config.evals.wordnet_dir.clone()),
    })
}

/// Every policy's evals that declare one metric agree on its type and label names (a
/// metric is one family on `/metrics`, whichever route's eval records it).
fn check_eval_metrics(policies: &PolicyCache) -> Result<(), StartError> {
    let mut seen: std::collections::HashMap<&str, (&crate::policy::evals::Eval, &str)> =
        std::collections::HashMap::new();
    for policy in policies.policies() {
        for e in policy.evals() {
            let Some(m) = &e.metric else { continue };
            let Some((other, file)) = seen.get(m.name.as_str()) else {
                seen.insert(&m.name, (e, &e.validator.file));
                continue;
            };
            let o = other
                .metric
                .as_ref()
                .map(|o| (o.kind, o.labels.iter().map(|l| &l.0).collect::<Vec<_>>()));
            if o != Some((m.kind, m.labels.iter().map(|l| &l.0).collect())) {
                return Err(StartError::Setup(format!(
                    "{}: evals `{}`: the metric `{}` has another type or label names in {} (eval `{}`)",
                    e.validator.file, e.id, m.name, file, other.id
                )));
            }
        }
    }
    Ok(())
}

/// Names the config key (and the file) of a pack list that failed to load.
/// Tool checks an MCP session cannot judge are refused on MCP routes — in the route's packs,
/// and in every key's own packs (a key's packs apply on every route) — rather than never
/// firing there.
fn check_mcp_tool_checks(
    config: &Config,
    routes: &[Route],
    keys: &[auth::ClientKey],
) -> Result<(), StartError> {
    // The built-in route of each protocol has no upstream unless the config names one.
    let mut mcp = routes
        .iter()
        .filter(|r| r.protocol.id() == crate::protocol::ProtocolId::Mcp && r.upstream.is_some());
    let Some(first) = mcp.next() else {
        return Ok(());
    };
    let in_file = match &config.file {
        Some(file) => format!(" in {}", file.display()),
        None => String::new(),
    };
    let of_routes = std::iter::once(first)
        .chain(mcp)
        .map(|r| (format!("the packs of MCP route {}", r.name), &*r.policy));
    let of_keys = keys.iter().filter_map(|k| {
        let p = k.policy.as_deref()?;
        Some((
            format!(
                "keys ({}).packs, which apply on MCP route {}",
                k.id, first.name
            ),
            p,
        ))
    });
    for (origin, policy) in of_routes.chain(of_keys) {
        if let Some((label, why)) = policy.unjudged_on_mcp() {
            return Err(StartError::Setup(format!(
                "{origin}{in_file}: validator or eval '{label}' cannot run on an MCP route: {why} (docs/mcp.md, Sessions)"
            )));
        }
    }
    Ok(())
}

fn packs_error(config: &Config, key: String) -> impl FnOnce(PolicyError) -> StartError + '_ {
    move |source| StartError::Packs {
        origin: match &config.file {
            Some(file) => format!("{key} in {}", file.display()),
            None => key,
        },
        source,
    }
}
