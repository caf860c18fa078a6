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
    /// One file per message in this directory (the embedded default).
    Dir(PathBuf),
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
            None => Ok(Self::Dir(c.mail_dir.clone())),
            Some(url) => Ok(Self::Smtp {
                transport: plain_relay(url)?,
                from: c.mail_from.clone(),
                fan_domain: c.fan_mail_domain.clone(),
            }),
        }
    }

    /// Sends one message of `kind` (`confirmation-email`, `refund-notice`, …) about `ref_id`.
    pub async fn send(&self, ref_id: &str, kind: &str, payload: &Value) -> anyhow::Result<()> {
        match self {
            Self::Dir(dir) => Ok(write_mail(dir, ref_id, kind, payload)?),
            Self::Smtp {
                transport,
                from,
                fan_domain,
            } => {
                let to = match payload["email"].as_str() {
                    Some(e) => e.to_owned(),
                    None => format!(
                        "{}@{fan_domain}",
                        payload["visitor_id"].as_str().unwrap_or("fan")
                    ),
                };
                let msg = Message::builder()
                    .from(from.parse()?)
                    .to(to.parse()?)
                    .subject(subject(kind))
                    .header(ContentType::TEXT_PLAIN)
                    .body(format!(
                        "{}\r\n\r\nReference: {ref_id}\r\n{}\r\n",
                        subject(kind),
                        serde_json::to_string_pretty(payload).unwrap_or_default()
                    ))?;
                transport.send(msg).await?;
                Ok(())
            }
        }
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

/// The subject line of a message kind.
pub fn subject(kind: &str) -> &str {
    match kind {
        "confirmation-email" => "Your tickets are booked",
        "refund-notice" => "Your payment was refunded: the seats were no longer available",
        "cancellation-email" => "Your booking was cancelled",
        "compensation-email" => "Your booking stands, with a compensation paid back to you",
        "oversell-moved-email" => "Your places were moved to another area",
        other => other,
    }
}

/// Writes one email as `{dir}/{kind}-{ref_id}.eml` (temporary file, then rename: a crash never
/// leaves half a message, and a retry replaces the same file).
pub fn write_mail(dir: &Path, ref_id: &str, kind: &str, payload: &Value) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let to = payload["visitor_id"].as_str().unwrap_or("fan");
    let subject = subject(kind);
    let body = format!(
        "To: {to}\r\nSubject: {subject}\r\nX-Kind: {kind}\r\nX-Ref: {ref_id}\r\nContent-Type: application/json\r\n\r\n{}\r\n",
        serde_json::to_string_pretty(payload).unwrap_or_default()
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
