//! Compiled policies shared by every route and key that names the same pack files.
//!
//! Compiling a realistic pack (1,000 words, 20 regexes, pii) takes ~150 ms and megabytes of
//! automata; compiled per route and per key, 500 keys naming one pack would take minutes and
//! gigabytes. Here a policy is keyed by its pack files' paths *and contents*: each distinct list
//! is compiled once per load, and a reload reuses the previous load's policy for every list
//! whose files did not change (so it recompiles only what changed).

use super::judged::CheckRefs;
use super::{pack, Policy, PolicyError};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The pack files of a policy, in order, each with the text it was compiled from.
type Sources = Vec<(PathBuf, Arc<str>)>;

/// Policies by their sources. One is built per load; the next load starts from it.
#[derive(Default)]
pub struct PolicyCache {
    compiled: HashMap<Sources, Arc<Policy>>,
    /// The judges and `exec:` handlers the packs were checked against: a load with other
    /// names compiles everything again.
    refs: CheckRefs,
}

/// One load: the files read so far (each read once, however many lists name it), the
/// policies it uses, and the previous load's to reuse.
pub struct PolicyLoader<'a> {
    previous: Option<&'a PolicyCache>,
    texts: HashMap<PathBuf, Arc<str>>,
    used: PolicyCache,
}

impl<'a> PolicyLoader<'a> {
    /// A load that may reuse what `previous` compiled (unchanged files only, checked against
    /// the same `refs`).
    pub fn new(previous: Option<&'a PolicyCache>, refs: CheckRefs) -> PolicyLoader<'a> {
        PolicyLoader {
            previous: previous.filter(|p| p.refs == refs),
            texts: HashMap::new(),
            used: PolicyCache {
                compiled: HashMap::new(),
                refs,
            },
        }
    }

    /// The policy of these pack files, in order: compiled at most once per load, and not at
    /// all when the previous load compiled the same files with the same contents.
    pub fn policy(&mut self, paths: &[PathBuf]) -> Result<Arc<Policy>, PolicyError> {
        let mut sources = Vec::with_capacity(paths.len());
        for path in paths {
            sources.push((path.clone(), self.text(path)?));
        }
        if let Some(p) = self.used.compiled.get(&sources) {
            return Ok(Arc::clone(p));
        }
        let policy = match self.previous.and_then(|c| c.compiled.get(&sources)) {
            Some(p) => Arc::clone(p),
            None => Arc::new(compile(&sources, &self.used.refs)?),
        };
        self.used.compiled.insert(sources, Arc::clone(&policy));
        Ok(policy)
    }

    /// What this load compiled or reused, for the next one.
    pub fn finish(self) -> PolicyCache {
        self.used
    }

    fn text(&mut self, path: &Path) -> Result<Arc<str>, PolicyError> {
        if let Some(t) = self.texts.get(path) {
            return Ok(Arc::clone(t));
        }
        let text: Arc<str> = pack::read_pack(path)?.into();
        self.texts.insert(path.to_path_buf(), Arc::clone(&text));
        Ok(text)
    }
}

impl PolicyCache {
    /// How many distinct policies the load compiled or reused.
    pub fn len(&self) -> usize {
        self.compiled.len()
    }

    pub fn is_empty(&self) -> bool {
        self.compiled.is_empty()
    }

    /// Every distinct policy of the load.
    pub fn policies(&self) -> impl Iterator<Item = &Arc<Policy>> {
        self.compiled.values()
    }

    /// Feeds every pack list's paths and texts to `state`, in an order that does not depend on
    /// the map's (so equal loads hash equal).
    pub fn hash_sources(&self, state: &mut impl std::hash::Hasher) {
        use std::hash::Hash;
        let mut lists: Vec<&Sources> = self.compiled.keys().collect();
        lists.sort();
        lists.hash(state);
    }
}

fn compile(sources: &Sources, refs: &CheckRefs) -> Result<Policy, PolicyError> {
    let mut packs = Vec::new();
    for (path, text) in sources {
        packs.push(pack::parse_pack_text(path, text, refs)?);
    }
    let mut policy = Policy::compile_packs(packs)?;
    policy.packs = sources
        .iter()
        .map(|(p, _)| p.display().to_string())
        .collect();
    Ok(policy)
}
