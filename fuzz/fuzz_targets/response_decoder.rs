//! Every protocol's whole-answer decoder (`Protocol::decode_response`).
//!
//! Input: byte 0 picks the protocol (`protocol::all()[b % n]`, as in `stream_decoder`); the rest
//! is a response body.
//!
//! Asserts: no panic; decoding the same body twice gives the same deltas (no hidden state).
#![no_main]

use guardwire::protocol;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&head, body)) = data.split_first() else {
        return;
    };
    let all = protocol::all();
    let proto = all[usize::from(head) % all.len()];
    let mut first = Vec::new();
    let ok = proto.decode_response(body, &mut first).is_ok();
    if ok {
        let mut second = Vec::new();
        assert!(proto.decode_response(body, &mut second).is_ok());
        assert_eq!(first, second);
    }
});
