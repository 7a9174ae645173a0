//! Which addresses an outbound request (a webhook delivery, a ping) may reach (SPEC §7.6).
//!
//! A tenant names its webhook's URL, so a careless server would post wherever the tenant
//! points it: the cloud's metadata service at `169.254.169.254`, an admin port on
//! loopback, a database on the private network. [`refusal`] says why an address is not a
//! public unicast one; [`TargetPolicy`] applies it unless private targets are allowed
//! (`allow_private_targets`) or the address is inside an allowed range (`allowed_cidrs`).
//!
//! The rule is about addresses, not names: the caller resolves a name, checks every
//! address it resolves to, and connects only to one that passed, so a name that changes
//! what it resolves to between the check and the connection gains nothing. IPv6 forms that
//! carry an IPv4 address (mapped `::ffff:a.b.c.d`, the deprecated compatible `::a.b.c.d`,
//! NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are judged by the address they carry; Teredo,
//! which hides one behind a relay, is refused.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Why `ip` is not a public unicast address, or `None` when it is one.
pub fn refusal(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refusal_v4(v4),
        IpAddr::V6(v6) => refusal_v6(v6),
    }
}

fn refusal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, _, _) => "an unspecified address (0.0.0.0/8 reaches this host)",
        (10, _, _) => "a private address (10.0.0.0/8)",
        (100, 64..=127, _) => "a carrier-grade NAT address (100.64.0.0/10)",
        (127, _, _) => "a loopback address (127.0.0.0/8)",
        (169, 254, _) => "a link-local address (169.254.0.0/16, where cloud metadata services answer)",
        (172, 16..=31, _) => "a private address (172.16.0.0/12)",
        (192, 0, 0) => "an IETF protocol assignment (192.0.0.0/24)",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "a documentation address",
        (192, 88, 99) => "a 6to4 relay anycast address (192.88.99.0/24)",
        (192, 168, _) => "a private address (192.168.0.0/16)",
        (198, 18..=19, _) => "a benchmarking address (198.18.0.0/15)",
        (224..=239, _, _) => "a multicast address (224.0.0.0/4)",
        _ if ip.is_broadcast() => "the broadcast address",
        (240..=255, _, _) => "a reserved address (240.0.0.0/4)",
        _ => return None,
    })
}

fn refusal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return refusal_v4(v4).map(|_| "an IPv4-mapped address of a refused IPv4 address");
    }
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some("the unspecified address (::)");
    }
    if ip.is_loopback() {
        return Some("the loopback address (::1)");
    }
    Some(match s {
        // ::a.b.c.d, deprecated "IPv4-compatible": nothing public lives there.
        [0, 0, 0, 0, 0, 0, _, _] => "an IPv4-compatible address (::/96, deprecated)",
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => {
            return refusal_v4(embedded_v4(hi, lo)).map(|_| "a NAT64 address of a refused IPv4 address");
        }
        [0x64, 0xff9b, 1, ..] => "a local-use NAT64 address (64:ff9b:1::/48)",
        [0x100, 0, 0, 0, ..] => "a discard-only address (100::/64)",
        [0x2001, 0, ..] => "a Teredo address (2001::/32), which hides an IPv4 address behind a relay",
        [0x2001, 0xdb8, ..] => "a documentation address (2001:db8::/32)",
        [0x2002, hi, lo, ..] => {
            return refusal_v4(embedded_v4(hi, lo)).map(|_| "a 6to4 address of a refused IPv4 address");
        }
        [first, ..] if first & 0xfff0 == 0x3ff0 => "a documentation address (3fff::/20)",
        [0x5f00, ..] => "a segment-routing address (5f00::/16)",
        [first, ..] if first & 0xfe00 == 0xfc00 => "a unique-local address (fc00::/7)",
        [first, ..] if first & 0xffc0 == 0xfe80 => "a link-local address (fe80::/10)",
        [first, ..] if first & 0xffc0 == 0xfec0 => "a site-local address (fec0::/10, deprecated)",
        [first, ..] if first & 0xff00 == 0xff00 => "a multicast address (ff00::/8)",
        _ => return None,
    })
}

fn embedded_v4(hi: u16, lo: u16) -> Ipv4Addr {
    let [a, b] = hi.to_be_bytes();
    let [c, d] = lo.to_be_bytes();
    Ipv4Addr::new(a, b, c, d)
}

/// An address range, `10.20.0.0/16` or `fd00:1::/64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Whether `ip` lies in the range (an IPv4-mapped IPv6 address as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip.to_canonical()) {
            (IpAddr::V4(network), IpAddr::V4(ip)) => {
                same_prefix(network.to_bits().into(), ip.to_bits().into(), self.prefix, 32)
            }
            (IpAddr::V6(network), IpAddr::V6(ip)) => same_prefix(network.to_bits(), ip.to_bits(), self.prefix, 128),
            _ => false,
        }
    }
}

fn same_prefix(a: u128, b: u128, prefix: u8, width: u8) -> bool {
    let host_bits = u32::from(width - prefix);
    host_bits >= 128 || (a >> host_bits) == (b >> host_bits)
}

