//! Where a kubeconfig may send the host. A kubeconfig Secret is written by whoever may write
//! Secrets (a tenant, for a target cluster), so its `server` could point the host, with the
//! credentials of that kubeconfig or none, at services only the host's pod reaches: its own
//! loopback, the node's link-local addresses, the cloud's metadata service (which hands out the
//! node's credentials), the cluster's own Services and Pods, the private networks around it.
//! Those addresses, and plain `http://`, are refused unless the operator allows them
//! (`ksm-adapter run --allow-cluster-addresses`), as the usual SSRF deny lists refuse them.
//!
//! The address checked is the one the client connects to: an IP literal as it is, a host name
//! by what it resolves to — when the client is made, so that a refusal is named in the status
//! at once, and again at every connection ([`Resolver`]), so that a name that resolves to
//! another address later (DNS rebinding) does not pass. An IPv6 address that stands for an
//! IPv4 one is judged by that IPv4 address too ([`embedded_v4`]).
//!
//! A refusal names the class and the flag value that allows it, never the server, host name or
//! address: those are read from the Secret, and no status carries what a Secret holds. They
//! are logged at debug level, for the operator.

use futures::future::BoxFuture;
use http::Uri;
use hyper_util::client::legacy::connect::dns::{GaiResolver, InvalidNameError, Name};
use ipnet::IpNet;
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
    /// The host's own machine: 127.0.0.0/8, ::1, 0.0.0.0/8, ::, `localhost`.
    Loopback,
    /// 169.254.0.0/16 and fe80::/10: the node's link-local services.
    LinkLocal,
    /// A cloud's instance metadata service, by address or name.
    Metadata,
    /// The cluster's own Service and Pod CIDRs, as the operator gives them (`--cluster-cidrs`).
    Cluster,
    /// Networks not routed on the internet ([`PRIVATE`]): the ones around the cluster.
    Private,
}

impl Class {
    /// The value of `--allow-cluster-addresses` that allows it.
    pub fn flag_value(self) -> &'static str {
        match self {
            Class::Http => "http",
            Class::Loopback => "loopback",
            Class::LinkLocal => "link-local",
            Class::Metadata => "metadata",
            Class::Cluster => "cluster",
            Class::Private => "private",
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
            Class::Cluster => "an address of the cluster's own Services or Pods (--cluster-cidrs)",
            Class::Private => "a private address",
        })
    }
}

/// Cloud metadata services' addresses: AWS, GCP, Azure, OpenStack and others (169.254.169.254),
/// AWS ECS and EKS (169.254.170.2, 169.254.170.23), AWS over IPv6 (fd00:ec2::254, fd00:ec2::23),
/// Alibaba Cloud (100.100.100.200), Azure's WireServer (168.63.129.16, a public address that
/// hands a VM its provisioning data).
const METADATA_ADDRESSES: [IpAddr; 7] = [
    IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 2)),
    IpAddr::V4(Ipv4Addr::new(169, 254, 170, 23)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23)),
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
    IpAddr::V4(Ipv4Addr::new(168, 63, 129, 16)),
];

/// Names of metadata services, refused by name too: where the host's resolver does not know
/// them, what they resolve to elsewhere must not matter.
const METADATA_NAMES: [&str; 3] = ["metadata.google.internal", "metadata.goog", "instance-data.ec2.internal"];

/// `a.b.c.d/prefix`.
const fn v4(a: u8, b: u8, c: u8, d: u8, prefix: u8) -> IpNet {
    IpNet::new_assert(IpAddr::V4(Ipv4Addr::new(a, b, c, d)), prefix)
}

/// The IPv6 network of the leading `segments`, `/prefix`.
const fn v6(segments: [u16; 3], prefix: u8) -> IpNet {
    let [a, b, c] = segments;
    IpNet::new_assert(IpAddr::V6(Ipv6Addr::new(a, b, c, 0, 0, 0, 0, 0)), prefix)
}

/// The host's own machine and the node's link-local networks; `::/127` is `::` and `::1`.
const LOCAL: [(IpNet, Class); 5] = [
    (v4(0, 0, 0, 0, 8), Class::Loopback),
    (v4(127, 0, 0, 0, 8), Class::Loopback),
    (v6([0, 0, 0], 127), Class::Loopback),
    (v4(169, 254, 0, 0, 16), Class::LinkLocal),
    (v6([0xfe80, 0, 0], 10), Class::LinkLocal),
];

