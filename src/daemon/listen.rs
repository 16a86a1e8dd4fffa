//! Binding the listeners: one per `export.listen` address, before any
//! thread starts.
//!
//! `[::]` (the default) is bound dual-stack (`IPV6_V6ONLY` off, whatever
//! `net.ipv6.bindv6only` says), so one socket takes IPv4 and IPv6; where
//! the host has IPv6 off, it falls back to `0.0.0.0` on the same port and
//! says so. socket2 sets the option std's `TcpListener::bind` cannot.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};

use socket2::{Domain, Protocol, Socket, Type};

/// Pending connections the kernel queues per listener (capped by
/// `net.core.somaxconn`).
const BACKLOG: i32 = 1024;

/// One bound listener, and what was done instead of what was asked.
pub struct Bound {
    pub listener: TcpListener,
    pub fallback: Option<String>,
}

fn bind_one(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(!addr.ip().is_unspecified())?;
    }
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Whether an error binding `[::]` means the host has no IPv6.
fn ipv6_is_off(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc_codes::EAFNOSUPPORT | libc_codes::EADDRNOTAVAIL | libc_codes::EPROTONOSUPPORT)
    )
}

/// The errno values of a missing IPv6 stack (Linux), named here so this
/// file needs no libc.
mod libc_codes {
    pub const EPROTONOSUPPORT: i32 = 93;
    pub const EAFNOSUPPORT: i32 = 97;
    pub const EADDRNOTAVAIL: i32 = 99;
}

/// Binds `addr`; `[::]` falls back to `0.0.0.0` where IPv6 is off.
pub fn bind(addr: SocketAddr) -> io::Result<Bound> {
    bind_with(addr, bind_one)
}

fn bind_with(
    addr: SocketAddr,
    mut bind_one: impl FnMut(SocketAddr) -> io::Result<TcpListener>,
) -> io::Result<Bound> {
    match bind_one(addr) {
        Ok(listener) => Ok(Bound {
            listener,
            fallback: None,
        }),
        Err(err) if addr.is_ipv6() && addr.ip().is_unspecified() && ipv6_is_off(&err) => {
            let v4 = SocketAddr::from((Ipv4Addr::UNSPECIFIED, addr.port()));
            let listener = bind_one(v4)?;
            Ok(Bound {
                listener,
                fallback: Some(format!(
                    "IPv6 is off on this host ({err}): serving IPv4 only on {v4} instead of {addr}"
                )),
            })
        }
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unspecified_ipv6_address_takes_ipv4_too() {
        let Ok(bound) = bind("[::]:0".parse().unwrap()) else {
            // No IPv6 here: the fallback test below covers this host.
            let bound = bind("[::]:0".parse().unwrap());
            assert!(bound.is_err() || bound.unwrap().fallback.is_some());
            return;
        };
        let port = bound.listener.local_addr().unwrap().port();
        if bound.fallback.is_none() {
            std::net::TcpStream::connect(("127.0.0.1", port)).expect("IPv4 reaches [::]");
        }
    }

    #[test]
    fn without_ipv6_the_default_falls_back_to_ipv4() {
        let mut tried = Vec::new();
        let bound = bind_with("[::]:0".parse().unwrap(), |addr| {
            tried.push(addr);
            if addr.is_ipv6() {
                Err(io::Error::from_raw_os_error(libc_codes::EAFNOSUPPORT))
            } else {
                bind_one(addr)
            }
        })
        .unwrap();
        assert_eq!(tried.len(), 2);
        assert!(bound.fallback.unwrap().contains("IPv6 is off"));
        // An address in use is not "IPv6 off": no fallback.
        let err = bind_with("[::]:9".parse().unwrap(), |_| {
            Err(io::Error::from(io::ErrorKind::AddrInUse))
        })
        .err()
        .unwrap();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        // A specific IPv6 address never falls back.
        assert!(
            bind_with("[::1]:0".parse().unwrap(), |_| Err(
                io::Error::from_raw_os_error(libc_codes::EADDRNOTAVAIL)
            ))
            .is_err()
        );
    }
}
