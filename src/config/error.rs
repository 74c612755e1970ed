//! Why a config could not be loaded. A file of its own, importing nothing: `crate::error`
//! names it (a start or reload refused), and the rest of `config` imports the protocol
//! registry, which imports `crate::error`.

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {0}: not found")]
    Missing(String),
    #[error("{0}")]
    Invalid(String),
}
