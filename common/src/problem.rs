//! RFC 9457 `application/problem+json` error bodies. Every client error of every service is one
//! of these; server errors are logged once and answered with a generic 500 problem.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

/// Most characters of client input a problem's detail echoes.
pub const ECHO_MAX: usize = 100;

/// `s` cut to at most [`ECHO_MAX`] characters (with `…` when cut): problem details never echo
/// long input. Unicode's bidirectional controls in it are written out as escapes (`\u{202e}`),
/// so an echoed name cannot reorder the text a console or a log shows around it (the
/// "Trojan Source" trick, CVE-2021-42574; Unicode UAX #9 lists the controls).
pub fn clip(s: &str) -> String {
    let cut = match s.char_indices().nth(ECHO_MAX) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    };
    if !cut.chars().any(is_bidi_control) {
        return cut;
    }
    cut.chars()
        .map(|c| {
            if is_bidi_control(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Unicode's explicit bidirectional formatting characters and marks (UAX #9, table 4 and the
/// implicit marks): ALM, LRM, RLM, LRE, RLE, PDF, LRO, RLO, LRI, RLI, FSI, PDI. Text shown to
/// others that holds one can read in another order than it was written (CVE-2021-42574).
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// A problem+json response: `type`, `title`, `status`, optional `detail`, extension members,
/// and an optional `Retry-After` (seconds) header for 429/503.
#[derive(Debug, Clone)]
pub struct Problem {
    /// HTTP status code.
    pub status: StatusCode,
    /// Short machine-readable kind, rendered as `type: "/problems/{kind}"`.
    pub kind: &'static str,
    /// Human-readable summary.
    pub title: String,
    /// Optional longer explanation.
    pub detail: Option<String>,
    /// Extension members merged into the body (e.g. `availability` on a 409).
    pub extra: Map<String, Value>,
    /// `Retry-After` in seconds, for 429 and 503.
    pub retry_after_secs: Option<u64>,
}

impl Problem {
    /// A problem with a status, kind and title.
    pub fn new(status: StatusCode, kind: &'static str, title: impl Into<String>) -> Self {
        Self {
            status,
            kind,
            title: title.into(),
            detail: None,
            extra: Map::new(),
            retry_after_secs: None,
        }
    }
    /// Adds a `detail` member.
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
    /// Adds an extension member.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(key.to_owned(), value.into());
        self
    }
    /// Sets `Retry-After` (seconds).
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs);
        self
    }
    /// 400 with a detail: input that could not be parsed.
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad-request", "Bad request").detail(detail)
    }
    /// 401: missing or invalid credentials.
    pub fn unauthorized(kind: &'static str, detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, kind, "Unauthorized").detail(detail)
    }
    /// 404 for a named thing.
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", "Not found").detail(what)
    }
    /// 503 with `Retry-After`: a store or dependency is unavailable.
    pub fn unavailable(detail: impl Into<String>, retry_after_secs: u64) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Service unavailable",
        )
        .detail(detail)
        .retry_after(retry_after_secs)
    }
    /// 413 `payload-too-large`: the request body is over the size limit.
    pub fn payload_too_large() -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload-too-large",
            "Request body too large",
        )
        .detail("the request body is over the size limit")
    }
    /// 500; the cause must already have been logged by the caller. Never echoes the cause.
    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Internal server error",
        )
    }
    /// The JSON body.
    pub fn body(&self) -> Value {
        let mut m = Map::new();
        m.insert("type".into(), format!("/problems/{}", self.kind).into());
        m.insert("title".into(), self.title.clone().into());
        m.insert("status".into(), self.status.as_u16().into());
        if let Some(d) = &self.detail {
            m.insert("detail".into(), d.clone().into());
        }
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.body()).unwrap_or_default();
        let mut resp = (self.status, body).into_response();
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Some(secs) = self.retry_after_secs {
            h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

/// Turns axum's JSON/path/query extractor rejections into 400/415/422 problems instead of
/// plain-text bodies. Use as `Result<Json<T>, JsonRejection>` then `.map_err(Problem::from)`.
impl From<axum::extract::rejection::JsonRejection> for Problem {
    fn from(r: axum::extract::rejection::JsonRejection) -> Self {
        Self::new(r.status(), "invalid-body", "Invalid request body").detail(r.body_text())
    }
}

impl From<axum::extract::rejection::PathRejection> for Problem {
    fn from(r: axum::extract::rejection::PathRejection) -> Self {
        Self::new(r.status(), "invalid-path", "Invalid path").detail(r.body_text())
    }
}

impl From<axum::extract::rejection::QueryRejection> for Problem {
    fn from(r: axum::extract::rejection::QueryRejection) -> Self {
        Self::new(r.status(), "invalid-query", "Invalid query").detail(r.body_text())
    }
}

/// Safety net for every answer, as a `map_response` layer: an error status whose body is not
/// JSON (an extractor's or a layer's plain-text rejection, axum's `Invalid URL: Invalid UTF-8`
/// for a path parameter among them) becomes a problem with the same status and no echoed text;
/// `Allow` and `Retry-After` are kept. API.md: every error body is problem+json.
pub async fn problems_only(resp: Response) -> Response {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.contains("json"));
    if json {
        return resp;
    }
    let p = match status {
        StatusCode::NOT_FOUND => Problem::not_found("no such resource"),
        StatusCode::METHOD_NOT_ALLOWED => {
            Problem::new(status, "method-not-allowed", "Method not allowed")
        }
        StatusCode::PAYLOAD_TOO_LARGE => Problem::payload_too_large(),
        s if s.is_server_error() => Problem::new(s, "internal", "Internal server error"),
        s => Problem::new(s, "bad-request", "Bad request"),
    };
    let mut out = p.into_response();
    for name in [axum::http::header::ALLOW, axum::http::header::RETRY_AFTER] {
        if let Some(v) = resp.headers().get(&name) {
            out.headers_mut().insert(name, v.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_has_rfc9457_members_and_extensions() {
        let p = Problem::new(StatusCode::CONFLICT, "seats-taken", "Seats taken")
            .with("availability", serde_json::json!({"A-1-1": "held"}));
        let b = p.body();
        assert_eq!(b["type"], "/problems/seats-taken");
        assert_eq!(b["status"], 409);
        assert_eq!(b["availability"]["A-1-1"], "held");
    }

    #[test]
    fn echoed_input_shows_bidi_controls_as_escapes() {
        // A show name that would read "no show gpj.exe" reversed in a console.
        let name = "A\u{202E}exe.jpg\u{202C}-\u{2067}x\u{2069}";
        assert_eq!(clip(name), "A\\u{202e}exe.jpg\\u{202c}-\\u{2067}x\\u{2069}");
        assert_eq!(
            clip("C-6-20 é"),
            "C-6-20 é",
            "other text is echoed as it is"
        );
        let long = "\u{202E}".repeat(ECHO_MAX + 5);
        assert_eq!(
            clip(&long).matches("\\u{202e}").count(),
            ECHO_MAX,
            "cut first"
        );
    }

    #[test]
    fn unavailable_sets_retry_after() {
        let resp = Problem::unavailable("store down", 2).into_response();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "2");
        assert_eq!(
            resp.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
    }
}
