//! The OpenAPI 3.1 description of the booking core's HTTP contract (utoipa), served at
//! `GET /openapi.json`. Paths are declared on the handlers themselves (`#[utoipa::path]`), so
//! the description lives next to the code it describes; API.md remains the prose contract, and
//! `tests/openapi.rs` checks the three (router, description, API.md) name the same routes.
//!
//! What every operation shares is added here rather than on each handler ([`Problems`]): error
//! bodies are `application/problem+json`, 429/502/503 carry `Retry-After`, an operation with a
//! body may answer 413, one behind the admission or admin token 401, and any operation 500.

use axum::Json;
use serde::Serialize;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{Content, HeaderBuilder, Ref, RefOr, Response};
use utoipa::{Modify, OpenApi, PartialSchema, ToSchema};

use super::{
    admin, cancel, fan, gate, history, holds, load, office, ops, oversell, resources, venue,
    waitlist, webhook,
};

/// An RFC 9457 problem document (`application/problem+json`), every error body. A problem
/// may carry more members (`waiting_room`, `availability`, `hold_id`, `max_holds`, …; API.md).
#[derive(Debug, Serialize, ToSchema)]
pub struct ProblemDoc {
    /// `/problems/{kind}`, e.g. `/problems/seats-unavailable`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Short summary.
    pub title: String,
    /// HTTP status.
    pub status: u16,
    /// Details, when any (at most 100 characters of user input are echoed).
    pub detail: Option<String>,
}

/// The security schemes: the names the handlers' `security(...)` refer to.
struct Schemes;

impl Modify for Schemes {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let c = api.components.get_or_insert_with(Default::default);
        let bearer = |what: &str| {
            let mut http = Http::new(HttpAuthScheme::Bearer);
            http.description = Some(what.to_owned());
            SecurityScheme::Http(http)
        };
        c.add_security_scheme(
            "admission_token",
            bearer("the waiting room's admission token (EdDSA JWT, aud booking-core)"),
        );
        c.add_security_scheme(
            "admission_cookie",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                "admission",
                "the same admission token in the HttpOnly cookie set by POST /session",
            ))),
        );
        c.add_security_scheme("admin_token", bearer("the operator's admin token"));
        c.add_security_scheme(
            "webhook_signature",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "Gateway-Signature",
                "t=<epoch s>,v1=<hex>[,v1=<hex>…]: HMAC-SHA256(webhook key, \"{t}.{raw body}\")",
            ))),
        );
    }
}

/// The answers every operation shares (module docs).
struct Problems;

impl Problems {
    fn operation(op: &mut Operation) {
        let has_body = op.request_body.is_some();
        let rs = &mut op.responses.responses;
        let problem = |what: &str| {
            let mut r = Response::new(what);
            r.content.insert(
                "application/problem+json".into(),
                Content::new(Some(Ref::from_schema_name("ProblemDoc"))),
            );
            RefOr::T(r)
        };
        rs.entry("500".into())
            .or_insert_with(|| problem("internal: logged, never echoed"));
        let schemes = serde_json::to_string(&op.security).unwrap_or_default();
        if schemes.contains("\"admin_token\"") {
            rs.entry("401".into()).or_insert_with(|| {
                problem("admin-required: the admin bearer token is missing or wrong")
            });
        }
        if schemes.contains("\"admission_token\"") {
            rs.entry("401".into()).or_insert_with(|| {
                problem("admission-required (with waiting_room): no admission, an invalid or expired one, or one for another show")
            });
        }
        if has_body {
            rs.entry("413".into())
                .or_insert_with(|| problem("payload-too-large: body over 2 MiB"));
        }
        for (status, r) in rs.iter_mut() {
            let RefOr::T(r) = r else { continue };
            if !status.starts_with(['4', '5']) {
                continue;
            }
            if let Some(json) = r.content.shift_remove("application/json") {
                r.content.insert("application/problem+json".into(), json);
            }
            if matches!(status.as_str(), "429" | "502" | "503") {
                let h = HeaderBuilder::new()
                    .schema(<u64 as PartialSchema>::schema())
                    .description(Some("seconds to wait before trying again"))
                    .build();
                r.headers.entry("Retry-After".into()).or_insert(h);
            }
        }
    }
}

impl Modify for Problems {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        for item in api.paths.paths.values_mut() {
            let ops = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            for op in ops.into_iter().flatten() {
                Self::operation(op);
            }
        }
    }
}

/// The OpenAPI document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Booking core",
        description = "Seats, holds, payments and bookings behind the waiting room. Times are Unix epoch seconds unless a name ends in _ms or the route says epoch ms. Every error is application/problem+json: an unknown route 404 not-found, a wrong method 405 method-not-allowed. See API.md \"Booking core\"."
    ),
    paths(
        ops::healthz, ops::readyz, ops::metrics, openapi,
        fan::session, fan::me, fan::leave, fan::seats, fan::sections, fan::callback,
        holds::create_hold, holds::get_hold, holds::pay, holds::delete_hold, resources::free,
        venue::venue,
        waitlist::join, waitlist::status,
        webhook::receive,
        admin::stats, admin::bookings, admin::drift, oversell::set, oversell::get, oversell::list, oversell::resolve, resources::claims,
        admin::hold_queue, admin::set_hold_queue,
        office::outbox, office::refunds, office::alerts,
        cancel::cancel_booking, cancel::office_page,
        history::holds, history::seat, history::hold,
        gate::check, gate::enter, load::load,
    ),
    components(schemas(
        ProblemDoc, fan::SessionForm, holds::HoldBody, holds::BestBody, holds::PayBody,
        oversell::OversellBody, oversell::PolicyBody, oversell::OrderBody, oversell::Offer, oversell::ResolutionBody, oversell::ActionName, admin::QueueSwitch, cancel::CancelBody, waitlist::JoinBody,
        gate::EnterForm,
    )),
    modifiers(&Schemes, &Problems),
    tags(
        (name = "fan", description = "per-fan calls (admission token, as a bearer or the admission cookie)"),
        (name = "payment", description = "the gateway's callback and webhook"),
        (name = "admin", description = "back office (admin bearer token)"),
        (name = "public", description = "health, metrics, this description"),
        (name = "gate", description = "the edge gate's verifier, asked by nginx (infra/nginx/gate.conf.template)"),
    )
)]
pub struct ApiDoc;

/// `GET /openapi.json`.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "public",
    summary = "This description (OpenAPI 3.1)",
    responses((status = 200, description = "the OpenAPI document", body = Object)),
)]
pub async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