/// Why a text is not an address range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not an address range like 10.20.0.0/16 or fd00::/8: {reason}")]
pub struct CidrError {
    input: String,
    reason: &'static str,
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(text: &str) -> Result<Cidr, CidrError> {
        let error = |reason| CidrError { input: text.to_owned(), reason };
        let (address, prefix) = text.split_once('/').ok_or_else(|| error("no /prefix"))?;
        let network: IpAddr = address.parse().map_err(|_| error("not an IP address before the /"))?;
        let width = if network.is_ipv4() { 32 } else { 128 };
        let prefix: u8 = prefix.parse().map_err(|_| error("the prefix is not a number"))?;
        if prefix > width {
            return Err(error("the prefix is longer than the address"));
        }
        if host_bits_set(network, prefix) {
            return Err(error("bits are set after the prefix"));
        }
        Ok(Cidr { network, prefix })
    }
}

fn host_bits_set(network: IpAddr, prefix: u8) -> bool {
    let (bits, width) = match network {
        IpAddr::V4(v4) => (u128::from(v4.to_bits()), 32u8),
        IpAddr::V6(v6) => (v6.to_bits(), 128u8),
    };
    let host_bits = u32::from(width - prefix);
    if host_bits >= 128 { bits != 0 } else { bits & ((1u128 << host_bits) - 1) != 0 }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// Which targets outbound requests may reach: public unicast addresses, and the others
/// only when private targets are allowed or the address is in an allowed range.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetPolicy {
    /// Every address is allowed (`allow_private_targets`, on in `outbox dev`).
    pub allow_private: bool,
    /// Ranges allowed although they are not public (`[webhooks] allowed_cidrs`).
    pub allowed: Vec<Cidr>,
}

impl TargetPolicy {
    /// `Ok` when a request may connect to `ip`; else why not, naming the address.
    pub fn check(&self, ip: IpAddr) -> Result<(), String> {
        let Some(why) = refusal(ip) else { return Ok(()) };
        if self.allow_private || self.allowed.iter().any(|range| range.contains(ip)) {
            return Ok(());
        }
        Err(format!("{ip} is {why}; private targets are not allowed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn private_and_special_addresses_are_refused() {
        let refused = [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.255.255.254",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.1.2.3",
            "::127.0.0.1",
            "64:ff9b::10.0.0.1",
            "64:ff9b:1::1",
            "100::1",
            "2001::1",
            "2001:db8::1",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "3fff::1",
            "5f00::1",
            "fc00::1",
            "fd00:ec2::254",
            "fe80::1",
            "fec0::1",
            "ff02::1",
        ];
        for text in refused {
            assert!(refusal(ip(text)).is_some(), "{text} is refused");
        }
    }

    #[test]
    fn public_addresses_pass_even_when_embedded() {
        let public = [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "169.255.0.1",
            "192.0.1.1",
            "198.20.0.1",
            "223.255.255.255",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::8.8.8.8",
            "2002:0808:0808::1",
        ];
        for text in public {
            assert_eq!(refusal(ip(text)), None, "{text} is public");
        }
    }

    #[test]
    fn ranges_parse_and_contain() {
        let range: Cidr = "10.20.0.0/16".parse().unwrap();
        assert!(range.contains(ip("10.20.255.1")));
        assert!(range.contains(ip("::ffff:10.20.0.9")), "a mapped address is its IPv4 address");
        assert!(!range.contains(ip("10.21.0.1")));
        assert!(!range.contains(ip("fd00::1")));
        let v6: Cidr = "fd00:1::/32".parse().unwrap();
        assert!(v6.contains(ip("fd00:1:ffff::1")) && !v6.contains(ip("fd00:2::1")));
        let everything: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(everything.contains(ip("127.0.0.1")));
        assert!("::/0".parse::<Cidr>().unwrap().contains(ip("::1")));
        assert_eq!(range.to_string(), "10.20.0.0/16");
        for bad in ["10.20.0.0", "10.20.0.1/16", "1::/0", "10.20.0.0/33", "fd00::/129", "nope/8", "10.0.0.0/x", ""] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad:?} is refused");
        }
    }

    #[test]
    fn the_policy_lifts_the_rule_by_switch_or_by_range() {
        let strict = TargetPolicy::default();
        let refused = strict.check(ip("169.254.169.254")).unwrap_err();
        assert!(refused.contains("169.254.169.254 is a link-local address"), "{refused}");
        assert!(strict.check(ip("8.8.8.8")).is_ok());
        let ranged = TargetPolicy { allow_private: false, allowed: vec!["10.20.0.0/16".parse().unwrap()] };
        assert!(ranged.check(ip("10.20.3.4")).is_ok());
        assert!(ranged.check(ip("10.21.3.4")).is_err());
        assert!(ranged.check(ip("127.0.0.1")).is_err());
        let open = TargetPolicy { allow_private: true, allowed: Vec::new() };
        assert!(open.check(ip("127.0.0.1")).is_ok());
    }
}
