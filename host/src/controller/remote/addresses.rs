//! Where a kubeconfig may send the host. A kubeconfig Secret is written by whoever may write
//! Secrets (a tenant, for a target cluster), so its `server` could point the host, with the
//! credentials of that kubeconfig or none, at services only the host's pod reaches: its own
//! loopback, the node's link-local addresses, the cloud's metadata service (which hands out the
//! node's credentials). Those addresses, and plain `http://`, are refused unless the operator
//! allows them (`ksm-adapter run --allow-cluster-addresses`).
//!
//! The address checked is the one the client connects to: an IP literal as it is, a host name
//! by what it resolves to — when the client is made, so that a refusal is named in the status
//! at once, and again at every connection ([`Resolver`]), so that a name that resolves to
//! another address later (DNS rebinding) does not pass.

use futures::future::BoxFuture;
use http::Uri;
use hyper_util::client::legacy::connect::dns::{GaiResolver, InvalidNameError, Name};
use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::{BoxError, Service};

/// A kind of address the host does not connect to unless allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// `http://`: the credentials and every answer in clear.
    Http,
    /// The host's own machine: 127.0.0.0/8, ::1, the unspecified address, `localhost`.
    Loopback,
    /// 169.254.0.0/16 and fe80::/10: the node's link-local services.
    LinkLocal,
    /// A cloud's instance metadata service, by address or name.
    Metadata,
}

impl Class {
    /// The value of `--allow-cluster-addresses` that allows it.
    pub fn flag_value(self) -> &'static str {
        match self {
            Class::Http => "http",
            Class::Loopback => "loopback",
            Class::LinkLocal => "link-local",
            Class::Metadata => "metadata",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Class::Http => "plain http",
            Class::Loopback => "a loopback address",
            Class::LinkLocal => "a link-local address",
            Class::Metadata => "a cloud metadata address",
        })
    }
}

/// Cloud metadata services' addresses: AWS, GCP, Azure, OpenStack and others (169.254.169.254),
/// AWS ECS and EKS (169.254.170.2, 169.254.170.23), AWS over IPv6 (fd00:ec2::254, fd00:ec2::23),
/// Alibaba Cloud (100.100.100.200).
const METADATA_ADDRESSES: [IpAddr; 6] = [
    IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 2)),
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 23)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23)),
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
];

/// Names of metadata services, refused by name too: where the host's resolver does not know
/// them, what they resolve to elsewhere must not matter.
const METADATA_NAMES: [&str; 3] = ["metadata.google.internal", "metadata.goog", "instance-data.ec2.internal"];

/// The class of `ip`, if refused by default.
pub fn class_of_ip(ip: IpAddr) -> Option<Class> {
    let ip = ip.to_canonical(); // ::ffff:127.0.0.1 is 127.0.0.1
    if METADATA_ADDRESSES.contains(&ip) {
        return Some(Class::Metadata);
    }
    match ip {
        IpAddr::V4(v4) if v4.is_loopback() || v4.is_unspecified() => Some(Class::Loopback),
        IpAddr::V4(v4) if v4.is_link_local() => Some(Class::LinkLocal),
        IpAddr::V6(v6) if v6.is_loopback() || v6.is_unspecified() => Some(Class::Loopback),
        IpAddr::V6(v6) if v6.is_unicast_link_local() => Some(Class::LinkLocal),
        _ => None,
    }
}

/// The class of the host name `name` (not an IP literal) by the name alone, if refused by
/// default.
fn class_of_name(name: &str) -> Option<Class> {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        Some(Class::Loopback)
    } else if METADATA_NAMES.contains(&name.as_str()) {
        Some(Class::Metadata)
    } else {
        None
    }
}

/// Why a kubeconfig may not send the host where it points, naming the server, host or address.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// An address, name or scheme of a class the operator does not allow.
    #[error(
        "{what}: {class}, which the host does not connect to unless --allow-cluster-addresses names {}",
        .class.flag_value()
    )]
    Class {
        /// The server, host or address, and how it came to it (`host x resolves to y`).
        what: String,
        /// Its class.
        class: Class,
    },
    /// A server URL without a host.
    #[error("server {0} names no host")]
    NoHost(Uri),
    /// A host that is no domain name.
    #[error("host {host}: {source}")]
    InvalidName {
        /// The host.
        host: String,
        /// Why.
        source: InvalidNameError,
    },
    /// A host that does not resolve.
    #[error("host {host} does not resolve: {source}")]
    Unresolved {
        /// The host.
        host: String,
        /// The resolver's error.
        source: std::io::Error,
    },
}

