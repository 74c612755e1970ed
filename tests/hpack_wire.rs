//! Credentials are never indexed by HPACK on upstream HTTP/2 connections, on the wire.
//!
//! The upstream is a raw HTTP/2 peer over TLS (ALPN `h2`, as guardwire reaches HTTP/2
//! upstreams): it reads the frames guardwire sends, decodes each request's header block with an
//! independent HPACK decoder (`httlib-hpack`, which reports the representation's flags) and
//! answers an empty 200. Two requests share the connection, so a credential indexed by the first
//! would be sent as a table index by the second.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::proxy::*;
use httlib_hpack::Decoder;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const PACK: &str = "validators: []\n";

/// One decoded header field: name, value, flags (`Decoder::NEVER_INDEXED`, `WITH_INDEXING`).
type Field = (String, String, u8);

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Serves one TLS connection as a bare HTTP/2 server: every request's decoded header block is
/// pushed to `seen`, and answered `:status 200` with no body.
async fn h2_upstream(
    listener: TcpListener,
    tls: tokio_rustls::TlsAcceptor,
    seen: Arc<Mutex<Vec<Vec<Field>>>>,
) {
    let (tcp, _) = listener.accept().await.unwrap();
    let mut s = tls.accept(tcp).await.unwrap();
    let mut preface = [0u8; 24];
    s.read_exact(&mut preface).await.unwrap();
    assert_eq!(&preface, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    s.write_all(&frame(4, 0, 0, &[])).await.unwrap();
    let mut decoder = Decoder::default();
    let mut block = Vec::new();
    loop {
        let mut head = [0u8; 9];
        if s.read_exact(&mut head).await.is_err() {
            return;
        }
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        let (kind, flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; len];
        s.read_exact(&mut payload).await.unwrap();
        match kind {
            // SETTINGS, not an ACK: acknowledge.
            4 if flags & 1 == 0 => s.write_all(&frame(4, 1, 0, &[])).await.unwrap(),
            // HEADERS / CONTINUATION.
            1 | 9 => {
                let mut fragment = &payload[..];
                if kind == 1 {
                    let pad = if flags & 0x8 != 0 {
                        let p = usize::from(fragment[0]);
                        fragment = &fragment[1..];
                        p
                    } else {
                        0
                    };
                    if flags & 0x20 != 0 {
                        fragment = &fragment[5..];
                    }
                    fragment = &fragment[..fragment.len() - pad];
                }
                block.extend_from_slice(fragment);
                if flags & 0x4 != 0 {
                    let mut fields = Vec::new();
                    decoder.decode(&mut block, &mut fields).unwrap();
                    block.clear();
                    let fields = fields
                        .into_iter()
                        .map(|(n, v, f)| {
                            let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
                            (text(n), text(v), f)
                        })
                        .collect();
                    seen.lock().unwrap().push(fields);
                    // `:status 200` (static index 8), END_STREAM | END_HEADERS.
                    s.write_all(&frame(1, 0x5, stream, &[0x88])).await.unwrap();
                }
            }
            _ => {}
        }
    }
}

#[tokio::test]
async fn credentials_go_upstream_as_never_indexed_literals() {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![certified.cert.der().clone()], key)
    .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let upstream = tokio::spawn(h2_upstream(
        listener,
        tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        Arc::clone(&seen),
    ));
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, certified.cert.pem()).unwrap();
    // An operator's forwarded header whose name says it holds a token, and an ordinary one.
    let proxy = start_proxy(
        &format!("https://localhost:{port}"),
        PACK,
        &format!(
            "upstream_tls:\n  ca_path: \"{}\"\nforward_headers: [x-tenant-token, x-team]\n",
            ca.display()
        ),
    )
    .await;
    for _ in 0..2 {
        // Whatever guardwire makes of an empty answer: only the request head is under test.
        let _ = send(
            proxy.addr(),
            "POST",
            "/v1/chat/completions",
            PLAIN_REQUEST,
            &[
                ("content-type", "application/json"),
                ("authorization", "Bearer sk-client-secret"),
                ("x-tenant-token", "tenant-secret"),
                ("x-team", "blue"),
            ],
        )
        .await;
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "two requests on one connection: {seen:?}");
    for (n, fields) in seen.iter().enumerate() {
        let field = |name: &str| {
            fields
                .iter()
                .find(|f| f.0 == name)
                .unwrap_or_else(|| panic!("request {n}: no {name} in {fields:?}"))
                .clone()
        };
        for (name, value) in [
            ("authorization", "Bearer sk-client-secret"),
            ("x-tenant-token", "tenant-secret"),
        ] {
            let (_, v, flags) = field(name);
            assert_eq!(v, value);
            assert_eq!(
                flags & Decoder::NEVER_INDEXED,
                Decoder::NEVER_INDEXED,
                "request {n}: {name} is not a never-indexed literal (flags {flags:#x})"
            );
        }
        // An ordinary header goes as HPACK likes (the first time, indexed into the table):
        // the flag is guardwire's choice, not the encoder's default.
        let (_, v, flags) = field("x-team");
        assert_eq!(v, "blue");
        assert_eq!(flags & Decoder::NEVER_INDEXED, 0, "request {n}: x-team");
    }
    drop(proxy);
    upstream.abort();
}
