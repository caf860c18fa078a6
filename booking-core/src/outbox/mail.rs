//! Where confirmation and refund emails go (issue 4: "a mail directory by default, SMTP through
//! a well-kept crate as an option"). [`Mailer::Dir`] writes one `.eml` file per message
//! ([`write_mail`]); [`Mailer::Smtp`] sends through `lettre`'s async SMTP
//! transport. Either way the outbox marks the message sent only after the mailer succeeded, so a
//! failure is retried and a message is never lost (a retry after a crash between send and mark
//! can repeat an SMTP send; the message carries `X-Ref` so the receiving side can de-duplicate).

use std::path::{Path, PathBuf};

use lettre::message::header::ContentType;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use serde_json::Value;

use crate::config::{smtp_relay, Config};

/// The configured email sink.
#[derive(Debug, Clone)]
pub enum Mailer {
    /// One file per message in the directory (the embedded default).
    Dir {
        /// The mail directory (`Config::mail_dir`).
        dir: PathBuf,
        /// Domain of fans' addresses when the message names no `email` (the `To:` line).
        fan_domain: String,
    },
    /// An SMTP relay.
    Smtp {
        /// The pooled async transport.
        transport: AsyncSmtpTransport<Tokio1Executor>,
        /// `From:` address.
        from: String,
        /// Domain of fans' addresses when the message names no `email`.
        fan_domain: String,
    },
}

impl Mailer {
    /// Builds the mailer from `smtp_url` (if set) or `mail_dir`.
    ///
    /// # Errors
    /// An `smtp_url` that `lettre` cannot parse (checked at start-up, not at the first email).
    pub fn from_config(c: &Config) -> anyhow::Result<Self> {
        match &c.smtp_url {
            None => Ok(Self::dir(c)),
            Some(url) => Ok(Self::Smtp {
                transport: plain_relay(url)?,
                from: c.mail_from.clone(),
                fan_domain: c.fan_mail_domain.clone(),
            }),
        }
    }

    /// The mail directory of `c` (`mail_dir`, fans' addresses at `fan_mail_domain`).
    pub fn dir(c: &Config) -> Self {
        Self::Dir {
            dir: c.mail_dir.clone(),
            fan_domain: c.fan_mail_domain.clone(),
        }
    }

    /// Sends one message of `kind` (`confirmation-email`, `refund-notice`, …) about `ref_id`,
    /// its text made by [`body_text`] from `booked` (the show, and what a confirmation names).
    pub async fn send(
        &self,
        ref_id: &str,
        kind: &str,
        payload: &Value,
        booked: &Booked,
    ) -> anyhow::Result<()> {
        let text = body_text(ref_id, kind, payload, booked);
        match self {
            Self::Dir { dir, fan_domain } => {
                let to = recipient(payload, fan_domain);
                let subject = subject_of(kind, payload);
                Ok(write_mail(dir, ref_id, kind, &to, subject, &text)?)
            }
            Self::Smtp {
                transport,
                from,
                fan_domain,
            } => {
                let to = recipient(payload, fan_domain);
                let msg = Message::builder()
                    .from(from.parse()?)
                    .to(to.parse()?)
                    .subject(subject_of(kind, payload))
                    .header(ContentType::TEXT_PLAIN)
                    .body(text)?;
                transport.send(msg).await?;
                Ok(())
            }
        }
    }
}

/// The fan's address for a message about `payload`: its `email`, else `{visitor_id}@{fan_domain}`.
pub fn recipient(payload: &Value, fan_domain: &str) -> String {
    match payload["email"].as_str() {
        Some(e) => e.to_owned(),
        None => format!(
            "{}@{fan_domain}",
            payload["visitor_id"].as_str().unwrap_or("fan")
        ),
    }
}

/// A plain-SMTP transport from `smtp://host[:port]` (the URL rules are
/// [`crate::config::smtp_relay`]'s: an unencrypted relay on a trusted network).
///
/// # Errors
/// Another scheme, or no host.
pub fn plain_relay(url: &str) -> anyhow::Result<AsyncSmtpTransport<Tokio1Executor>> {
    let (host, port) = smtp_relay(url)?;
    Ok(
        AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host)
            .port(port)
            .build(),
    )
}

/// The subject line of a message of `kind` about `payload`: [`subject`], but a cancellation
/// that leaves the rest of the booking (`booking_status` `active`) says that part was cancelled.
pub fn subject_of<'a>(kind: &'a str, payload: &Value) -> &'a str {
    if kind == "cancellation-email" && payload["booking_status"].as_str() == Some("active") {
        return "Part of your booking was cancelled";
    }
    subject(kind)
}

/// The subject line of a message kind.
pub fn subject(kind: &str) -> &str {
    match kind {
        "confirmation-email" => "Your tickets are booked",
        "refund-notice" => "Your payment was refunded: the seats were no longer available",
        "cancellation-email" => "Your booking was cancelled",
        "gateway-refund-email" => "Your payment was returned to you",
        "compensation-email" => "Your booking stands, with a compensation paid back to you",
        "oversell-moved-email" => "Your places were moved to another area",
        other => other,
    }
}