/// Networks not routed on the internet: RFC 1918 (10/8, 172.16/12, 192.168/16), carrier-grade
/// NAT (100.64/10, which Tailscale and some clouds use inside), IETF protocol assignments
/// (192.0.0/24), benchmarking (198.18/15), the reserved 240/4 (GKE may give it to Pods),
/// unique local (fc00::/7), the deprecated site-local (fec0::/10) and local-use NAT64
/// (64:ff9b:1::/48: where in it an IPv4 address sits is the network's choice, so it is judged
/// as a whole).
const PRIVATE: [IpNet; 10] = [
    v4(10, 0, 0, 0, 8),
    v4(172, 16, 0, 0, 12),
    v4(192, 168, 0, 0, 16),
    v4(100, 64, 0, 0, 10),
    v4(192, 0, 0, 0, 24),
    v4(198, 18, 0, 0, 15),
    v4(240, 0, 0, 0, 4),
    v6([0xfc00, 0, 0], 7),
    v6([0xfec0, 0, 0], 10),
    v6([0x64, 0xff9b, 1], 48),
];

/// The IPv4 address the IPv6 address `ip` stands for, where a connection to it may reach that
/// IPv4 address: IPv4-compatible (`::a.b.c.d`), IPv4-mapped (`::ffff:a.b.c.d`), IPv4-translated
/// (`::ffff:0:a.b.c.d`), NAT64's well-known prefix (`64:ff9b::a.b.c.d`) and 6to4
/// (`2002:aabb:ccdd::/48`, whose relay, where the node has one, tunnels to `a.b.c.d`). Teredo
/// (2001::/32) is not: its client address is reached only through a Teredo relay, which a
/// node's pods do not run.
fn embedded_v4(ip: IpAddr) -> Option<Ipv4Addr> {
    let IpAddr::V6(v6) = ip else { return None };
    let o = v6.octets();
    match v6.segments() {
        [0, 0, 0, 0, 0, 0 | 0xffff, _, _] | [0, 0, 0, 0, 0xffff, 0, _, _] | [0x64, 0xff9b, 0, 0, 0, 0, _, _] => {
            Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]))
        }
        [0x2002, ..] => Some(Ipv4Addr::new(o[2], o[3], o[4], o[5])),
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

/// How a refused server came to its class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// By its URL's scheme.
    Scheme,
    /// By the IP address it names.
    Address,
    /// By its host name alone (`localhost`, a metadata service's name).
    Name,
    /// By an address its host name resolves to.
    Resolves,
}

impl fmt::Display for How {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            How::Scheme => "the server uses",
            How::Address => "the server is",
            How::Name => "the server's host name is reserved for",
            How::Resolves => "the server's host name resolves to",
        })
    }
}

