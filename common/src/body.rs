//! JSON request bodies, read one way for every handler: straight from the bytes into the
//! handler's struct, and only from a JSON **object**.
//!
//! Why not axum's `Json<T>` alone: serde reads a derived struct from a JSON array by position,
//! so `["x"]` was a valid `{"replaces": "x"}` and `[0, "op", null]` set an oversell allowance to
//! 0 (newcomer review, 2026-12-02). A derived struct refuses a member given twice (serde's
//! `duplicate field`), where a `serde_json::Value` in between would keep the last one.
//!
//! Answers (the same as `Json`'s, as problem+json): a body over the route's limit → 413
//! `payload-too-large`; a required body without a JSON content type (`application/json` or
//! `application/*+json`, RFC 6839 §3.1) → 415; a syntax error anywhere in the body → 400
//! `invalid-body`; an array, a scalar, an unknown, duplicate, missing or mistyped member → 422
//! `invalid-body`.
//!
//! Both services read their JSON bodies through this module. Problem details echo at most
//! [`ECHO_MAX`](crate::problem::ECHO_MAX) characters of the input.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, JsonRejection};
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderMap, StatusCode};
use axum::Json;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

use crate::problem::{clip, Problem};

/// A required JSON object body as an extractor, read as [`object`] reads it; its rejection is
/// the [`Problem`]. Take it as `Result<JsonObject<T>, Problem>` where the caller is checked
/// first (the extractor runs before the handler).
#[derive(Debug)]
pub struct JsonObject<T>(pub T);

impl<S, T> FromRequest<S> for JsonObject<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = Problem;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json = json_content_type(req.headers());
        let bytes = Bytes::from_request(req, state).await;
        required(json, bytes).map(JsonObject)
    }
}

/// A required JSON object body: `headers` for the content type, `body` as axum's `Bytes`
/// extractor gave it (taken as a `Result`, so that a handler checks its caller before it
/// answers for the body).
pub fn object<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<T, Problem> {
    required(json_content_type(headers), body)
}

fn required<T: DeserializeOwned>(
    json: bool,
    body: Result<Bytes, BytesRejection>,
) -> Result<T, Problem> {
    let bytes = body.map_err(|r| rejection(r.status(), &r.body_text()))?;
    if !json {
        let text = "Expected request with `Content-Type: application/json`";
        return Err(rejection(StatusCode::UNSUPPORTED_MEDIA_TYPE, text));
    }
    parse(&bytes)
}

/// An optional body: `None` for an empty (or all-whitespace) one, else a JSON object read as
/// [`object`] reads it. The content type is not asked for: these bodies are optional, and
/// clients that send none for "no fields" often send no content type for `{}` either.
pub fn optional<T: DeserializeOwned>(bytes: &[u8]) -> Result<Option<T>, Problem> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    parse(bytes).map(Some)
}

/// One parse, straight into the struct (syntax → 400, data → 422, as `Json`'s); a body that
/// parsed but is not an object was read by position, and is refused. serde stops at its first
/// error, so a data error is checked for a syntax error further on: a truncated body whose
/// first member had the wrong type was a 422, one whose first member was right a 400 (newcomer
/// review: `{"replaces":5` on `/pay`). A body that parses is read once.
fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    let not_object = || {
        let text = "the request body must be a JSON object";
        rejection(StatusCode::UNPROCESSABLE_ENTITY, text)
    };
    let Json(body) = Json::<T>::from_bytes(bytes).map_err(|r: JsonRejection| {
        if r.status() == StatusCode::UNPROCESSABLE_ENTITY {
            if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                let text = format!("Failed to parse the request body as JSON: {e}");
                return rejection(StatusCode::BAD_REQUEST, &text);
            }
            if !starts_as_object(bytes) {
                return not_object();
            }
            return rejection(r.status(), &plain(&r.body_text()));
        }
        rejection(r.status(), &r.body_text())
    })?;
    if !starts_as_object(bytes) {
        return Err(not_object());
    }
    Ok(body)
}