/// What an email names beside its payload's ids, read when it is sent (the outbox worker's
/// `booked`): the show, its currency and the way back to the booking for every email, and for a
/// confirmation what was bought, so the fan reads words, not only references.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Booked {
    /// The show's display name.
    pub show_name: String,
    /// The venue's display name (may be empty).
    pub venue_name: String,
    /// ISO 4217 code of the amounts (the venue's; empty when the show is unknown).
    pub currency: String,
    /// A confirmation's seat ids in the venue's order (section, row, number).
    pub seats: Vec<String>,
    /// A confirmation's general-admission pool id and the places taken of it.
    pub places: Option<(String, i64)>,
    /// A confirmation's interval resource: its kind, the resource, and its start and end as the
    /// venue's local time (`2026-10-25T01:30+00:00[Europe/London]`).
    pub interval: Option<(String, String, String, String)>,
    /// Where the fan sees the booking: `{public_url}/confirmation.html?hold={hold}` (empty when
    /// the message names no hold).
    pub link: String,
    /// A cancellation's booking is cancelled whole by the time its email is sent (a later
    /// cancellation overtook it: its email may arrive first), so "the rest stands" is not said.
    pub cancelled_since: bool,
}

/// A local time as the booking core writes it for software (`2026-10-25T01:30+01:00[Europe/London]`,
/// `sale_common::localtime::show_in`) as a fan reads it: `2026-10-25 01:30 Europe/London
/// (UTC+01:00)`, or `2030-06-01 19:00 UTC`. Anything else is given back as it is.
pub fn readable_time(local: &str) -> String {
    let parts = local.split_once('T').and_then(|(date, rest)| {
        let (clock, zone) = rest.split_once('[')?;
        let zone = zone.strip_suffix(']')?;
        Some((date, clock.get(..5)?, clock.get(5..)?, zone))
    });
    match parts {
        Some((date, hm, _, "UTC")) => format!("{date} {hm} UTC"),
        Some((date, hm, offset, zone)) => format!("{date} {hm} {zone} (UTC{offset})"),
        None => local.to_owned(),
    }
}

/// `cents` as an amount with two decimals and its currency code (`123.45 EUR`; the code left
/// out when empty): every price in the venue files is in cents of the venue's currency.
pub fn money(cents: i64, currency: &str) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let abs = cents.unsigned_abs();
    let amount = format!("{sign}{}.{:02}", abs / 100, abs % 100);
    match currency.is_empty() {
        true => amount,
        false => format!("{amount} {currency}"),
    }
}

/// An email's plain text (UTF-8, CRLF lines): the subject as its first line; the show and what
/// the message is about in words, from `booked` ([`about`]); then its
/// reference (`ref_id`, also the `X-Ref` header) and the payload as JSON details, which
/// software reading the mail directory may parse (the text after the `Details:` line).
pub fn body_text(ref_id: &str, kind: &str, payload: &Value, booked: &Booked) -> String {
    let mut lines = vec![format!("{}.", subject_of(kind, payload)), String::new()];
    lines.extend(about(kind, payload, booked));
    lines.push(String::new());
    lines.push(format!("Reference: {ref_id}"));
    lines.push("Details:".into());
    lines.push(serde_json::to_string_pretty(payload).unwrap_or_default());
    let mut text = lines.join("\r\n");
    text.push_str("\r\n");
    text
}

