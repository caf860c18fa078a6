//! The quiet lane for bots (issue 15 item 2): operator rules by address range and the shadow
//! line's records. Pure rules, no framework, no store: CIDR ranges (IPv4 and IPv6), the four
//! actions, which rule an address meets, and the tag that marks a shadow visitor's id.
//!
//! A shadow visitor's id looks like any visitor id (a v4 UUID) but its last six bytes are an
//! HMAC of the first ten under the node's key, so a node knows a shadowed visitor from its id
//! alone: fans' calls never pay a store lookup for the shadow line, and a bot cannot tell.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::net::IpAddr;

/// What a rule does to a join from its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleAction {
    /// The join is refused (`403 address-blocked`).
    Block,
    /// Staff: no proof of work asked and no proof-of-work failure counted; queued normally.
    Bypass,
    /// A proof of work is required at the rule's difficulty (at least the event's).
    Challenge,
    /// The join gets a place in the shadow line.
    Shadow,
}

impl RuleAction {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Block => "block",
            Self::Bypass => "bypass",
            Self::Challenge => "challenge",
            Self::Shadow => "shadow",
        }
    }
    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "block" => Self::Block,
            "bypass" => Self::Bypass,
            "challenge" => Self::Challenge,
            "shadow" => Self::Shadow,
            _ => return None,
        })
    }
}

/// An address range, `a.b.c.d/n` or `x:y::/n` (a bare address is a /32 or /128).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    bits: u8,
}

impl Cidr {
    /// Parses a range; host bits must be zero (`10.0.0.1/8` is refused: it is probably a typo).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (addr, bits) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let net: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not an IPv4 or IPv6 address range"))?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            None => max,
            Some(b) => b
                .parse::<u8>()
                .ok()
                .filter(|b| *b <= max)
                .ok_or_else(|| format!("{s:?}: prefix length must be 0..={max}"))?,
        };
        // An IPv4-mapped IPv6 range (`::ffff:192.0.2.0/120`) is its IPv4 range: clients are
        // matched by their IPv4 address (newcomer review: such a rule was accepted and never
        // matched).
        let (net, bits) = match net {
            IpAddr::V6(v6) if bits >= 96 => match v6.to_ipv4_mapped() {
                Some(v4) => (IpAddr::V4(v4), bits - 96),
                None => (net, bits),
            },
            _ => (net, bits),
        };
        let c = Self { net, bits };
        if c.masked(net) != net {
            return Err(format!("{s:?}: host bits set (did you mean {c}?)"));
        }
        Ok(c)
    }

    fn masked(&self, ip: IpAddr) -> IpAddr {
        match ip {
            IpAddr::V4(v4) => {
                let m = u32::MAX.checked_shl(32 - u32::from(self.bits)).unwrap_or(0);
                IpAddr::V4((u32::from(v4) & m).into())
            }
            IpAddr::V6(v6) => {
                let m = u128::MAX
                    .checked_shl(128 - u32::from(self.bits))
                    .unwrap_or(0);
                IpAddr::V6((u128::from(v6) & m).into())
            }
        }
    }

    /// Whether `ip` is in the range (an IPv4-mapped IPv6 address counts as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        ip.is_ipv4() == self.net.is_ipv4() && self.masked(ip) == self.net
    }

    /// Prefix length.
    pub fn bits(&self) -> u8 {
        self.bits
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let masked = self.masked(self.net);
        write!(f, "{masked}/{}", self.bits)
    }
}

/// One operator rule of an event, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AddressRule {
    /// Server-chosen id (`r` + 8 hex digits).
    pub id: String,
    /// The range, normalised (`203.0.113.0/24`, `2001:db8::/32`).
    pub cidr: String,
    /// `block`, `bypass`, `challenge` or `shadow`.
    #[schema(value_type = String)]
    pub action: RuleAction,
    /// Proof-of-work difficulty of a `challenge` rule, leading zero **bits**.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pow_bits: Option<u32>,
    /// The operator's note (why), up to 200 characters.
    #[serde(default)]
    pub note: String,
    /// Who added it (`X-Operator`).
    pub created_by: String,
    /// When, epoch **seconds**.
    pub created_at: i64,
}

/// The rule that applies to `ip`: the most specific range that contains it (the longest
/// prefix; among equals, the first added). Rules whose range does not parse are skipped.
pub fn rule_for(rules: &[AddressRule], ip: IpAddr) -> Option<&AddressRule> {
    rules
        .iter()
        .filter_map(|r| Cidr::parse(&r.cidr).ok().map(|c| (c, r)))
        .filter(|(c, _)| c.contains(ip))
        .max_by(|(a, ra), (b, rb)| {
            a.bits()
                .cmp(&b.bits())
                .then(rb.created_at.cmp(&ra.created_at))
                .then(rb.id.cmp(&ra.id))
        })
        .map(|(_, r)| r)
}

/// Why a visitor is in the shadow line: a rule id, or [`POW_FAILURES`].
pub const POW_FAILURES: &str = "pow-failures";

