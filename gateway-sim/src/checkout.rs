//! The checkout page a fan sees in the browser: amount, reference, a **Pay** and a **Cancel**
//! button (plain HTML forms), and the 303 back to the merchant's `return_url`.

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};

use crate::store::{Payment, PaymentStatus};
use crate::AppState;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        Html("<!doctype html><title>Unknown payment</title><h1>Unknown payment</h1>".to_string()),
    )
        .into_response()
}

/// `GET /checkout/{id}`: the checkout page.
pub async fn page(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    let Some(p) = state.store.get(&id) else {
        return not_found();
    };
    let id = escape(&p.payment_id);
    let amount = format!("{}.{:02}", p.amount_cents / 100, p.amount_cents % 100);
    let actions = if p.status == PaymentStatus::Created {
        format!(
            "<form method=\"post\" action=\"/checkout/{id}/pay\"><button id=\"pay\" type=\"submit\">Pay</button></form>\n\
             <form method=\"post\" action=\"/checkout/{id}/cancel\"><button id=\"cancel\" type=\"submit\">Cancel</button></form>"
        )
    } else {
        format!("<p id=\"state\">This payment is {:?}.</p>", p.status).to_lowercase()
    };
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Checkout – Gateway simulator</title></head>\n\
         <body><h1>Checkout</h1><p>Amount: <strong id=\"amount\">€{amount}</strong></p>\n\
         <p>Reference: <code id=\"reference\">{}</code></p><p>Payment: <code>{id}</code></p>\n{actions}\n</body></html>",
        escape(&p.reference)
    );
    ([(header::CACHE_CONTROL, "private, no-store")], Html(html)).into_response()
}

fn back(state: &AppState, p: &Payment) -> Response {
    let status = match p.status {
        PaymentStatus::Approved | PaymentStatus::Completed => "success",
        PaymentStatus::Expired => {
            return (
                StatusCode::GONE,
                Html(
                    "<!doctype html><title>Expired</title><h1>This payment has expired</h1>"
                        .to_string(),
                ),
            )
                .into_response()
        }
        _ => "cancel",
    };
    let sep = if p.return_url.contains('?') { '&' } else { '?' };
    let url = format!(
        "{}{sep}paymentID={}&status={status}&signature={}",
        p.return_url,
        p.payment_id,
        state.store.sign(&p.payment_id)
    );
    Redirect::to(&url).into_response()
}

/// `POST /checkout/{id}/pay`: approve (unless expired), 303 back with `status=success`.
pub async fn pay(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.store.pay(&id) {
        Some(p) => back(&state, &p),
        None => not_found(),
    }
}

/// `POST /checkout/{id}/cancel`: cancel, 303 back with `status=cancel`.
pub async fn cancel(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.store.cancel(&id) {
        Some(p) => back(&state, &p),
        None => not_found(),
    }
}