/// Why a kubeconfig may not send the host where it points. Nothing of what the kubeconfig says
/// (its server, host name, the addresses it resolves to) is in the text.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// An address, name or scheme of a class the operator does not allow.
    #[error(
        "{how} {class}, which the host does not connect to unless --allow-cluster-addresses names {}",
        .class.flag_value()
    )]
    Class {
        /// How the server came to the class.
        how: How,
        /// The class.
        class: Class,
    },
    /// A server URL without a host.
    #[error("the server's URL names no host")]
    NoHost,
    /// A host that is no domain name.
    #[error("the server's host name is no domain name: {0}")]
    InvalidName(#[source] InvalidNameError),
    /// A host that does not resolve.
    #[error("the server's host name does not resolve: {0}")]
    Unresolved(#[source] std::io::Error),
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

/// What the operator allows: the classes named (none by default), and the cluster's own
/// Service and Pod CIDRs, which are [`Class::Cluster`]'s.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowed {
    classes: BTreeSet<Class>,
    cluster: Vec<IpNet>,
}

impl FromIterator<Class> for Allowed {
    fn from_iter<I: IntoIterator<Item = Class>>(classes: I) -> Self {
        Self { classes: classes.into_iter().collect(), cluster: Vec::new() }
    }
}

impl Allowed {
    /// These, with `cidrs` the cluster's own Service and Pod CIDRs.
    pub fn with_cluster_cidrs(self, cidrs: impl IntoIterator<Item = IpNet>) -> Self {
        Self { cluster: cidrs.into_iter().collect(), ..self }
    }

    /// Whether `class` is allowed.
    pub fn allows(&self, class: Class) -> bool {
        self.classes.contains(&class)
    }

    /// The class of `ip`, if refused by default: by the address itself, else by the IPv4
    /// address it stands for. A metadata address is only that, wherever it lies; the cluster's
    /// CIDRs come before the private networks they lie in.
    pub fn class_of(&self, ip: IpAddr) -> Option<Class> {
        let as_is = |ip: IpAddr| {
            if METADATA_ADDRESSES.contains(&ip) {
                return Some(Class::Metadata);
            }
            let local = LOCAL.iter().find(|(net, _)| net.contains(&ip)).map(|(_, class)| *class);
            local
                .or_else(|| self.cluster.iter().any(|net| net.contains(&ip)).then_some(Class::Cluster))
                .or_else(|| PRIVATE.iter().any(|net| net.contains(&ip)).then_some(Class::Private))
        };
        as_is(ip).or_else(|| embedded_v4(ip).and_then(|v4| as_is(IpAddr::V4(v4))))
    }

    /// Why a server of class `class`, come to as `how` says, is refused, if it is.
    fn judge(&self, class: Option<Class>, how: How) -> Result<(), Refused> {
        match class {
            Some(class) if !self.allows(class) => Err(Refused::Class { how, class }),
            _ => Ok(()),
        }
    }

    /// Checks the server URL `server` as far as it can without resolving: the scheme, an IP
    /// literal, a refused name. Returns the host name left to resolve, if any.
    fn check_server(&self, server: &Uri) -> Result<Option<String>, Refused> {
        let http = (server.scheme_str() != Some("https")).then_some(Class::Http);
        self.judge(http, How::Scheme)?;
        let host = server.host().ok_or(Refused::NoHost)?;
        if let Ok(ip) = IpAddr::from_str(host.trim_start_matches('[').trim_end_matches(']')) {
            self.judge(self.class_of(ip), How::Address)?;
            return Ok(None);
        }
        self.judge(class_of_name(host), How::Name)?;
        Ok(Some(host.to_string()))
    }

    /// Checks what the host name `name` resolved to: each address must pass, or a connection
    /// could fall through to a refused one.
    fn check_resolved(&self, name: &str, addresses: &[SocketAddr]) -> Result<(), Refused> {
        self.judge(class_of_name(name), How::Name)?;
        addresses.iter().try_for_each(|address| self.judge(self.class_of(address.ip()), How::Resolves))
    }
}

/// The resolver of a client of another cluster: the system's, then [`Allowed`]'s check of every
/// address, at every connection. `origin` (the kubeconfig's Secret and key) starts its errors
/// and its debug logs, which name what was refused.
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

    /// Checks the server URL `server` as far as it can without resolving (see
    /// [`Allowed::check_server`]): the host name left to resolve, if any.
    pub fn check_server(&self, server: &Uri) -> Result<Option<String>, Refused> {
        self.allowed.check_server(server).inspect_err(|refused| {
            tracing::debug!(kubeconfig = %self.origin, %server, "refused: {refused}");
        })
    }

    /// Resolves `host` and checks every address, as it does for each connection.
    pub async fn check(&self, host: &str) -> Result<(), Refused> {
        let name = Name::from_str(host).map_err(Refused::InvalidName).inspect_err(|refused| {
            tracing::debug!(kubeconfig = %self.origin, host, "refused: {refused}");
        })?;
        resolve(self.system.clone(), &self.allowed, &self.origin, name).await.map(drop)
    }
}