/// A connection [`Resolver`] refused, naming the kubeconfig.
#[derive(Debug, thiserror::Error)]
#[error("{origin}: {refused}")]
pub struct RefusedFrom {
    /// The kubeconfig's Secret and key.
    origin: Arc<str>,
    /// Why.
    #[source]
    refused: Refused,
}

/// The classes the operator allows; none by default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowed(BTreeSet<Class>);

impl FromIterator<Class> for Allowed {
    fn from_iter<I: IntoIterator<Item = Class>>(classes: I) -> Self {
        Self(classes.into_iter().collect())
    }
}

impl Allowed {
    /// Whether `class` is allowed.
    pub fn allows(&self, class: Class) -> bool {
        self.0.contains(&class)
    }

    /// Why `what` (an address, or the server URL) of class `class` is refused, if it is.
    fn judge(&self, class: Option<Class>, what: impl fmt::Display) -> Result<(), Refused> {
        match class {
            Some(class) if !self.allows(class) => Err(Refused::Class { what: what.to_string(), class }),
            _ => Ok(()),
        }
    }

    /// Checks the server URL `server` as far as it can without resolving: the scheme, an IP
    /// literal, a refused name. Returns the host name left to resolve, if any.
    pub fn check_server(&self, server: &Uri) -> Result<Option<String>, Refused> {
        let http = (server.scheme_str() != Some("https")).then_some(Class::Http);
        self.judge(http, format_args!("server {server}"))?;
        let host = server.host().ok_or_else(|| Refused::NoHost(server.clone()))?;
        if let Ok(ip) = IpAddr::from_str(host.trim_start_matches('[').trim_end_matches(']')) {
            self.judge(class_of_ip(ip), format_args!("server {server} connects to {ip}"))?;
            return Ok(None);
        }
        self.judge(class_of_name(host), format_args!("server {server} names {host}"))?;
        Ok(Some(host.to_string()))
    }

    /// Checks what the host name `name` resolved to: each address must pass, or a connection
    /// could fall through to a refused one.
    fn check_resolved(&self, name: &str, addresses: &[SocketAddr]) -> Result<(), Refused> {
        self.judge(class_of_name(name), format_args!("host {name}"))?;
        for address in addresses {
            self.judge(class_of_ip(address.ip()), format_args!("host {name} resolves to {}", address.ip()))?;
        }
        Ok(())
    }
}

/// The resolver of a client of another cluster: the system's, then [`Allowed`]'s check of every
/// address, at every connection. `origin` (the kubeconfig's Secret and key) starts its errors.
#[derive(Clone)]
pub struct Resolver {
    allowed: Arc<Allowed>,
    origin: Arc<str>,
    system: GaiResolver,
}

impl Resolver {
    /// A resolver allowing `allowed`, for the kubeconfig of `origin`.
    pub fn new(allowed: Arc<Allowed>, origin: &str) -> Self {
        Self { allowed, origin: origin.into(), system: GaiResolver::new() }
    }

    /// What it allows.
    pub fn allowed(&self) -> &Allowed {
        &self.allowed
    }

    /// Resolves `host` and checks every address, as it does for each connection.
    pub async fn check(&self, host: &str) -> Result<(), Refused> {
        let name = Name::from_str(host).map_err(|source| Refused::InvalidName { host: host.into(), source })?;
        resolve(self.system.clone(), &self.allowed, name).await.map(drop)
    }
}

/// The addresses `system` resolves `name` to, each allowed by `allowed`.
async fn resolve(mut system: GaiResolver, allowed: &Allowed, name: Name) -> Result<Vec<SocketAddr>, Refused> {
    let host = name.as_str().to_string();
    let resolved = system.call(name).await.map_err(|source| Refused::Unresolved { host: host.clone(), source })?;
    let resolved: Vec<SocketAddr> = resolved.collect();
    allowed.check_resolved(&host, &resolved)?;
    Ok(resolved)
}

