//! `--listen`: what a `HOST:PORT` may be, and binding it before anything
//! else starts.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};

/// The default listen address: loopback only, so nothing is exposed until an
/// operator says so. Port 9478 is not used by Prometheus or its common
/// exporters.
pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:9478";

/// Why `--listen` could not be used: one line for people, saying what is
/// wrong rather than only that something is.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListenError {
    /// Not of the form `HOST:PORT`.
    #[error("invalid --listen address {0:?}: expected HOST:PORT, e.g. 127.0.0.1:9478, [::1]:9478 or :9478")]
    NotHostPort(String),
    /// An IPv6 address without the brackets that set it apart from the port.
    #[error("invalid --listen address {0:?}: put an IPv6 address in brackets, e.g. [::1]:9478")]
    BareIpv6(String),
    /// The port is not a number from 0 to 65535.
    #[error("invalid --listen address {listen:?}: port {port:?} is not a number from 0 to 65535")]
    BadPort {
        /// What was asked for.
        listen: String,
        /// The port part.
        port: String,
    },
    /// The host name does not resolve.
    #[error("invalid --listen address {listen:?}: cannot resolve host {host:?}: {source}")]
    Unresolvable {
        /// What was asked for.
        listen: String,
        /// The host part.
        host: String,
        /// The resolver's answer.
        source: std::io::Error,
    },
    /// Bind failed (in use, not local, no permission).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// What was asked for.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Resolves `HOST:PORT` (`:PORT` means every IPv4 interface).
pub(crate) fn resolve_listen(listen: &str) -> Result<Vec<SocketAddr>, ListenError> {
    let listen_all;
    let spec = if let Some(port) = listen.strip_prefix(':') {
        listen_all = format!("0.0.0.0:{port}");
        listen_all.as_str()
    } else {
        listen
    };
    if let Ok(addr) = spec.parse::<SocketAddr>() {
        return Ok(vec![addr]);
    }
    // A host name: resolve it (only at start, so blocking is fine). Reject
    // anything without an explicit port.
    let (host, port) = spec
        .rsplit_once(':')
        .ok_or_else(|| ListenError::NotHostPort(listen.to_owned()))?;
    if host.is_empty() {
        return Err(ListenError::NotHostPort(listen.to_owned()));
    }
    if host.contains(':') && !host.starts_with('[') {
        return Err(ListenError::BareIpv6(listen.to_owned()));
    }
    if port.parse::<u16>().is_err() {
        return Err(ListenError::BadPort {
            listen: listen.to_owned(),
            port: port.to_owned(),
        });
    }
    let unresolvable = |source| ListenError::Unresolvable {
        listen: listen.to_owned(),
        host: host.to_owned(),
        source,
    };
    let addrs: Vec<SocketAddr> = spec.to_socket_addrs().map_err(unresolvable)?.collect();
    if addrs.is_empty() {
        return Err(unresolvable(std::io::Error::other("no addresses")));
    }
    Ok(addrs)
}

/// Binds `--listen`, before anything else starts, so a busy port fails fast.
pub(crate) fn bind(listen: &str) -> Result<TcpListener, ListenError> {
    let addrs = resolve_listen(listen)?;
    let listener = TcpListener::bind(addrs.as_slice()).map_err(|source| ListenError::Bind {
        addr: listen.to_owned(),
        source,
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| ListenError::Bind {
            addr: listen.to_owned(),
            source,
        })?;
    Ok(listener)
}

/// [`bind`], or no listener when `off` (`--no-listen`: pushing only).
pub(crate) fn bind_unless(off: bool, listen: &str) -> Result<Option<TcpListener>, ListenError> {
    if off {
        return Ok(None);
    }
    bind(listen).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        assert_eq!(
            resolve_listen("127.0.0.1:9478").unwrap(),
            ["127.0.0.1:9478".parse::<SocketAddr>().unwrap()]
        );
        assert_eq!(
            resolve_listen("[::1]:0").unwrap(),
            ["[::1]:0".parse::<SocketAddr>().unwrap()]
        );
        assert_eq!(
            resolve_listen(":9478").unwrap(),
            ["0.0.0.0:9478".parse::<SocketAddr>().unwrap()]
        );
        assert!(resolve_listen("localhost:0").is_ok());
        for not_host_port in ["", "127.0.0.1", "localhost", ":"] {
            assert!(
                matches!(
                    resolve_listen(not_host_port),
                    Err(ListenError::NotHostPort(_) | ListenError::BadPort { .. })
                ),
                "{not_host_port}"
            );
        }
        for bad_port in ["127.0.0.1:", "127.0.0.1:99999", ":x", "localhost:65536"] {
            assert!(
                matches!(resolve_listen(bad_port), Err(ListenError::BadPort { .. })),
                "{bad_port}"
            );
        }
        assert!(matches!(
            resolve_listen("::1:9478"),
            Err(ListenError::BareIpv6(_))
        ));
        // `.invalid` never resolves (RFC 6761).
        let err = resolve_listen("no-such-host.invalid:9478").unwrap_err();
        assert!(matches!(err, ListenError::Unresolvable { .. }), "{err}");
        assert!(
            err.to_string()
                .starts_with("invalid --listen address \"no-such-host.invalid:9478\": cannot resolve host \"no-such-host.invalid\": "),
            "{err}"
        );
        assert_eq!(
            resolve_listen("127.0.0.1:99999").unwrap_err().to_string(),
            "invalid --listen address \"127.0.0.1:99999\": port \"99999\" is not a number from 0 to 65535"
        );
    }
}
