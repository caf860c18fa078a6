//! The operator's broadcast message (issue 14 item 3): one short plain-text message per event,
//! in the pages' languages (English and French, `static/i18n.js`), carried by the public status
//! document so every waiting fan sees it within one poll. Pure rules only: the store keeps it
//! (`QueueStore::set_broadcast`), `http/broadcast.rs` sets and clears it, audited.

use serde::{Deserialize, Serialize};

/// Most characters (Unicode scalar values) of one language's text: a banner a phone shows
/// whole (about five lines at 390 px). Longer texts are refused, never cut.
pub const BROADCAST_MAX_CHARS: usize = 280;

/// A broadcast message as stored and published. Plain text: pages put it in the DOM as text
/// (`textContent`), never as HTML, so markup shows as the characters typed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Broadcast {
    /// English text, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub en: Option<String>,
    /// French text, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fr: Option<String>,
    /// When the operator set it, Unix epoch **seconds** (pages show a new message again after
    /// a fan dismissed an older one).
    pub set_at: i64,
}

/// Why a message was refused (each a specific 422 problem at the API).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BroadcastError {
    /// No language has text (absent, empty or blank).
    #[error("give the message in at least one language: en, fr")]
    Empty,
    /// One language's text is longer than [`BROADCAST_MAX_CHARS`].
    #[error("the {lang} text has {chars} characters, at most {BROADCAST_MAX_CHARS}")]
    TooLong {
        /// Language code.
        lang: &'static str,
        /// Characters given.
        chars: usize,
    },
    /// One language's text holds control characters (other than line breaks) or Unicode's
    /// bidirectional formatting characters (`sale_common::problem::is_bidi_control`: a
    /// message every fan sees must read as it was written; newcomer review).
    #[error("the {lang} text holds control or bidirectional formatting characters")]
    Control {
        /// Language code.
        lang: &'static str,
    },
}

impl BroadcastError {
    /// The problem slug (`/problems/{slug}`).
    pub fn slug(&self) -> &'static str {
        match self {
            Self::Empty => "broadcast-empty",
            Self::TooLong { .. } => "broadcast-too-long",
            Self::Control { .. } => "broadcast-control-characters",
        }
    }
}

fn text(lang: &'static str, s: Option<String>) -> Result<Option<String>, BroadcastError> {
    // Line breaks as browsers send them from a textarea (`\r\n`) are line breaks too.
    let s = s.map(|s| s.replace("\r\n", "\n"));
    let Some(s) = s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let chars = s.chars().count();
    if chars > BROADCAST_MAX_CHARS {
        return Err(BroadcastError::TooLong { lang, chars });
    }
    if s.chars()
        .any(|c| (c.is_control() && c != '\n') || sale_common::problem::is_bidi_control(c))
    {
        return Err(BroadcastError::Control { lang });
    }
    Ok(Some(s))
}

impl Broadcast {
    /// Checks the operator's texts (trimmed; blank counts as absent) and stamps `now` (epoch
    /// seconds).
    pub fn new(en: Option<String>, fr: Option<String>, now: i64) -> Result<Self, BroadcastError> {
        let (en, fr) = (text("en", en)?, text("fr", fr)?);
        if en.is_none() && fr.is_none() {
            return Err(BroadcastError::Empty);
        }
        Ok(Self {
            en,
            fr,
            set_at: now,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_needs_one_language_bounded_plain_text() {
        let ok = Broadcast::new(Some(" Doors at 7 ".into()), None, 5).expect("ok");
        assert_eq!(
            (ok.en.as_deref(), ok.fr, ok.set_at),
            (Some("Doors at 7"), None, 5)
        );
        assert_eq!(
            Broadcast::new(None, Some("  ".into()), 0),
            Err(BroadcastError::Empty)
        );
        let long = "é".repeat(BROADCAST_MAX_CHARS + 1);
        assert!(matches!(
            Broadcast::new(None, Some(long), 0),
            Err(BroadcastError::TooLong { lang: "fr", .. })
        ));
        assert!(Broadcast::new(Some("é".repeat(BROADCAST_MAX_CHARS)), None, 0).is_ok());
        assert_eq!(
            Broadcast::new(Some("a\u{7}b".into()), None, 0),
            Err(BroadcastError::Control { lang: "en" })
        );
        assert!(Broadcast::new(Some("line one\nline two".into()), None, 0).is_ok());
        // A right-to-left override turns what fans read around (newcomer review: accepted).
        assert_eq!(
            Broadcast::new(None, Some("a\u{202e}b".into()), 0),
            Err(BroadcastError::Control { lang: "fr" })
        );
        // A textarea's CRLF is a line break (newcomer review: it was refused as a control).
        let crlf = Broadcast::new(Some("line one\r\nline two".into()), None, 0).expect("crlf");
        assert_eq!(crlf.en.as_deref(), Some("line one\nline two"));
        assert!(Broadcast::new(Some("a\rb".into()), None, 0).is_err());
    }
}
