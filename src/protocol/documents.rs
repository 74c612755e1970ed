//! Documents sent inline in a request, and references to content the provider keeps.
//!
//! A document the model reads is input like any message: an inline `text/*` (or JSON, CSV,
//! Markdown, XML, YAML) document is decoded (base64, or a `data:` URL) and read by the input
//! checks as a text part of its message. What the proxy cannot read — a PDF, an Office file,
//! an unknown or missing type, bytes that are not UTF-8 — is *unreadable*: refused unless the
//! route's `unknown_content` is `pass`. Images and audio keep their exemption (no text checks
//! read them). Malformed input (invalid base64, a malformed data URL) is the client's error:
//! 400 naming the field, nothing forwarded.
//!
//! References to content stored at the provider (`previous_response_id`, a Responses
//! `conversation`, Gemini `cachedContent`, file ids and URIs, documents by URL) bring text the
//! proxy never sees: the route's `stored_context` decides (`refuse` by default).

mod charset;

use crate::error::GatewayError;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use std::borrow::Cow;

/// Where a request's documents and references were found, for [`crate::protocol::ParsedRequest`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Documents {
    /// Field paths (with the media type) of documents the proxy cannot read.
    pub unreadable: Vec<String>,
    /// (kind, field path) of every reference to provider-stored content.
    pub stored: Vec<(StoredKind, String)>,
}

/// What a reference to provider-stored content points at (the metric's `kind` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoredKind {
    /// Responses `previous_response_id`.
    PreviousResponse,
    /// Responses `conversation`.
    Conversation,
    /// Gemini `cachedContent`.
    CachedContent,
    /// A file uploaded to the provider: `file_id`s, Gemini `fileData.fileUri`, Anthropic
    /// `source.type: file`.
    File,
    /// A document the provider fetches by URL (Responses `file_url`, Anthropic
    /// `source.type: url` documents).
    Url,
    /// A prompt template stored at the provider (Responses `prompt.id`).
    Prompt,
    /// An earlier item stored at the provider (Responses `item_reference`).
    Item,
    /// A tool the provider runs that puts content in the model's context: stored files
    /// (file search, a code interpreter's files, skills), a remote MCP server, the web (search,
    /// fetch, URL context) — [`hosted_tool_reads`].
    HostedTool,
}

/// Whether a provider-side tool of `kind` (its `type`: `file_search`, Anthropic's dated
/// `web_search_20250305`) reads content into the model's context that no input check can read:
/// file and vector-store search, a remote MCP server, web search and fetch. (A code
/// interpreter reads stored files only when given some: see its callers.)
pub fn hosted_tool_reads(kind: &str) -> bool {
    const READERS: [&str; 5] = [
        "file_search",
        "web_search",
        "web_fetch",
        "mcp",
        "url_context",
    ];
    READERS.iter().any(|r| {
        kind.strip_prefix(r)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('_'))
    })
}

/// Whether a code interpreter's `container` holds stored files: an existing container (its id)
/// or one given `file_ids`.
pub fn container_holds_files(container: Option<&serde_json::Value>) -> bool {
    match container {
        Some(serde_json::Value::String(_)) => true,
        Some(serde_json::Value::Object(c)) => c
            .get("file_ids")
            .and_then(|f| f.as_array())
            .is_some_and(|f| !f.is_empty()),
        _ => false,
    }
}

impl StoredKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StoredKind::PreviousResponse => "previous_response",
            StoredKind::Conversation => "conversation",
            StoredKind::CachedContent => "cached_content",
            StoredKind::File => "file",
            StoredKind::Url => "url",
            StoredKind::Prompt => "prompt",
            StoredKind::Item => "item",
            StoredKind::HostedTool => "hosted_tool",
        }
    }
}

impl Documents {
    /// Notes a reference to stored content at `path`.
    pub fn stored(&mut self, kind: StoredKind, path: impl Into<String>) {
        self.stored.push((kind, path.into()));
    }

    /// Reads an inline document of `media_type` whose bytes are `data` in base64, at `path`:
    /// its text (`Ok(Some)`), nothing for images and audio (`Ok(None)`), or noted unreadable.
    pub fn base64(
        &mut self,
        media_type: Option<&str>,
        data: &str,
        path: &str,
    ) -> Result<Option<String>, GatewayError> {
        let kind = classify(media_type);
        // (Media that is no valid base64 is refused as a text is: a lenient reader would
        // read bytes the checks never saw.)
        let bytes = decode_base64(data).ok_or_else(|| bad(path, "is not valid base64"))?;
        if kind == Kind::Media {
            return Ok(text_in_media(bytes));
        }
        Ok(self.bytes(kind, media_type, bytes, path))
    }