/// The lines of an email of `kind` that say what happened: the show; for a confirmation, what
/// was booked (seats, places or an interval) and the amount paid; for a cancellation, what was
/// cancelled, whether and how much was refunded, and why; for a refund notice, the amount
/// refunded; the booking reference and the link to the booking where the message has them.
fn about(kind: &str, payload: &Value, b: &Booked) -> Vec<String> {
    let mut lines = vec![match b.venue_name.is_empty() {
        true => b.show_name.clone(),
        false => format!("{} at {}", b.show_name, b.venue_name),
    }];
    let amount = payload["amount_cents"]
        .as_i64()
        .map(|c| money(c, &b.currency));
    let seats = |seats: &[String]| match seats.len() {
        1 => format!("Seat: {}", seats[0]),
        _ => format!("Seats: {}", seats.join(", ")),
    };
    let places = |n: i64, pool: Option<&str>| {
        let label = if n == 1 { "place" } else { "places" };
        match pool {
            Some(pool) => format!("Standing: {n} {label} in {pool}"),
            None => format!("Standing: {n} {label}"),
        }
    };
    match kind {
        "confirmation-email" => {
            if !b.seats.is_empty() {
                lines.push(seats(&b.seats));
            }
            if let Some((pool, n)) = &b.places {
                lines.push(places(*n, Some(pool)));
            }
            if let Some((kind, resource, start, end)) = &b.interval {
                lines.push(format!("{kind} {resource}: from {start} to {end}"));
            }
            lines.extend(amount.map(|a| format!("Paid: {a}")));
        }
        "cancellation-email" => {
            let cancelled: Vec<String> = payload["seats"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            if !cancelled.is_empty() {
                lines.push(format!("Cancelled: {}", seats(&cancelled)));
            }
            if let Some(n) = payload["quantity"].as_i64().filter(|n| *n > 0) {
                let pool = b.places.as_ref().map(|(p, _)| p.as_str());
                lines.push(format!("Cancelled: {}", places(n, pool)));
            }
            // A whole cancellation also ends the booking's interval (read with its parts).
            if let (Some("cancelled"), Some((kind, resource, start, end))) =
                (payload["booking_status"].as_str(), &b.interval)
            {
                lines.push(format!(
                    "Cancelled: {kind} {resource} from {start} to {end}"
                ));
            }
            let earlier = payload["refunded_earlier_cents"].as_i64().unwrap_or(0);
            let whole = payload["amount_cents"].as_i64().unwrap_or(0);
            match (payload["refund"].as_str(), amount) {
                (Some("refunded"), Some(_)) if earlier > 0 => lines.push(format!(
                    "Refunded: {} now, and {} the payment provider refunded earlier: {} in all",
                    money(whole - earlier, &b.currency),
                    money(earlier, &b.currency),
                    money(whole, &b.currency)
                )),
                (Some("refunded"), Some(a)) => lines.push(format!("Refunded: {a}")),
                (Some("at-gateway"), Some(a)) => {
                    lines.push(format!("Refunded by the payment provider: {a}"))
                }
                (Some("none"), _) => lines.push("Not refunded.".into()),
                _ => {}
            }
            // A cancellation the gateway caused has the code's own reason: said in words.
            match (payload["origin"].as_str(), payload["reason"].as_str()) {
                (Some("gateway"), Some(why)) if why.contains("dispute") => {
                    lines.push("Reason: the payment was disputed with the card issuer.".into())
                }
                (Some("gateway"), _) => {}
                (_, Some(why)) if !why.is_empty() => lines.push(format!("Reason: {why}")),
                _ => {}
            }
            match (payload["booking_status"].as_str(), b.cancelled_since) {
                (Some("active"), false) => lines.push("The rest of your booking stands.".into()),
                (Some("active"), true) => lines.push(
                    "The rest of your booking has been cancelled since (another email says how)."
                        .into(),
                ),
                _ => {}
            }
        }
        "refund-notice" => {
            lines.extend(amount.map(|a| format!("Refunded: {a}")));
        }
        "gateway-refund-email" => {
            lines.extend(amount.map(|a| format!("Refunded by the payment provider: {a}")));
            if payload["reason"]
                .as_str()
                .is_some_and(|r| r.contains("dispute"))
            {
                lines.push("Reason: the payment was disputed with the card issuer.".into());
            }
            lines.push("Your booking had been cancelled before.".into());
        }
        _ => {}
    }
    if let Some(booking) = payload["booking_id"].as_str() {
        lines.push(format!("Booking reference: {booking}"));
    }
    if !b.link.is_empty() {
        lines.push(String::new());
        lines.push(format!(
            "Your booking (open it in the browser you booked with): {}",
            b.link
        ));
    }
    lines
}

/// Writes one email to `to` ([`recipient`]) under `subject` ([`subject_of`]) as
/// `{dir}/{kind}-{ref_id}.eml` with its `text`
/// ([`body_text`]) as a `text/plain` UTF-8 body (temporary file, then rename: a crash never
/// leaves half a message, and a retry replaces the same file).
pub fn write_mail(
    dir: &Path,
    ref_id: &str,
    kind: &str,
    to: &str,
    subject: &str,
    text: &str,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    // One header line: a line break in a visitor id would start another header.
    let to: String = to.chars().filter(|c| !c.is_control()).collect();
    let body = format!(
        "To: {to}\r\nSubject: {subject}\r\nX-Kind: {kind}\r\nX-Ref: {ref_id}\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{text}"
    );
    let safe: String = ref_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    let path = dir.join(format!("{kind}-{safe}.eml"));
    let tmp = dir.join(format!(".{kind}-{safe}.tmp"));
    std::fs::write(&tmp, body)?;
    std::fs::rename(tmp, path)
}

#[cfg(test)]
mod tests {
    use super::{money, readable_time};

    #[test]
    fn times_and_amounts_as_a_fan_reads_them() {
        assert_eq!(
            readable_time("2026-10-25T01:30+01:00[Europe/London]"),
            "2026-10-25 01:30 Europe/London (UTC+01:00)"
        );
        assert_eq!(
            readable_time("2030-06-01T19:00+00:00[UTC]"),
            "2030-06-01 19:00 UTC"
        );
        assert_eq!(readable_time("1767225600000"), "1767225600000");
        assert_eq!(money(10_005, "EUR"), "100.05 EUR");
        assert_eq!(money(-250, ""), "-2.50");
    }
}
