//! The in-process session store and the view a request opens.
#![allow(clippy::unwrap_used, clippy::panic)]
use super::*;

fn key(session: Option<&str>) -> Key {
    key_of("k", session)
}

fn key_of(key_id: &'static str, session: Option<&str>) -> Key {
    Key {
        key_id: Some(key_id),
        route: "r",
        session: session.map(Into::into),
    }
}

/// The value of a future that is ready at once (the in-process store's are).
fn now<T>(fut: impl Future<Output = T>) -> T {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("the in-process store made a request wait"),
    }
}

trait Commit {
    fn commit_now(&mut self);
}

impl Commit for SessionView {
    fn commit_now(&mut self) {
        now(self.commit()).unwrap();
    }
}

/// The store as the gateway holds it, and the view a request opens.
struct Store(Arc<dyn SessionStore>, Arc<LocalSessions>);

impl Store {
    fn new() -> Store {
        let local = Arc::new(LocalSessions::default());
        Store(local.clone(), local)
    }

    fn view(&self, key: Key) -> SessionView {
        now(open(&self.0, key, false)).unwrap()
    }

    fn end(&self, key: &Key) {
        now(self.0.end(key)).unwrap()
    }

    fn held(&self) -> usize {
        self.1.held()
    }
}

#[test]
fn calls_are_kept_per_session_and_bounded() {
    let store = Store::new();
    let mut v = store.view(key(Some("a")));
    v.called("add", "{}");
    v.called("add", "{}");
    assert_eq!(v.history().calls.len(), 2, "later calls of one POST see it");
    v.commit_now();
    assert_eq!(store.view(key(Some("a"))).history().calls.len(), 2);
    assert!(store.view(key(Some("b"))).history().calls.is_empty());
    let other_key = Key {
        key_id: Some("other"),
        ..key(Some("a"))
    };
    assert!(store.view(other_key).history().calls.is_empty());
    // Without a session nothing is counted.
    let mut v = store.view(key(None));
    v.called("add", "{}");
    v.commit_now();
    assert!(store.view(key(None)).history().calls.is_empty());
    // Long arguments are unreadable; the oldest calls go past the byte bound.
    let mut v = store.view(key(Some("a")));
    for _ in 0..100 {
        v.called("echo", &"x".repeat(MAX_ARGS_BYTES + 1));
        v.called("echo", &format!("\"{}\"", "y".repeat(1000)));
    }
    v.commit_now();
    let h = store.view(key(Some("a"))).history();
    let bytes: usize = h.calls.iter().map(|c| c.name.len() + c.args.len()).sum();
    assert!(bytes <= MAX_SESSION_BYTES, "{bytes}");
    assert!(h.calls.iter().any(|c| c.args == UNREADABLE_ARGS));
    assert!(h.calls.iter().all(|c| c.args.len() <= MAX_ARGS_BYTES));
    store.end(&key(Some("a")));
    assert!(store.view(key(Some("a"))).history().calls.is_empty());
}

#[test]
fn a_key_at_its_quota_evicts_its_own_least_recently_used() {
    let store = Store::new();
    let mut other = store.view(key_of("other", Some("b")));
    other.called("add", "{}");
    other.commit_now();
    for i in 0..MAX_SESSIONS_PER_KEY + 10 {
        let mut v = store.view(key(Some(&i.to_string())));
        v.called("add", "{}");
        v.commit_now();
        if i == 100 {
            // Used again later: the oldest by use are evicted, not by creation.
            let _ = store.view(key(Some("5")));
        }
    }
    assert_eq!(store.held(), MAX_SESSIONS_PER_KEY + 1);
    assert_eq!(store.view(key(Some("5"))).history().calls.len(), 1);
    assert!(store.view(key(Some("0"))).history().calls.is_empty());
    let b = store.view(key_of("other", Some("b")));
    assert_eq!(
        b.history().calls.len(),
        1,
        "another key's session is untouched"
    );
}

#[test]
fn at_the_total_the_key_holding_most_loses_a_session() {
    let store = Store::new();
    let keys: Vec<&'static str> = (0..MAX_SESSIONS / MAX_SESSIONS_PER_KEY)
        .map(|k| &*Box::leak(format!("key{k}").into_boxed_str()))
        .collect();
    // Every key but the last at its quota; the last holds one session.
    for (k, id) in keys.iter().enumerate() {
        let n = match k + 1 == keys.len() {
            true => MAX_SESSIONS_PER_KEY - 1,
            false => MAX_SESSIONS_PER_KEY,
        };
        for i in 0..n {
            let mut v = store.view(key_of(id, Some(&i.to_string())));
            v.called("add", "{}");
            v.commit_now();
        }
    }
    let small = "small";
    let mut v = store.view(key_of(small, Some("s")));
    v.called("add", "{}");
    v.commit_now();
    assert_eq!(store.held(), MAX_SESSIONS);
    // Another session of the small key: a key holding the most loses its oldest.
    let mut v = store.view(key_of(small, Some("t")));
    v.called("add", "{}");
    v.commit_now();
    assert_eq!(store.held(), MAX_SESSIONS);
    let kept =
        |k: &'static str, s: &str| !store.view(key_of(k, Some(s))).history().calls.is_empty();
    assert!(kept(small, "s") && kept(small, "t"));
    let lost: Vec<_> = keys.iter().filter(|k| !kept(k, "0")).collect();
    assert_eq!(lost.len(), 1, "one full key lost its oldest: {lost:?}");
    assert_ne!(Some(lost[0]), keys.last(), "not the key holding fewer");
}

#[test]
fn loading_makes_no_session_and_forgotten_calls_stay_counted() {
    let store = Store::new();
    for i in 0..10 {
        let _ = store.view(key(Some(&i.to_string())));
    }
    assert_eq!(store.held(), 0, "a load makes nothing");
    let mut v = store.view(key(Some("long")));
    let args = format!(r#"{{"pad":"{}"}}"#, "x".repeat(100));
    for _ in 0..5000 {
        v.called("add", &args);
    }
    v.commit_now();
    let h = store.view(key(Some("long"))).history();
    assert!(h.calls.len() < 5000, "the history is bounded");
    assert_eq!(h.calls.len() as u64 + h.forgotten.count(Some("add")), 5000);
    assert_eq!(h.calls.len() as u64 + h.forgotten.calls(), 5000);
}

#[test]
fn removed_tools_are_remembered_without_a_session_too() {
    let store = Store::new();
    let mut v = store.view(key(None));
    v.tool_removed("weather", "no-injection");
    assert_eq!(v.removed_by("weather"), Some("no-injection"));
    let v = store.view(key(None));
    assert_eq!(v.removed_by("weather"), Some("no-injection"));
    assert_eq!(v.removed_by("add"), None);
    assert_eq!(store.view(key(Some("s"))).removed_by("weather"), None);
    let long = "t".repeat(1000);
    let mut v = store.view(key(Some("s")));
    v.tool_removed(&long, "x");
    assert_eq!(store.view(key(Some("s"))).removed_by(&long), Some("x"));
    for i in 0..MAX_REMOVED + 1 {
        v.tool_removed(&format!("tool{i}"), "x");
    }
    let v = store.view(key(Some("s")));
    assert_eq!(v.removed_by("tool0"), None, "the oldest name went");
    assert_eq!(v.removed_by(&format!("tool{MAX_REMOVED}")), Some("x"));
}