/// The addresses `system` resolves `name` to, each allowed by `allowed`; a refusal is logged
/// with what was refused, for the kubeconfig of `origin`.
async fn resolve(
    mut system: GaiResolver,
    allowed: &Allowed,
    origin: &str,
    name: Name,
) -> Result<Vec<SocketAddr>, Refused> {
    let host = name.as_str().to_string();
    let resolved: Vec<SocketAddr> = match system.call(name).await {
        Ok(resolved) => resolved.collect(),
        Err(source) => {
            tracing::debug!(kubeconfig = origin, host, "does not resolve: {source}");
            return Err(Refused::Unresolved(source));
        }
    };
    allowed.check_resolved(&host, &resolved).inspect_err(|refused| {
        tracing::debug!(kubeconfig = origin, host, addresses = ?resolved, "refused: {refused}");
    })?;
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
            let resolved =
                resolve(system, &allowed, &origin, name).await.map_err(|refused| RefusedFrom { origin, refused })?;
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

    /// The cluster's CIDRs of the tests: kubeadm's default Service CIDR, a Pod CIDR, an IPv6 one.
    fn cluster_cidrs() -> Vec<IpNet> {
        ["10.96.0.0/12", "10.244.0.0/16", "fd00:10:96::/108"].iter().map(|c| c.parse().unwrap()).collect()
    }

    #[test]
    fn each_refused_class_of_address_or_name_is_told() {
        let policy = Allowed::default().with_cluster_cidrs(cluster_cidrs());
        let class_of = |host: &str| match host.parse() {
            Ok(ip) => policy.class_of(ip),
            Err(_) => class_of_name(host),
        };
        for (host, class) in [
            ("127.0.0.1", Some(Class::Loopback)),
            ("127.1.2.3", Some(Class::Loopback)),
            ("::1", Some(Class::Loopback)),
            ("0.0.0.0", Some(Class::Loopback)),
            ("0.1.2.3", Some(Class::Loopback)),
            ("::", Some(Class::Loopback)),
            ("localhost", Some(Class::Loopback)),
            ("LocalHost.", Some(Class::Loopback)),
            ("api.localhost", Some(Class::Loopback)),
            ("169.254.1.1", Some(Class::LinkLocal)),
            ("fe80::1", Some(Class::LinkLocal)),
            ("169.254.169.254", Some(Class::Metadata)),
            ("fd00:ec2::254", Some(Class::Metadata)),
            ("100.100.100.200", Some(Class::Metadata)),
            ("168.63.129.16", Some(Class::Metadata)),
            ("metadata.google.internal", Some(Class::Metadata)),
            ("metadata.google.internal.", Some(Class::Metadata)),
            ("10.96.0.1", Some(Class::Cluster)),
            ("10.244.3.7", Some(Class::Cluster)),
            ("fd00:10:96::a", Some(Class::Cluster)),
            ("10.0.0.1", Some(Class::Private)),
            ("172.16.0.1", Some(Class::Private)),
            ("172.31.255.255", Some(Class::Private)),
            ("192.168.1.10", Some(Class::Private)),
            ("100.64.0.1", Some(Class::Private)),
            ("192.0.0.8", Some(Class::Private)),
            ("198.19.0.1", Some(Class::Private)),
            ("240.0.0.1", Some(Class::Private)),
            ("fd12:3456::1", Some(Class::Private)),
            ("fec0::1", Some(Class::Private)),
            ("64:ff9b:1::a00:1", Some(Class::Private)),
            // An IPv6 address that stands for an IPv4 one is judged by it.
            ("::ffff:127.0.0.1", Some(Class::Loopback)),
            ("::ffff:169.254.169.254", Some(Class::Metadata)),
            ("::ffff:0:10.96.0.10", Some(Class::Cluster)),
            ("::10.0.0.1", Some(Class::Private)),
            ("::127.0.0.1", Some(Class::Loopback)),
            ("64:ff9b::a9fe:a9fe", Some(Class::Metadata)),
            ("64:ff9b::192.168.0.1", Some(Class::Private)),
            ("2002:7f00:1::1", Some(Class::Loopback)),
            ("2002:a60:1::", Some(Class::Cluster)),
            ("64:ff9b::203.0.113.7", None),
            ("2002:cb00:7107::1", None),
            ("::ffff:203.0.113.7", None),
            ("172.32.0.1", None),
            ("100.128.0.1", None),
            ("203.0.113.7", None),
            ("2001:db8::1", None),
            ("api.example.com", None),
        ] {
            assert_eq!(class_of(host), class, "{host}");
        }
        assert_eq!(Allowed::default().class_of("10.96.0.1".parse().unwrap()), Some(Class::Private), "no CIDRs given");
    }

    #[test]
    fn a_server_is_refused_by_scheme_address_or_name_unless_its_class_is_allowed_and_never_quoted() {
        let uri = |s: &str| Uri::from_str(s).unwrap();
        let none = Allowed::default().with_cluster_cidrs(cluster_cidrs());
        for (server, class, how) in [
            ("http://api.example.com:6443", Class::Http, "the server uses plain http"),
            ("https://127.0.0.1:6443", Class::Loopback, "the server is a loopback address"),
            ("https://[::1]:6443", Class::Loopback, "the server is a loopback address"),
            ("https://169.254.10.1", Class::LinkLocal, "the server is a link-local address"),
            ("https://169.254.169.254", Class::Metadata, "the server is a cloud metadata address"),
            ("https://[fd00:ec2::254]", Class::Metadata, "the server is a cloud metadata address"),
            ("https://[64:ff9b::a9fe:a9fe]", Class::Metadata, "the server is a cloud metadata address"),
            ("https://10.96.0.1", Class::Cluster, "the server is an address of the cluster's own Services or Pods"),
            ("https://192.168.7.7:6443", Class::Private, "the server is a private address"),
            ("https://[::ffff:10.1.2.3]", Class::Private, "the server is a private address"),
            (
                "https://metadata.google.internal",
                Class::Metadata,
                "the server's host name is reserved for a cloud metadata address",
            ),
            ("https://localhost:6443", Class::Loopback, "the server's host name is reserved for a loopback address"),
        ] {
            let err = none.check_server(&uri(server)).unwrap_err().to_string();
            assert!(err.starts_with(how), "{server}: {err}");
            assert!(err.ends_with(&format!("--allow-cluster-addresses names {}", class.flag_value())), "{err}");
            let host = uri(server).host().unwrap().trim_matches(['[', ']']).to_string();
            assert!(!err.contains(&host), "{server}: the Secret's text is not quoted: {err}");
            let allowed = allowing(&[class]).with_cluster_cidrs(cluster_cidrs());
            assert!(allowed.check_server(&uri(server)).is_ok(), "{server} allowed by {class:?}");
        }
        assert_eq!(
            none.check_server(&uri("https://203.0.113.7:6443")).unwrap(),
            None,
            "an IP literal needs no resolving"
        );
        assert_eq!(none.check_server(&uri("https://api.example.com")).unwrap(), Some("api.example.com".into()));
        let loopback_only = allowing(&[Class::Loopback]);
        assert!(loopback_only.check_server(&uri("http://127.0.0.1")).is_err(), "http is its own class");
        assert!(allowing(&[Class::LinkLocal]).check_server(&uri("https://169.254.169.254")).is_err());
        let private_only = allowing(&[Class::Private]).with_cluster_cidrs(cluster_cidrs());
        assert!(private_only.check_server(&uri("https://10.96.0.1")).is_err(), "the cluster's CIDRs need `cluster`");
        assert!(private_only.check_server(&uri("https://[::ffff:127.0.0.1]")).is_err(), "loopback, however written");
    }

    #[test]
    fn every_address_a_name_resolves_to_must_pass() {
        let addresses = |ips: &[&str]| -> Vec<SocketAddr> {
            ips.iter().map(|ip| SocketAddr::new(ip.parse().unwrap(), 443)).collect()
        };
        let none = Allowed::default();
        assert!(none.check_resolved("api.example.com", &addresses(&["203.0.113.7", "2001:db8::1"])).is_ok());
        for (refused, class) in [("169.254.169.254", Class::Metadata), ("10.1.1.1", Class::Private)] {
            let err = none
                .check_resolved("rebound.example.com", &addresses(&["203.0.113.7", refused]))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(&format!("the server's host name resolves to {class}, which")), "{err}");
            assert!(!err.contains(refused) && !err.contains("rebound"), "{err}");
        }
        assert!(allowing(&[Class::Metadata]).check_resolved("x", &addresses(&["169.254.169.254"])).is_ok());
    }

    #[tokio::test]
    async fn a_connection_to_a_name_that_resolves_to_a_refused_address_is_refused() {
        let origin = "Secret team/web-kubeconfig key \"value\"";
        let mut refusing = Resolver::new(Arc::new(Allowed::default()), origin);
        let err = refusing.call(Name::from_str("localhost").unwrap()).await.unwrap_err().to_string();
        let reserved = "the server's host name is reserved for a loopback address";
        assert!(err.starts_with(&format!("{origin}: {reserved}")), "{err}");
        assert!(refusing.check("localhost").await.unwrap_err().to_string().starts_with(reserved));
        // Allowed, `localhost` is resolved, and what it resolves to judged address by address.
        let mut allowed = Resolver::new(Arc::new(allowing(&[Class::Loopback])), origin);
        let resolved: Vec<SocketAddr> = allowed.call(Name::from_str("localhost").unwrap()).await.unwrap().collect();
        assert!(!resolved.is_empty() && resolved.iter().all(|a| a.ip().is_loopback()), "{resolved:?}");
    }
}
