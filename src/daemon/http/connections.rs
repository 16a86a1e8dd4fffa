//! The open connections, and which one to close for a newcomer when all
//! `export.max_connections` are open: an idle one (no request in flight,
//! its response sent), of the peer holding the most, idle longest. Idle
//! sockets are the cheapest thing a server can give up, and a flood of
//! them from one client then costs that client its own oldest ones, not
//! the probes of another (`server.rs`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use tokio::sync::Notify;

pub(super) fn lock(registry: &Mutex<Registry>) -> MutexGuard<'_, Registry> {
    registry.lock().unwrap_or_else(|e| e.into_inner())
}

/// The open connections: which peer each is from, whether a request is in
/// flight on it, and since when it is idle.
pub(super) struct Registry {
    max: usize,
    next_id: u64,
    open: HashMap<u64, Open>,
}

struct Open {
    peer: IpAddr,
    in_flight: usize,
    idle_since: Instant,
    evicted: Arc<Notify>,
}

/// A connection let in: its id, and what tells it to close.
pub(super) struct Slot {
    pub id: u64,
    pub evicted: Arc<Notify>,
}

impl Registry {
    pub(super) fn new(max: usize) -> Registry {
        Registry {
            max,
            next_id: 0,
            open: HashMap::new(),
        }
    }

    /// Lets a connection from `peer` in, closing an idle one to make room
    /// when all are open; None when every open one has a request in flight.
    pub(super) fn admit(&mut self, peer: IpAddr, now: Instant) -> Option<Slot> {
        if self.open.len() >= self.max {
            let victim = self.victim()?;
            if let Some(open) = self.open.remove(&victim) {
                open.evicted.notify_one();
            }
        }
        self.next_id += 1;
        let evicted = Arc::new(Notify::new());
        self.open.insert(
            self.next_id,
            Open {
                peer,
                in_flight: 0,
                idle_since: now,
                evicted: Arc::clone(&evicted),
            },
        );
        Some(Slot {
            id: self.next_id,
            evicted,
        })
    }

    /// The idle connection to close: of the peer with the most open
    /// connections, the one idle longest.
    fn victim(&self) -> Option<u64> {
        let mut per_peer: HashMap<IpAddr, usize> = HashMap::new();
        for open in self.open.values() {
            *per_peer.entry(open.peer).or_default() += 1;
        }
        self.open
            .iter()
            .filter(|(_, open)| open.in_flight == 0)
            .max_by_key(|(id, open)| {
                let oldest_first = std::cmp::Reverse((open.idle_since, **id));
                (per_peer[&open.peer], oldest_first)
            })
            .map(|(id, _)| *id)
    }

    pub(super) fn remove(&mut self, id: u64) {
        self.open.remove(&id);
    }
}

/// One connection's hold on its registry entry, for marking requests.
#[derive(Clone)]
pub(super) struct Requests {
    pub registry: Arc<Mutex<Registry>>,
    pub id: u64,
}

impl Requests {
    pub(super) fn begin(&self) -> InFlight {
        if let Some(open) = lock(&self.registry).open.get_mut(&self.id) {
            open.in_flight += 1;
        }
        InFlight(self.clone())
    }
}

/// A request in flight; idle again (since now) when dropped.
pub(super) struct InFlight(Requests);

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(open) = lock(&self.0.registry).open.get_mut(&self.0.id) {
            open.in_flight = open.in_flight.saturating_sub(1);
            open.idle_since = Instant::now();
        }
    }
}

/// A response body that keeps its request in flight until it is sent
/// (held for its drop only).
pub(super) struct InFlightBody {
    pub body: Body,
    pub _in_flight: InFlight,
}

impl axum::body::HttpBody for InFlightBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_newcomer_closes_the_oldest_idle_connection_of_the_busiest_peer() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let (flood, probe): (IpAddr, IpAddr) =
            ("10.0.0.66".parse().unwrap(), "10.0.0.7".parse().unwrap());
        let registry = Arc::new(Mutex::new(Registry::new(3)));
        let a = lock(&registry).admit(probe, at(0)).unwrap();
        let b = lock(&registry).admit(flood, at(1)).unwrap();
        let c = lock(&registry).admit(flood, at(2)).unwrap();
        // Full: the flood's oldest idle one goes, not the probe's older one.
        let d = lock(&registry).admit(probe, at(3)).unwrap();
        assert!(!lock(&registry).open.contains_key(&b.id));
        assert!(lock(&registry).open.contains_key(&a.id));
        // A connection with a request in flight is never closed.
        let requests = |slot: &Slot| Requests {
            registry: Arc::clone(&registry),
            id: slot.id,
        };
        let busy = [&a, &c, &d].map(|slot| requests(slot).begin());
        assert!(
            lock(&registry).admit(flood, at(4)).is_none(),
            "all busy: refused"
        );
        drop(busy);
        // Idle again, in the order they finished: the probe's peer now
        // holds the most, and its oldest idle one goes.
        let e = lock(&registry).admit(flood, at(5)).unwrap();
        assert!(!lock(&registry).open.contains_key(&a.id));
        assert!(lock(&registry).open.contains_key(&c.id));
        assert_eq!(lock(&registry).open.len(), 3);
        lock(&registry).remove(e.id);
        assert_eq!(lock(&registry).open.len(), 2);
    }
}