    /// The same for a `data:` URL (`data:text/plain;base64,…`) at `path`. Not a `data:` URL
    /// (an `https:` or other reference): `Err` for a field that must hold one.
    pub fn data_url(&mut self, url: &str, path: &str) -> Result<Option<String>, GatewayError> {
        let (media_type, data) = parse_data_url(url)
            .ok_or_else(|| bad(path, "is not a data URL (data:<media type>;base64,<data>)"))?;
        let media_type = Some(&*media_type);
        let kind = classify(media_type);
        let bytes = match data {
            DataUrl::Base64(b) => {
                decode_base64(b).ok_or_else(|| bad(path, "is not valid base64"))?
            }
            DataUrl::Percent(p) => {
                percent_decode(p).ok_or_else(|| bad(path, "is not a valid data URL"))?
            }
        };
        if kind == Kind::Media {
            return Ok(text_in_media(bytes));
        }
        Ok(self.bytes(kind, media_type, bytes, path))
    }

    /// What a `data:` URL holds as the reader who opens it reads it (a `urlopen`, a browser, a
    /// host drawing an icon): `None` when `url` is no `data:` URL a reader opens (no `data:`
    /// scheme, no `,`); `Some(None)` for images and audio (exempt from the text checks); else
    /// its text (a text media type, or any other bytes: a reader may treat them as text).
    ///
    /// Read as leniently as its readers read it: as the Fetch standard's data: URL processor
    /// (a browser: white space and a fragment dropped, `; base64`, malformed `%` escapes kept,
    /// forgiving base64, a media type without `/` is `text/plain`), and base64 a browser
    /// refuses as Python's `urlopen` reads it (what is not of the alphabet dropped). Bytes in a
    /// declared charset are read in it and as UTF-8 (a reader may ignore the declaration).
    pub fn data_url_payload(url: &str) -> Option<Option<String>> {
        let processed = data_url::DataUrl::process(url).ok()?;
        let mime = processed.mime_type();
        let media_type = format!("{}/{}", mime.type_, mime.subtype);
        let bytes = match processed.decode_to_vec() {
            Ok((body, _)) => body,
            Err(_) => lenient_base64(url),
        };
        if classify(Some(&media_type)) == Kind::Media {
            return Some(text_in_media(bytes));
        }
        // (A charset not read: what a reader that ignores it reads, and no more — this reader
        // has no way to refuse; the inline documents of requests do, `bytes`.)
        let declared = mime
            .get_parameter("charset")
            .map_or(charset::Declared::Utf8, |label| {
                charset::declared(Some(&format!("{media_type};charset={label}")))
            });
        let text = charset::read(&bytes, &declared)
            .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned());
        Some(Some(text))
    }

    /// A document given as text (Anthropic `source.type: text`): read as it is unless its
    /// media type says it is something else.
    pub fn text(&mut self, media_type: Option<&str>, text: String, path: &str) -> Option<String> {
        match classify(media_type.or(Some("text/plain"))) {
            Kind::Text => Some(text),
            _ => {
                self.unreadable(media_type, path);
                None
            }
        }
    }

    /// Notes a document the proxy cannot read at `path`.
    pub fn unreadable(&mut self, media_type: Option<&str>, path: &str) {
        self.unreadable.push(format!(
            "{path} ({})",
            media_type.unwrap_or("no media type")
        ));
    }

    fn bytes(
        &mut self,
        kind: Kind,
        media_type: Option<&str>,
        bytes: Vec<u8>,
        path: &str,
    ) -> Option<String> {
        match (kind, charset::read(&bytes, &charset::declared(media_type))) {
            (Kind::Text, Ok(text)) => Some(
                text.strip_prefix('\u{feff}')
                    .map_or(text.clone(), str::to_owned),
            ),
            (Kind::Text, Err(why)) => {
                self.unreadable.push(format!("{path} ({why})"));
                None
            }
            _ => {
                self.unreadable(media_type, path);
                None
            }
        }
    }
}

/// The media type a file name's extension stands for, among those read as text (a document
/// sent as bare base64 with only its name).
pub fn media_type_of_name(name: Option<&str>) -> Option<&'static str> {
    let ext = name?.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "txt" | "text" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "json" => "application/json",
        "html" | "htm" => "text/html",
        "xml" => "application/xml",
        "yaml" | "yml" => "application/yaml",
        _ => return None,
    })
}