/// Whether the body's first non-blank byte opens a JSON object.
fn starts_as_object(bytes: &[u8]) -> bool {
    bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// A data error's text without the service's own names (second newcomer review, 2026-12-05:
/// `null` was answered "… into the target type: invalid type: null, expected struct HoldBody"):
/// axum's prefix left out, and serde's `struct Name` said as `a JSON object`.
fn plain(text: &str) -> String {
    let text = text
        .strip_prefix("Failed to deserialize the JSON body into the target type: ")
        .unwrap_or(text);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("struct ") {
        out.push_str(&rest[..i]);
        let after = &rest[i + "struct ".len()..];
        let name = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        out.push_str("a JSON object");
        rest = &after[name..];
    }
    out.push_str(rest);
    out
}

/// A body rejection as a problem: 413 `payload-too-large` for a body over the route's limit,
/// else `invalid-body` with `text` clipped.
pub fn rejection(status: StatusCode, text: &str) -> Problem {
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return Problem::payload_too_large();
    }
    Problem::new(status, "invalid-body", "Invalid request body").detail(clip(text))
}

/// Whether the request says its body is JSON: `application/json` or `application/*+json`
/// (RFC 6839 §3.1), parameters ignored, case-insensitive; in ONE `Content-Type` header. Two
/// are not a JSON body: the field is a singleton (RFC 9110 §5.3, §8.3) and a proxy that reads
/// the other one would see a different request (newcomer review: `application/json` beside
/// `text/plain` was accepted).
fn json_content_type(headers: &HeaderMap) -> bool {
    let mut types = headers.get_all(header::CONTENT_TYPE).iter();
    let (Some(only), None) = (types.next(), types.next()) else {
        return false;
    };
    Some(only)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .is_some_and(|m| {
            m == "application/json" || (m.starts_with("application/") && m.ends_with("+json"))
        })
}

/// For `#[serde(default, deserialize_with = "present")]`: a member that may be left out but
/// not sent as `null` (`#[serde(default)]` alone gives `None` for both; newcomer review:
/// `"quantity": null` held one place, `"seats": null` in a cancel would cancel every seat).
pub fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// For `#[serde(default, deserialize_with = "object_member")]`: a member that must be a JSON object
/// when sent (`null` reads as left out). A derived `Deserialize` also reads a struct from an
/// array of its fields in order (serde's `visit_seq`), so `{"best_available": ["A", 1]}` held a
/// seat (newcomer review); here an array is refused as any other non-object.
pub fn object_member<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Object<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Object<T> {
        type Value = Option<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Some)
        }
    }
    d.deserialize_any(Object(std::marker::PhantomData))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        n: u32,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        inner: Inner,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Holder {
        #[serde(default, deserialize_with = "object_member")]
        inner: Option<Inner>,
    }

    #[test]
    fn one_content_type_says_json_two_do_not() {
        let mut h = HeaderMap::new();
        assert!(!json_content_type(&h));
        h.insert(
            header::CONTENT_TYPE,
            "application/json; charset=utf-8".parse().unwrap(),
        );
        assert!(json_content_type(&h));
        h.append(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert!(!json_content_type(&h));
        let mut twice = HeaderMap::new();
        twice.append(header::CONTENT_TYPE, "application/json".parse().unwrap());
        twice.append(header::CONTENT_TYPE, "application/json".parse().unwrap());
        assert!(!json_content_type(&twice));
    }

    #[test]
    fn an_object_member_refuses_an_array_of_its_fields() {
        let p = parse::<Holder>(br#"{"inner": [5]}"#).unwrap_err();
        assert_eq!(p.status.as_u16(), 422);
        assert!(p
            .detail
            .unwrap_or_default()
            .contains("expected a JSON object"));
        assert_eq!(
            parse::<Holder>(br#"{"inner": {"n": 5}}"#)
                .unwrap()
                .inner
                .unwrap()
                .n,
            5
        );
        assert!(parse::<Holder>(br#"{"inner": null}"#)
            .unwrap()
            .inner
            .is_none());
        assert!(parse::<Holder>(b"{}").unwrap().inner.is_none());
    }

    fn detail(body: &str) -> (u16, String) {
        let p = parse::<Outer>(body.as_bytes()).unwrap_err();
        (p.status.as_u16(), p.detail.unwrap_or_default())
    }

    #[test]
    fn a_data_error_names_no_rust_type() {
        for body in ["null", "5", "\"x\"", "[1]", "true"] {
            assert_eq!(
                detail(body),
                (422, "the request body must be a JSON object".to_owned()),
                "{body}"
            );
        }
        let (status, text) = detail(r#"{"inner": 5}"#);
        assert_eq!(status, 422);
        assert!(text.contains("expected a JSON object"), "{text}");
        assert!(
            !text.contains("Inner") && !text.contains("target type"),
            "{text}"
        );
        let (status, text) = detail(r#"{"inner": {"n": "x"}}"#);
        assert_eq!(status, 422);
        assert!(text.contains("invalid type: string"), "{text}");
    }
}
