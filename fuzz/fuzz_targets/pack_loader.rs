//! The pack loader: a pack's YAML text through `policy::pack::parse_pack_text` (YAML, then every
//! validator checked: types, params, regexes parsed, schemas and JSON paths read).
//!
//! Input: the pack text (UTF-8; other inputs are skipped, as `read_pack` refuses them).
//!
//! Asserts: no panic (and, through libFuzzer's `-timeout`, no hang); an error names the file it
//! was given. Compiling the accepted validators into a policy (`Policy::compile`: automata,
//! PII recognisers, tokenizer) is left out: at 20 ms to 2 s a pack under the sanitizers it
//! would bring the target down to a few executions a second.
#![no_main]

use guardwire::policy::pack;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = pack::parse_pack_text(Path::new("fuzz.yaml"), text, &Default::default()) {
        assert_eq!(e.file, "fuzz.yaml");
    }
});
