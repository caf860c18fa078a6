//! The OpenAPI 3.1 description of the public, fan, admin and internal APIs (utoipa), served at
//! `GET /openapi.json`. Paths are declared on the handlers themselves (`#[utoipa::path]`), so
//! the description lives next to the code it describes; API.md remains the prose contract.

use crate::domain::AuditEntry;
use crate::draw::Publication;
use crate::http::{
    access, admin, broadcast, draw, fan, internal, lanes, leave, mode, phases, public, report,
    transitions,
};
use crate::rates::WaitEstimate;
use crate::status::StatusDoc;
use axum::Json;
use serde::Serialize;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

/// An RFC 9457 problem document (`application/problem+json`), every error body.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProblemDoc {
    /// `/problems/{kind}`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Short summary.
    pub title: String,
    /// HTTP status.
    pub status: u16,
    /// Details, when any.
    pub detail: Option<String>,
}

struct Bearers;

impl Modify for Bearers {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        let c = api.components.get_or_insert_with(Default::default);
        for (name, what) in [
            (
                "join_token",
                "the join token from POST /api/events/{event}/join",
            ),
            (
                "admin_token",
                "the operator's admin token (send X-Operator: <name> too)",
            ),
            ("service_token", "the booking core's service token"),
        ] {
            let mut http = Http::new(HttpAuthScheme::Bearer);
            http.description = Some(what.to_owned());
            c.add_security_scheme(name, SecurityScheme::Http(http));
        }
    }
}

/// The OpenAPI document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Waiting room",
        description = "Virtual queue in front of the booking core. Times are Unix epoch seconds unless a name ends in _ms. See API.md."
    ),
    paths(
        fan::join, fan::heartbeat, fan::position, fan::admission, fan::pow_challenge, leave::leave,
        public::healthz, public::readyz, public::status, public::about, public::jwks, public::admission_policy,
        draw::draw,
        crate::telemetry::metrics,
        admin::list, admin::create, admin::figures, admin::patch, admin::audit,
        report::json, report::csv, report::png,
        transitions::pause, transitions::resume, transitions::open, transitions::close,
        transitions::sold_out,
        lanes::list_rules, lanes::add_rule, lanes::delete_rule, lanes::shadow_line, lanes::release,
        access::get_mode, access::set_mode, access::set_invitation_key, access::generate, access::import, access::revoke,
        internal::end_session, internal::end_sessions, internal::sold_out, internal::reopen,
        broadcast::set, broadcast::clear, mode::set, phases::set, phases::clear,
    ),
    components(schemas(
        StatusDoc, WaitEstimate, AuditEntry, ProblemDoc, Publication,
        crate::report::Report, crate::report::Minute, crate::report::Totals,
        admin::CreateEvent, super::opening::OpensAt, admin::PatchEvent, internal::EndSession, internal::EndSessions,
        lanes::NewRule, crate::lanes::AddressRule,
        broadcast::SetBroadcast, crate::broadcast::Broadcast, mode::SetMode, crate::mode::QueueMode, crate::phases::Phases,
        access::SetAccessMode, access::Generate,
    )),
    modifiers(&Bearers),
    tags(
        (name = "fan", description = "per-fan calls (join token)"),
        (name = "public", description = "cacheable or health endpoints"),
        (name = "admin", description = "operator API (admin token), every change audited"),
        (name = "internal", description = "service-to-service API for the booking core"),
    )
)]
pub struct ApiDoc;

/// `GET /openapi.json`.
pub async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
