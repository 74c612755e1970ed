//! TLS termination: HTTP/2 (ALPN) and HTTP/1.1 from clients over rustls, and a renewed
//! certificate picked up by a reload without a restart.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use bytes::Bytes;
use common::mock_upstream::{openai_chat_stream, MockUpstream, Reply};
use common::proxy::STREAM_REQUEST;
use common::tls::{client_config, write_cert};
use guardwire::config::Config;
use http::{Request, Version};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// A client trusting only `cert`, offering HTTP/2 and HTTP/1.1 (or only HTTP/1.1).
fn client(
    cert: &rustls::pki_types::CertificateDer<'static>,
    h2: bool,
) -> Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
> {
    let tls = client_config(cert);
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only();
    let connector = if h2 {
        builder.enable_http1().enable_http2().build()
    } else {
        builder.enable_http1().build()
    };
    Client::builder(TokioExecutor::new()).build(connector)
}

async fn chat(
    client: &Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        Full<Bytes>,
    >,
    port: u16,
) -> Result<(Version, String), String> {
    let req = Request::post(format!("https://localhost:{port}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(STREAM_REQUEST.as_bytes())))
        .unwrap();
    let resp = client.request(req).await.map_err(|e| format!("{e:?}"))?;
    let version = resp.version();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    Ok((version, String::from_utf8_lossy(&body).into_owned()))
}

#[tokio::test]
async fn clients_speak_http2_and_http1_over_tls_and_a_renewed_certificate_loads_on_reload() {
    let dir = tempfile::tempdir().unwrap();
    let first = write_cert(dir.path());
    let mock = MockUpstream::start(|_| Reply::sse(&openai_chat_stream(&["over tls"]))).await;
    let yaml = format!(
        "listen: \"127.0.0.1:0\"\nupstreams:\n  openai: \"{}\"\ntls:\n  cert_path: \"{}\"\n  key_path: \"{}\"\n",
        mock.base_url(),
        dir.path().join("cert.pem").display(),
        dir.path().join("key.pem").display()
    );
    let config_path = dir.path().join("guardwire.yaml");
    std::fs::write(&config_path, &yaml).unwrap();
    let config = Config::load(&config_path).unwrap();
    let server = guardwire::server::start_from(config, Some(config_path.clone()))
        .await
        .unwrap();
    let port = server.addr.port();
    let expected = String::from_utf8(openai_chat_stream(&["over tls"])).unwrap();

    let (version, body) = chat(&client(&first, true), port).await.unwrap();
    assert_eq!(version, Version::HTTP_2);
    assert_eq!(body, expected);
    let (version, body) = chat(&client(&first, false), port).await.unwrap();
    assert_eq!(version, Version::HTTP_11);
    assert_eq!(body, expected);

    // Renew the certificate and reload: new connections get the new one.
    let second = write_cert(dir.path());
    server.gateway.reload().await.unwrap();
    assert!(chat(&client(&first, true), port).await.is_err());
    let (_, body) = chat(&client(&second, true), port).await.unwrap();
    assert_eq!(body, expected);

    // A broken key file is a reload error that keeps the running certificate.
    std::fs::write(dir.path().join("key.pem"), "not a key").unwrap();
    let e = server.gateway.reload().await.unwrap_err();
    assert!(e.contains("tls.key_path"), "{e}");
    assert!(chat(&client(&second, true), port).await.is_ok());
}