/// One visitor in the shadow line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ShadowEntry {
    /// The visitor id (server-chosen, tagged by [`ShadowTag`]).
    pub visitor: String,
    /// Its number in the shadow line's own sequence (1, 2, …): never a fan's number.
    pub shadow_number: u64,
    /// Fans numbered or pre-queued when it joined: the number it is shown is this plus
    /// `shadow_number`, so its page looks like a place at the back of the line.
    pub behind: u64,
    /// The rule id that put it here, or `pow-failures`.
    pub rule: String,
    /// The client address (as the trusted-proxy logic found it).
    pub address: String,
    /// When, epoch **ms**.
    pub at_ms: i64,
}

impl ShadowEntry {
    /// The queue number its answers show.
    pub fn shown_number(&self) -> u64 {
        self.behind.saturating_add(self.shadow_number)
    }
}

/// Mints and recognises shadow visitors' ids (keyed HMAC-SHA256, 48-bit tag).
#[derive(Clone)]
pub struct ShadowTag {
    key: Vec<u8>,
}

impl std::fmt::Debug for ShadowTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ShadowTag")
    }
}

impl ShadowTag {
    /// A tagger under `key` (every node of a deployment must share it: the join HMAC key).
    pub fn new(key: &[u8]) -> Self {
        let mut k = b"shadow-lane\0".to_vec();
        k.extend_from_slice(key);
        Self { key: k }
    }

    fn tag(&self, head: &[u8]) -> [u8; 6] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("any key length");
        mac.update(head);
        let out = mac.finalize().into_bytes();
        let mut t = [0u8; 6];
        t.copy_from_slice(&out[..6]);
        t
    }

    /// A fresh shadow visitor id: a v4 UUID whose last six bytes are the tag.
    pub fn mint(&self) -> String {
        let mut b: [u8; 16] = rand::random();
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let t = self.tag(&b[..10]);
        b[10..].copy_from_slice(&t);
        uuid::Uuid::from_bytes(b).to_string()
    }

    /// Whether `visitor` was minted by [`ShadowTag::mint`] under this key.
    pub fn is_shadow(&self, visitor: &str) -> bool {
        let Ok(u) = uuid::Uuid::parse_str(visitor) else {
            return false;
        };
        let b = u.as_bytes();
        subtle::ConstantTimeEq::ct_eq(&self.tag(&b[..10])[..], &b[10..]).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn ranges_parse_and_match_both_families() {
        let c = Cidr::parse("203.0.113.0/24").expect("v4");
        assert!(c.contains(ip("203.0.113.77")));
        assert!(c.contains(ip("::ffff:203.0.113.9")));
        assert!(!c.contains(ip("203.0.114.1")));
        let c6 = Cidr::parse("2001:db8:aa::/48").expect("v6");
        assert!(c6.contains(ip("2001:db8:aa:1::5")));
        assert!(!c6.contains(ip("2001:db8:ab::5")));
        assert!(Cidr::parse("0.0.0.0/0")
            .expect("all")
            .contains(ip("1.2.3.4")));
        assert_eq!(Cidr::parse("::/0").expect("all v6").to_string(), "::/0");
        assert_eq!(Cidr::parse("192.0.2.1").expect("host").bits(), 32);
        // An IPv4-mapped range is its IPv4 range and matches IPv4 clients.
        let mapped = Cidr::parse("::ffff:127.0.0.5").expect("mapped");
        assert_eq!(mapped.to_string(), "127.0.0.5/32");
        assert!(mapped.contains(ip("127.0.0.5")));
        assert_eq!(
            Cidr::parse("::ffff:192.0.2.0/120")
                .expect("mapped /120")
                .to_string(),
            "192.0.2.0/24"
        );
        for bad in [
            "10.0.0.1/8",
            "10.0.0.0/33",
            "nope",
            "10.0.0.0/",
            "::1/129",
            "",
        ] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_most_specific_rule_wins() {
        let rule = |id: &str, cidr: &str, action| AddressRule {
            id: id.into(),
            cidr: cidr.into(),
            action,
            pow_bits: None,
            note: String::new(),
            created_by: "t".into(),
            created_at: 1,
        };
        let rules = vec![
            rule("a", "10.0.0.0/8", RuleAction::Shadow),
            rule("b", "10.1.0.0/16", RuleAction::Bypass),
        ];
        assert_eq!(rule_for(&rules, ip("10.1.2.3")).map(|r| &*r.id), Some("b"));
        assert_eq!(rule_for(&rules, ip("10.2.2.3")).map(|r| &*r.id), Some("a"));
        assert!(rule_for(&rules, ip("11.0.0.1")).is_none());
    }

    #[test]
    fn shadow_ids_are_recognised_and_fans_ids_are_not() {
        let tag = ShadowTag::new(b"k");
        let v = tag.mint();
        assert!(uuid::Uuid::parse_str(&v).is_ok_and(|u| u.get_version_num() == 4));
        assert!(tag.is_shadow(&v));
        assert!(!ShadowTag::new(b"other").is_shadow(&v));
        for _ in 0..1000 {
            assert!(!tag.is_shadow(&uuid::Uuid::new_v4().to_string()));
        }
    }
}