/// Bytes said to be an image or audio that are text all the same: a reader that ignores the
/// media type (an app decoding an A2A `raw` part with `decode('utf-8', 'replace')`, a model
/// handed the file) reads that text, so the checks read it too — decoded as such a reader
/// does, a byte that is no UTF-8 read as U+FFFD. A real image or sound is no text within its
/// first bytes (compressed data, PNG, JPEG, MP3 headers): its first [`MEDIA_PREFIX`] bytes
/// decide, so a picture costs no text check. Text is what has at most one byte sequence that
/// is no UTF-8 in [`TEXT_ERRORS_PER`] bytes of that prefix.
fn text_in_media(bytes: Vec<u8>) -> Option<String> {
    let prefix = &bytes[..bytes.len().min(MEDIA_PREFIX)];
    let errors = prefix
        .utf8_chunks()
        .filter(|c| !c.invalid().is_empty())
        .count();
    if errors * TEXT_ERRORS_PER > prefix.len().max(TEXT_ERRORS_PER) {
        return None;
    }
    Some(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// How many bytes of media decide whether they are text ([`text_in_media`]).
const MEDIA_PREFIX: usize = 1024;
/// Text has at most one sequence that is no UTF-8 in this many bytes (compressed media has
/// hundreds in a kilobyte).
const TEXT_ERRORS_PER: usize = 16;

/// Whether `s` starts with the `data:` scheme (any case).
pub fn is_data_url(s: &str) -> bool {
    s.get(..5).is_some_and(|d| d.eq_ignore_ascii_case("data:"))
}

/// True for images and audio (exempt from the text checks wherever they are).
pub fn is_media(media_type: Option<&str>) -> bool {
    classify(media_type) == Kind::Media
}

/// A malformed field: the client's error, naming the field.
pub fn bad(path: &str, what: &str) -> GatewayError {
    GatewayError::InvalidRequest(format!("{path} {what}"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Read as text.
    Text,
    /// Images and audio: exempt from the text checks.
    Media,
    /// Anything else (PDF, Office, video, unknown, none).
    Unreadable,
}

/// What a media type is to the input checks (parameters such as `; charset=utf-8` ignored).
fn classify(media_type: Option<&str>) -> Kind {
    let Some(mt) = media_type else {
        return Kind::Unreadable;
    };
    let essence = mt
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let (top, sub) = essence.split_once('/').unwrap_or((&essence, ""));
    match (top, sub) {
        ("text", s) if !s.is_empty() => Kind::Text,
        ("application", "json" | "xml" | "yaml" | "x-yaml" | "x-ndjson" | "csv" | "markdown") => {
            Kind::Text
        }
        // A structured syntax suffix names text whatever the top type: an SVG image is XML,
        // and its text is drawn (`image/svg+xml`).
        (_, s) if s.ends_with("+json") || s.ends_with("+xml") => Kind::Text,
        ("image" | "audio", s) if !s.is_empty() => Kind::Media,
        _ => Kind::Unreadable,
    }
}

/// Standard or URL-safe base64, padded or not; anything else (whitespace included) is `None`.
fn decode_base64(data: &str) -> Option<Vec<u8>> {
    let config =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    let standard = GeneralPurpose::new(&base64::alphabet::STANDARD, config);
    let url_safe = GeneralPurpose::new(&base64::alphabet::URL_SAFE, config);
    standard
        .decode(data)
        .or_else(|_| url_safe.decode(data))
        .ok()
}

/// A `data:` URL's base64 body as Python's `urlopen` reads it (`base64.decodebytes`): its
/// `%` escapes resolved, then every character outside the standard alphabet dropped (white
/// space, `!`, padding anywhere), a trailing lone character ignored.
fn lenient_base64(url: &str) -> Vec<u8> {
    let body = url.split_once(',').map_or("", |(_, b)| b);
    let body = body.split_once('#').map_or(body, |(b, _)| b);
    let bytes = percent_decode_lenient(body);
    let mut alphabet: Vec<u8> = bytes
        .into_iter()
        .filter(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/'))
        .collect();
    if alphabet.len() % 4 == 1 {
        alphabet.pop();
    }
    let config =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::RequireNone);
    GeneralPurpose::new(&base64::alphabet::STANDARD, config)
        .decode(&alphabet)
        .unwrap_or_default()
}

/// `%XX` escapes resolved; a malformed one is kept as written (as a browser and `unquote` do).
fn percent_decode_lenient(s: &str) -> Vec<u8> {
    percent_decoded(s, true).unwrap_or_default()
}

/// `%XX` escapes resolved (two hex digits); a malformed one is kept as written (`keep`) or
/// makes the whole `None`.
fn percent_decoded(s: &str, keep: bool) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let hex = s
            .get(i + 1..i + 3)
            .filter(|h| h.bytes().all(|d| d.is_ascii_hexdigit()))
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(v) => {
                out.push(v);
                i += 3;
            }
            None if keep => {
                out.push(b'%');
                i += 1;
            }
            None => return None,
        }
    }
    Some(out)
}

enum DataUrl<'a> {
    Base64(&'a str),
    Percent(&'a str),
}

/// `data:[<media type>][;param=value]*[;base64],<data>` → (media type, data).
fn parse_data_url(url: &str) -> Option<(Cow<'_, str>, DataUrl<'_>)> {
    let rest = url.get(5..).filter(|_| is_data_url(url))?;
    let (head, data) = rest.split_once(',')?;
    let (head, base64) = match head.rsplit_once(';') {
        Some((h, b)) if b.eq_ignore_ascii_case("base64") => (h, true),
        _ => (head, false),
    };
    let essence = head.split(';').next().map_or("", str::trim);
    if !essence.is_empty() && !essence.contains('/') {
        return None;
    }
    // (With its parameters: a `charset` is read.) A data URL without a media type is
    // text/plain (RFC 2397), its parameters kept.
    let media_type = if essence.is_empty() {
        Cow::Owned(format!("text/plain{}", head.trim()))
    } else {
        Cow::Borrowed(head.trim())
    };
    Some((
        media_type,
        if base64 {
            DataUrl::Base64(data)
        } else {
            DataUrl::Percent(data)
        },
    ))
}

/// `%XX` escapes resolved; a malformed one is `None`.
fn percent_decode(s: &str) -> Option<Vec<u8>> {
    percent_decoded(s, false)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    /// Review 19 (P19-02): every spelling a browser or Python's `urlopen` opens is read as
    /// its content.
    #[test]
    fn data_urls_are_read_as_leniently_as_their_readers_read_them() {
        for url in [
            "data:text/plain;base64,dGhlIGZvcmJpZGRlbiBmcnVpdA==",
            "data:text/plain;base64,dGhl IGZvcmJpZGRlbiBmcnVpdA==",
            "data:text/plain;base64,dGhl\nIGZvcmJpZGRlbiBmcnVpdA==",
            "data:text/plain;base64,dGhl%49GZvcmJpZGRlbiBmcnVpdA==",
            "data:text/plain;base64,dGhlIGZvcmJpZGRlbiBmcnVpdA==#x",
            "data:text/plain;base64,\tdGhlIGZvcmJpZGRlbiBmcnVpdA==",
            "data:text;base64,dGhlIGZvcmJpZGRlbiBmcnVpdA==",
            "data:text/plain; base64,dGhlIGZvcmJpZGRlbiBmcnVpdA==",
            "data:text/plain,the%20forbidden%20fruit%zz",
            "data:text/plain;base64,dGhl!IGZvcmJpZGRlbiBmcnVpdA==",
            "data:text/plain;base64,dGhlIGZvcmJpZGRlbiBmcnVpdA====",
            "DATA:,the forbidden fruit",
            "  data:,the%20forbidden fruit",
            "data:text/plain;charset=utf-16le;base64,dABoAGUAIABmAG8AcgBiAGkAZABkAGUAbgAgAGYAcgB1AGkAdAA=",
        ] {
            let text = Documents::data_url_payload(url)
                .unwrap_or_else(|| panic!("{url}: not read"))
                .unwrap_or_else(|| panic!("{url}: read as media"));
            assert!(text.contains("the forbidden fruit"), "{url}: {text:?}");
        }
        assert_eq!(
            Documents::data_url_payload("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP43+BwAAAGwQKAz/YrcQAAAABJRU5ErkJggg=="),
            Some(None)
        );
        assert_eq!(Documents::data_url_payload("https://x/y"), None);
        assert_eq!(Documents::data_url_payload("data:no comma"), None);
    }

    #[test]
    fn text_documents_are_read_media_exempt_the_rest_unreadable() {
        let mut d = Documents::default();
        // "forbidden fruit" in base64, padded, unpadded, URL-safe alphabet.
        for data in ["Zm9yYmlkZGVuIGZydWl0"] {
            for mt in [
                "text/plain",
                "text/markdown; charset=utf-8",
                "application/json",
                "TEXT/CSV",
                "application/ld+json",
                "image/svg+xml",
            ] {
                assert_eq!(
                    d.base64(Some(mt), data, "p").unwrap().as_deref(),
                    Some("forbidden fruit"),
                    "{mt}"
                );
            }
        }
        assert_eq!(
            d.base64(Some("text/plain"), "Pz8_", "p")
                .unwrap()
                .as_deref(),
            Some("???")
        );
        assert_eq!(
            d.base64(Some("text/plain"), "YQ", "p").unwrap().as_deref(),
            Some("a")
        );
        assert!(d.unreadable.is_empty());
        // Media that is no valid base64 is refused as a text is (a lenient reader — the
        // a2a-sdk's protobuf JSON — would read bytes the checks never saw).
        for data in [
            "!!not base64",
            "Zm9y YmlkZGVu",
            "Zm9y.YmlkZGVu",
            "Zm9yYmlkZGVu===",
        ] {
            assert!(d.base64(Some("image/png"), data, "p").is_err(), "{data}");
        }
        // Compressed media: no text within its first bytes, not read (whatever follows).
        let noise: Vec<u8> = (0..2048u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
            .collect();
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        png.extend_from_slice(&noise);
        png.extend_from_slice(b"forbidden fruit");
        let engine = &base64::engine::general_purpose::STANDARD;
        use base64::Engine as _;
        assert_eq!(
            d.base64(Some("audio/wav"), &engine.encode(&png), "p")
                .unwrap(),
            None
        );
        assert_eq!(
            d.base64(Some("image/png"), "Zm9yYmlkZGVuIGZydWl0", "p")
                .unwrap()
                .as_deref(),
            Some("forbidden fruit")
        );
        // Text past the prefix is read whole.
        let long = "Zm9y".repeat(2000);
        assert_eq!(
            d.base64(Some("image/png"), &long, "p")
                .unwrap()
                .map(|t| t.len()),
            Some(6000)
        );
        // A media header, or a byte that is no UTF-8, before or after the text does not make
        // it media: read as `decode('utf-8', 'replace')` reads it.
        for bytes in [
            [&b"\x89PNG\r\n\x1a\n"[..], b"forbidden fruit"].concat(),
            [&b"forbidden fruit"[..], b"\xff"].concat(),
            [&b"\xff\xfe"[..], &b"forbidden fruit ".repeat(40)].concat(),
        ] {
            let read = d
                .base64(Some("image/png"), &engine.encode(&bytes), "p")
                .unwrap();
            assert!(read.unwrap().contains("forbidden fruit"));
        }
        assert!(d.unreadable.is_empty());
        for mt in [
            Some("application/pdf"),
            Some("video/mp4"),
            Some("application/octet-stream"),
            None,
        ] {
            assert_eq!(d.base64(mt, "AAAA", "p").unwrap(), None);
        }
        // Not UTF-8.
        assert_eq!(d.base64(Some("text/plain"), "//79", "q").unwrap(), None);
        assert_eq!(d.unreadable.len(), 5);
        assert_eq!(d.unreadable[0], "p (application/pdf)");
        assert_eq!(d.unreadable[4], "q (not UTF-8)");
    }

    #[test]
    fn malformed_base64_and_data_urls_name_the_field() {
        let mut d = Documents::default();
        for bad in ["Zm9y YmlkZGVu", "Zm9yYmlkZGVu!", "Z"] {
            let e = d.base64(
                Some("text/plain"),
                bad,
                "contents[0].parts[1].inlineData.data",
            );
            let Err(GatewayError::InvalidRequest(m)) = e else {
                panic!("{bad}: {e:?}");
            };
            assert!(
                m.starts_with("contents[0].parts[1].inlineData.data "),
                "{m}"
            );
        }
        for bad in [
            "https://example.com/a.txt",
            "data:text/plain;base64",
            "data:nonsense,abc",
            "data:text/plain;base64,@@@",
            "data:,%zz",
        ] {
            assert!(d.data_url(bad, "f").is_err(), "{bad}");
        }
        assert_eq!(
            d.data_url("data:text/plain;base64,Zm9yYmlkZGVuIGZydWl0", "f")
                .unwrap()
                .as_deref(),
            Some("forbidden fruit")
        );
        assert_eq!(
            d.data_url("data:,forbidden%20fruit", "f")
                .unwrap()
                .as_deref(),
            Some("forbidden fruit")
        );
        assert_eq!(
            d.data_url("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP43+BwAAAGwQKAz/YrcQAAAABJRU5ErkJggg==", "f")
                .unwrap(),
            None
        );
        // Said to be an image, UTF-8 text all the same: read as the text it is.
        assert_eq!(
            d.data_url("data:image/png;base64,Zm9yYmlkZGVuIGZydWl0", "f")
                .unwrap()
                .as_deref(),
            Some("forbidden fruit")
        );
        assert_eq!(
            d.data_url("data:application/pdf;base64,AAAA", "f").unwrap(),
            None
        );
        assert_eq!(d.unreadable, ["f (application/pdf)"]);
    }
}
