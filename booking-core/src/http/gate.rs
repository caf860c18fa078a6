//! The edge gate's verifier (issue "bots and draw", item 3; DECISIONS "Waiting room and
//! cluster"): nginx guards any path of any origin with the admission token
//! (`infra/nginx/gate.conf.template`), asking this door on every request through
//! `auth_request`. Each guarded origin has its own audience (`gate_audiences` in the
//! configuration; the waiting room adds them to every admission token's `aud`), its own cookie
//! and its own [`Verifier`](crate::door::Verifier), whose JWKS is cached with
//! stale-if-error: the gate keeps verifying while the waiting room is down.
//!
//! - `GET /gate/{audience}/check`: 204 when the request carries a live admission token for that
//!   audience (the `gate_admission` cookie, or a bearer), else 401 problem+json. nginx's
//!   `auth_request` turns the 401 into a redirect to the waiting room (pages) or a 403
//!   problem+json (API calls).
//! - `POST /gate/{audience}/enter` (form `admission_token`, `return_to`): how the token reaches
//!   another origin. Verifies it, sets the origin's `gate_admission` cookie (HttpOnly,
//!   SameSite=Lax, `Max-Age` = the token's remaining life in seconds) and answers 303 to
//!   `return_to` (a path on that origin; anything else goes to `/`).

use axum::extract::rejection::FormRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use sale_common::Problem;
use serde::Deserialize;

use super::fan::admission_required;
use crate::door::{token_from_headers_or_cookie, Verifier};
use crate::error::{rejection, ApiResult};
use crate::state::AppState;

/// The cookie the gate sets on a guarded origin.
pub const GATE_COOKIE: &str = "gate_admission";

/// Form of `POST /gate/{audience}/enter`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct EnterForm {
    /// The admission token from the waiting room (its `aud` contains the gate's audience).
    pub admission_token: String,
    /// Where to go on the guarded origin afterwards: a path starting with one `/`.
    #[serde(default)]
    pub return_to: Option<String>,
}

/// The gate of `audience`, or 404 `unknown-gate`.
fn gate<'a>(state: &'a AppState, audience: &str) -> ApiResult<&'a Verifier> {
    state
        .gates
        .get(audience)
        .map(|v| v.as_ref())
        .ok_or_else(|| {
            Problem::new(StatusCode::NOT_FOUND, "unknown-gate", "No such gate")
                .detail(format!("no gate for the audience {audience:?}"))
                .into()
        })
}

/// `return_to` if it is a path on this origin (`/…`, not `//host` or `/\host`), else `/`.
fn local_path(return_to: Option<&str>) -> &str {
    match return_to {
        Some(p)
            if p.starts_with('/')
                && !p.starts_with("//")
                && !p.starts_with("/\\")
                && !p.chars().any(char::is_control) =>
        {
            p
        }
        _ => "/",
    }
}

/// `GET /gate/{audience}/check`.
#[utoipa::path(
    get,
    path = "/gate/{audience}/check",
    tag = "gate",
    summary = "Is this request admitted? (nginx auth_request)",
    params(("audience" = String, Path, description = "the guarded origin's audience")),
    responses(
        (status = 204, description = "a live admission token for this audience"),
        (status = 401, description = "`admission-required`", body = super::openapi::ProblemDoc),
        (status = 404, description = "`unknown-gate`", body = super::openapi::ProblemDoc),
    ),
)]
pub async fn check(
    State(state): State<AppState>,
    Path(audience): Path<String>,
    headers: HeaderMap,
) -> ApiResult<StatusCode> {
    let verifier = gate(&state, &audience)?;
    let token = token_from_headers_or_cookie(&headers, GATE_COOKIE)
        .map_err(|e| admission_required(&state, &e))?;
    verifier
        .verify(&token, None)
        .await
        .map_err(|e| admission_required(&state, &e))?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /gate/{audience}/enter`.
#[utoipa::path(
    post,
    path = "/gate/{audience}/enter",
    tag = "gate",
    summary = "Hand an admission token to a guarded origin (sets its cookie)",
    params(("audience" = String, Path, description = "the guarded origin's audience")),
    request_body(content = EnterForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "the cookie is set; on to `return_to`"),
        (status = 401, description = "`admission-required`", body = super::openapi::ProblemDoc),
        (status = 404, description = "`unknown-gate`", body = super::openapi::ProblemDoc),
    ),
)]
pub async fn enter(
    State(state): State<AppState>,
    Path(audience): Path<String>,
    headers: HeaderMap,
    form: Result<Form<EnterForm>, FormRejection>,
) -> ApiResult<Response> {
    let verifier = gate(&state, &audience)?;
    let Form(f) = form.map_err(|r| rejection(r.status(), "form", &r.body_text()))?;
    let adm = verifier
        .verify(&f.admission_token, None)
        .await
        .map_err(|e| admission_required(&state, &e))?;
    let max_age = (adm.exp - state.clock.now_secs()).max(0);
    // Behind TLS (the proxy says so) the cookie is Secure too.
    let secure = headers
        .get("x-forwarded-proto")
        .is_some_and(|v| v.as_bytes() == b"https");
    let cookie = format!(
        "{GATE_COOKIE}={}; HttpOnly; SameSite=Lax; Path=/; Max-Age={max_age}{}",
        f.admission_token,
        if secure { "; Secure" } else { "" }
    );
    let mut resp = Redirect::to(local_path(f.return_to.as_deref())).into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        cookie.parse().map_err(anyhow::Error::from)?,
    );
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::local_path;

    #[test]
    fn return_to_stays_on_the_origin() {
        assert_eq!(local_path(Some("/shop/item?id=1")), "/shop/item?id=1");
        for elsewhere in [
            "https://evil.example/",
            "//evil.example/",
            "/\\evil.example",
            "shop",
            "/a\r\nSet-Cookie: x=1",
        ] {
            assert_eq!(local_path(Some(elsewhere)), "/", "{elsewhere:?}");
        }
        assert_eq!(local_path(None), "/");
    }
}
