//! The PromptKit check catalog: every type name and alias a pack may use, and the
//! [`CheckType`] that builds it, looked up in the registry ([`CATALOG`], in
//! `src/policy/checks/mod.rs`).
//!
//! Types guardwire implements have one; the others are known (so a pack that uses them gets
//! "not supported yet", not "unknown type") and refused at load — never passed.

use super::checks::{self, CheckType};
pub use super::checks::{Entry, CATALOG};

/// The canonical name of a type name or alias, if the catalog knows it.
pub fn canonical(type_name: &str) -> Option<&'static str> {
    CATALOG
        .iter()
        .find(|e| e.name == type_name || e.aliases.contains(&type_name))
        .map(|e| e.name)
}

/// The check type of a canonical name (`exec`: an `exec:` handler of the config), if
/// guardwire implements it.
pub(super) fn check_type(canonical: &str) -> Option<&'static dyn CheckType> {
    if canonical == "exec" {
        return Some(&checks::judged::EXEC);
    }
    CATALOG
        .iter()
        .find(|e| e.name == canonical)
        .and_then(|e| e.check)
}

/// Why a proxy cannot run `canonical`, for a type the catalog refuses for a reason.
pub(super) fn refusal(canonical: &str) -> Option<&'static str> {
    CATALOG
        .iter()
        .find(|e| e.name == canonical)
        .and_then(|e| e.refused)
}