impl Service<Name> for Resolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let (system, allowed, origin) = (self.system.clone(), self.allowed.clone(), self.origin.clone());
        Box::pin(async move {
            let resolved = resolve(system, &allowed, name).await.map_err(|refused| RefusedFrom { origin, refused })?;
            Ok(resolved.into_iter())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowing(classes: &[Class]) -> Allowed {
        classes.iter().copied().collect()
    }

    #[test]
    fn each_refused_class_of_address_or_name_is_told() {
        let class_of = |host: &str| match host.parse() {
            Ok(ip) => class_of_ip(ip),
            Err(_) => class_of_name(host),
        };
        for (host, class) in [
            ("127.0.0.1", Some(Class::Loopback)),
            ("127.1.2.3", Some(Class::Loopback)),
            ("::1", Some(Class::Loopback)),
            ("0.0.0.0", Some(Class::Loopback)),
            ("::", Some(Class::Loopback)),
            ("::ffff:127.0.0.1", Some(Class::Loopback)),
            ("localhost", Some(Class::Loopback)),
            ("LocalHost.", Some(Class::Loopback)),
            ("api.localhost", Some(Class::Loopback)),
            ("169.254.1.1", Some(Class::LinkLocal)),
            ("fe80::1", Some(Class::LinkLocal)),
            ("169.254.169.254", Some(Class::Metadata)),
            ("::ffff:169.254.169.254", Some(Class::Metadata)),
            ("fd00:ec2::254", Some(Class::Metadata)),
            ("100.100.100.200", Some(Class::Metadata)),
            ("metadata.google.internal", Some(Class::Metadata)),
            ("metadata.google.internal.", Some(Class::Metadata)),
            ("10.0.0.1", None),
            ("192.168.1.10", None),
            ("203.0.113.7", None),
            ("2001:db8::1", None),
            ("api.example.com", None),
        ] {
            assert_eq!(class_of(host), class, "{host}");
        }
    }

    #[test]
    fn a_server_is_refused_by_scheme_address_or_name_unless_its_class_is_allowed() {
        let uri = |s: &str| Uri::from_str(s).unwrap();
        let none = Allowed::default();
        for (server, class, address) in [
            ("http://api.example.com:6443", Class::Http, "server http://api.example.com:6443/"),
            ("https://127.0.0.1:6443", Class::Loopback, "server https://127.0.0.1:6443/ connects to 127.0.0.1"),
            ("https://[::1]:6443", Class::Loopback, "connects to ::1"),
            ("https://169.254.10.1", Class::LinkLocal, "connects to 169.254.10.1"),
            ("https://169.254.169.254", Class::Metadata, "connects to 169.254.169.254"),
            ("https://[fd00:ec2::254]", Class::Metadata, "connects to fd00:ec2::254"),
            ("https://metadata.google.internal", Class::Metadata, "names metadata.google.internal"),
            ("https://localhost:6443", Class::Loopback, "names localhost"),
        ] {
            let err = none.check_server(&uri(server)).unwrap_err().to_string();
            assert!(err.contains(&format!("{address}: {class}, which")), "{server}: {err}");
            assert!(err.ends_with(&format!("--allow-cluster-addresses names {}", class.flag_value())), "{err}");
            let allowed = allowing(&[class]);
            assert!(allowed.check_server(&uri(server)).is_ok(), "{server} allowed by {class:?}");
        }
        assert_eq!(none.check_server(&uri("https://10.0.0.1:6443")).unwrap(), None, "an IP literal needs no resolving");
        assert_eq!(none.check_server(&uri("https://api.example.com")).unwrap(), Some("api.example.com".into()));
        let loopback_only = allowing(&[Class::Loopback]);
        assert!(loopback_only.check_server(&uri("http://127.0.0.1")).is_err(), "http is its own class");
        assert!(allowing(&[Class::LinkLocal]).check_server(&uri("https://169.254.169.254")).is_err());
    }

    #[test]
    fn every_address_a_name_resolves_to_must_pass() {
        let addresses = |ips: &[&str]| -> Vec<SocketAddr> {
            ips.iter().map(|ip| SocketAddr::new(ip.parse().unwrap(), 443)).collect()
        };
        let none = Allowed::default();
        assert!(none.check_resolved("api.example.com", &addresses(&["203.0.113.7", "2001:db8::1"])).is_ok());
        let err = none
            .check_resolved("rebound.example.com", &addresses(&["203.0.113.7", "169.254.169.254"]))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("host rebound.example.com resolves to 169.254.169.254: a cloud metadata"), "{err}");
        assert!(allowing(&[Class::Metadata]).check_resolved("x", &addresses(&["169.254.169.254"])).is_ok());
    }

    #[tokio::test]
    async fn a_connection_to_a_name_that_resolves_to_a_refused_address_is_refused() {
        let origin = "Secret team/web-kubeconfig key \"value\"";
        let mut refusing = Resolver::new(Arc::new(Allowed::default()), origin);
        let err = refusing.call(Name::from_str("localhost").unwrap()).await.unwrap_err().to_string();
        assert!(err.starts_with(&format!("{origin}: host localhost: a loopback address")), "{err}");
        assert!(refusing.check("localhost").await.unwrap_err().to_string().starts_with("host localhost: a loopback"));
        // Allowed, `localhost` is resolved, and what it resolves to judged address by address.
        let mut allowed = Resolver::new(Arc::new(allowing(&[Class::Loopback])), origin);
        let resolved: Vec<SocketAddr> = allowed.call(Name::from_str("localhost").unwrap()).await.unwrap().collect();
        assert!(!resolved.is_empty() && resolved.iter().all(|a| a.ip().is_loopback()), "{resolved:?}");
    }
}
