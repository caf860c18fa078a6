//! The checkout page a fan sees in the browser: amount, reference, a **Pay** and a **Cancel**
//! button (plain HTML forms), and the 303 back to the merchant's `return_url`. In English or
//! French, chosen the way the fan pages choose (the first of the browser's languages that the
//! page has: here from `Accept-Language`).

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};

use crate::store::{Payment, PaymentStatus};
use crate::AppState;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A language of the checkout page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// English (the default).
    En,
    /// French.
    Fr,
}

impl Lang {
    /// The first language of `Accept-Language` (highest `q` first, then in order) that the page
    /// has, else English.
    pub fn of(headers: &HeaderMap) -> Lang {
        let header = headers
            .get(header::ACCEPT_LANGUAGE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let mut wanted: Vec<(f32, usize, &str)> = header
            .split(',')
            .enumerate()
            .filter_map(|(i, part)| {
                let mut it = part.split(';');
                let tag = it.next()?.trim();
                let q = it
                    .find_map(|p| p.trim().strip_prefix("q="))
                    .and_then(|q| q.parse::<f32>().ok())
                    .unwrap_or(1.0);
                Some((q, i, tag))
            })
            .collect();
        wanted.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, _, tag) in wanted {
            match tag
                .split('-')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase()
                .as_str()
            {
                "fr" => return Lang::Fr,
                "en" => return Lang::En,
                _ => {}
            }
        }
        Lang::En
    }

    fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Fr => "fr",
        }
    }

    /// The page's words, in this language.
    fn t(self, key: &str) -> &'static str {
        let fr = self == Lang::Fr;
        match key {
            "title" if fr => "Paiement – simulateur de passerelle",
            "title" => "Checkout – Gateway simulator",
            "h1" if fr => "Paiement",
            "h1" => "Checkout",
            "amount" if fr => "Montant :",
            "amount" => "Amount:",
            "reference" if fr => "Référence :",
            "reference" => "Reference:",
            "payment" if fr => "Paiement n° :",
            "payment" => "Payment:",
            "pay" if fr => "Payer",
            "pay" => "Pay",
            "cancel" if fr => "Annuler",
            "cancel" => "Cancel",
            "unknown" if fr => "Paiement inconnu",
            "unknown" => "Unknown payment",
            "expired" if fr => "Ce paiement a expiré",
            "expired" => "This payment has expired",
            _ => "",
        }
    }

    /// "This payment is cancelled." for a payment the fan can no longer act on.
    fn state(self, st: PaymentStatus) -> String {
        let name = format!("{st:?}").to_lowercase();
        if self == Lang::En {
            return format!("This payment is {name}.");
        }
        let fr = match st {
            PaymentStatus::Created => "créé",
            PaymentStatus::Approved => "approuvé",
            PaymentStatus::Completed => "terminé",
            PaymentStatus::Cancelled => "annulé",
            PaymentStatus::Failed => "refusé",
            PaymentStatus::Expired => "expiré",
            PaymentStatus::Refunded => "remboursé",
            PaymentStatus::Disputed => "contesté",
        };
        format!("Ce paiement est {fr}.")
    }

    /// An amount in `currency` (ISO 4217) as the fan pages' `Intl.NumberFormat` writes it
    /// (CLDR): `€12.50`, `£12.50` in English, `12,50 €`, `12,50 £GB` in French; a currency
    /// without a symbol here is written by its code (`CHF 12.50`, `12,50 CHF`). Amounts under
    /// 1,000 units only match the pages exactly (no group separators here).
    fn amount(self, cents: i64, currency: &str) -> String {
        let (units, rest) = (cents / 100, cents % 100);
        let symbol = match (self, currency) {
            (_, "EUR") => "€",
            (Lang::En, "GBP") => "£",
            (Lang::Fr, "GBP") => "£GB",
            (Lang::En, "USD") => "$",
            (Lang::Fr, "USD") => "$US",
            (_, other) => other,
        };
        match self {
            Lang::En if symbol == currency => format!("{symbol}\u{a0}{units}.{rest:02}"),
            Lang::En => format!("{symbol}{units}.{rest:02}"),
            Lang::Fr => format!("{units},{rest:02}\u{a0}{symbol}"),
        }
    }
}

fn page_of(lang: Lang, status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"{}\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title></head>\n<body><main>{body}</main></body></html>",
        lang.code()
    );
    (
        status,
        [
            (header::CACHE_CONTROL, "private, no-store"),
            (header::VARY, "Accept-Language"),
        ],
        Html(html),
    )
        .into_response()
}

fn not_found(lang: Lang) -> Response {
    let t = lang.t("unknown");
    page_of(lang, StatusCode::NOT_FOUND, t, &format!("<h1>{t}</h1>"))
}

/// `GET /checkout/{id}`: the checkout page.
pub async fn page(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let lang = Lang::of(&headers);
    let Some(p) = state.store.get(&id) else {
        return not_found(lang);
    };
    let id = escape(&p.payment_id);
    let actions = if p.status == PaymentStatus::Created {
        format!(
            "<form method=\"post\" action=\"/checkout/{id}/pay\"><button id=\"pay\" type=\"submit\">{}</button></form>\n\
             <form method=\"post\" action=\"/checkout/{id}/cancel\"><button id=\"cancel\" type=\"submit\">{}</button></form>",
            lang.t("pay"),
            lang.t("cancel")
        )
    } else {
        format!("<p id=\"state\">{}</p>", lang.state(p.status))
    };
    let body = format!(
        "<h1>{}</h1><p>{} <strong id=\"amount\">{}</strong></p>\n\
         <p>{} <code id=\"reference\">{}</code></p><p>{} <code>{id}</code></p>\n{actions}",
        lang.t("h1"),
        lang.t("amount"),
        lang.amount(p.amount_cents, &p.currency),
        lang.t("reference"),
        escape(&p.reference),
        lang.t("payment"),
    );
    page_of(lang, StatusCode::OK, lang.t("title"), &body)
}

fn back(state: &AppState, p: &Payment, lang: Lang) -> Response {
    let status = match p.status {
        PaymentStatus::Approved | PaymentStatus::Completed => "success",
        PaymentStatus::Expired => {
            let t = lang.t("expired");
            return page_of(lang, StatusCode::GONE, t, &format!("<h1>{t}</h1>"));
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
pub async fn pay(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let lang = Lang::of(&headers);
    match state.store.pay(&id) {
        Some(p) => back(&state, &p, lang),
        None => not_found(lang),
    }
}

/// `POST /checkout/{id}/cancel`: cancel, 303 back with `status=cancel`.
pub async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let lang = Lang::of(&headers);
    match state.store.cancel(&id) {
        Some(p) => back(&state, &p, lang),
        None => not_found(lang),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lang(accept: &str) -> Lang {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT_LANGUAGE, accept.parse().unwrap());
        Lang::of(&h)
    }

    #[test]
    fn the_first_language_the_page_has_wins() {
        assert_eq!(lang("fr-FR,fr;q=0.9,en;q=0.8"), Lang::Fr);
        assert_eq!(lang("de-DE,fr;q=0.7,en;q=0.9"), Lang::En);
        assert_eq!(lang("de,fr;q=0.5"), Lang::Fr);
        assert_eq!(lang("de"), Lang::En);
        assert_eq!(lang(""), Lang::En);
        assert_eq!(Lang::Fr.amount(1250, "EUR"), "12,50\u{a0}€");
        assert_eq!(Lang::En.amount(1250, "EUR"), "€12.50");
        assert_eq!(Lang::En.amount(4500, "GBP"), "£45.00");
        assert_eq!(Lang::Fr.amount(4500, "GBP"), "45,00\u{a0}£GB");
        assert_eq!(Lang::En.amount(4500, "CHF"), "CHF\u{a0}45.00");
    }
}
