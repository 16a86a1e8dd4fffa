//! The open connections, and which one to close for a newcomer when all
//! `export.max_connections` are open: one not shielded, of the peer
//! holding the most, idle longest. Idle sockets are the cheapest thing a
//! server can give up, and a flood of them from one client then costs that
//! client its own oldest ones, not the probes of another (`server.rs`).
//!
//! Only a request that has passed authentication (or needs none) shields
//! its connection: one still waiting for its bcrypt check, or refused,
//! does not. Otherwise 64 keep-alive sockets, each holding pipelined
//! requests with a wrong password queued for bcrypt, kept every slot "in
//! flight" and every probe got 503. A shielded connection is closed only
//! for a peer holding less than its fair share (the slots divided among
//! the peers holding them and the newcomer) when every slot is shielded,
//! and then the newest of the peer holding the most. A connection that has
//! carried a request counts as idle only after `IDLE_GRACE` with nothing in
//! flight: between two pipelined requests it has none for a moment.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use tokio::sync::Notify;

/// How long a connection must have had nothing in flight to count as
/// idle: a connection with pipelined requests has none in flight between
/// one response's end and the next request's start, for microseconds.
const IDLE_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

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
    /// Requests in flight that passed authentication.
    shielded: usize,
    /// It has carried a request: nothing in flight then means between two.
    served: bool,
    /// A request on it had its credentials refused (or was told to retry
    /// its check): the first to go, before any of its peer's others.
    refused: bool,
    idle_since: Instant,
    opened: u64,
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

    /// Lets a connection from `peer` in, closing another to make room
    /// when all are open; None when every open one is shielded and the
    /// newcomer's peer already holds its fair share.
    pub(super) fn admit(&mut self, peer: IpAddr, now: Instant) -> Option<Slot> {
        if self.open.len() >= self.max {
            let victim = self.victim(now).or_else(|| self.over_fair_share(peer))?;
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
                shielded: 0,
                served: false,
                refused: false,
                idle_since: now,
                opened: self.next_id,
                evicted: Arc::clone(&evicted),
            },
        );
        Some(Slot {
            id: self.next_id,
            evicted,
        })
    }

    /// The connections each peer holds.
    fn per_peer(&self) -> HashMap<IpAddr, usize> {
        let mut per_peer: HashMap<IpAddr, usize> = HashMap::new();
        for open in self.open.values() {
            *per_peer.entry(open.peer).or_default() += 1;
        }
        per_peer
    }

    /// The connection to close: one not shielded by an authenticated
    /// request, of the peer with the most open connections; of those, one
    /// whose credentials were refused, else the one idle longest.
    fn victim(&self, now: Instant) -> Option<u64> {
        let per_peer = self.per_peer();
        self.open
            .iter()
            .filter(|(_, open)| open.shielded == 0)
            // Nothing in flight for a moment only: between two pipelined
            // requests (the next not yet read), busy, not idle.
            .filter(|(_, open)| {
                open.in_flight > 0
                    || !open.served
                    || open.refused
                    || now.saturating_duration_since(open.idle_since) >= IDLE_GRACE
            })
            .max_by_key(|(id, open)| {
                let oldest_first = std::cmp::Reverse((open.idle_since, **id));
                (per_peer[&open.peer], open.refused, oldest_first)
            })
            .map(|(id, _)| *id)
    }

    /// When every connection is shielded: the newest connection of the
    /// peer holding the most, if that is more than its fair share and the
    /// newcomer's `peer` holds less than its own.
    fn over_fair_share(&self, newcomer: IpAddr) -> Option<u64> {
        let per_peer = self.per_peer();
        let peers = per_peer.len() + usize::from(!per_peer.contains_key(&newcomer));
        let fair = (self.max / peers.max(1)).max(1);
        if per_peer.get(&newcomer).copied().unwrap_or(0) >= fair {
            return None;
        }
        let (&hog, &held) = per_peer.iter().max_by_key(|(_, held)| **held)?;
        if held <= fair {
            return None;
        }
        self.open
            .iter()
            .filter(|(_, open)| open.peer == hog)
            .max_by_key(|(_, open)| open.opened)
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
            open.served = true;
        }
        InFlight {
            requests: self.clone(),
            authenticated: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// A request in flight; idle again (since now) when dropped.
pub(super) struct InFlight {
    requests: Requests,
    authenticated: Arc<AtomicBool>,
}

impl InFlight {
    /// What the router's guard marks once the request has passed
    /// authentication (a request extension).
    pub(super) fn passage(&self) -> Passage {
        Passage {
            requests: self.requests.clone(),
            authenticated: Arc::clone(&self.authenticated),
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // Relaxed: set before the response was made, on a task this drop
        // comes after; the registry's lock orders the counts.
        let shielded = self.authenticated.load(Ordering::Relaxed);
        if let Some(open) = lock(&self.requests.registry)
            .open
            .get_mut(&self.requests.id)
        {
            open.in_flight = open.in_flight.saturating_sub(1);
            if shielded {
                open.shielded = open.shielded.saturating_sub(1);
            }
            open.idle_since = Instant::now();
        }
    }
}

/// A request's way to say that it passed authentication, which shields its
/// connection from eviction until its response is sent.
#[derive(Clone)]
pub struct Passage {
    requests: Requests,
    authenticated: Arc<AtomicBool>,
}

impl Passage {
    /// The request passed authentication (or needs none): once only.
    pub fn passed(&self) {
        if self.authenticated.swap(true, Ordering::Relaxed) {
            return;
        }
        if let Some(open) = lock(&self.requests.registry)
            .open
            .get_mut(&self.requests.id)
        {
            open.shielded += 1;
        }
    }

    /// The request's credentials were refused, or its check could not be
    /// run now: its connection is the first to close for a newcomer.
    pub fn refused(&self) {
        if let Some(open) = lock(&self.requests.registry)
            .open
            .get_mut(&self.requests.id)
        {
            open.refused = true;
        }
    }

    /// The peer the connection is from.
    pub fn peer(&self) -> Option<IpAddr> {
        lock(&self.requests.registry)
            .open
            .get(&self.requests.id)
            .map(|open| open.peer)
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
        // Seconds apart: each is idle for longer than IDLE_GRACE.
        let at = |s: u64| t0 + Duration::from_secs(s);
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
        // A connection with an authenticated request in flight is never
        // closed for a peer that holds its fair share already.
        let requests = |slot: &Slot| Requests {
            registry: Arc::clone(&registry),
            id: slot.id,
        };
        let busy = [&a, &c, &d].map(|slot| requests(slot).begin());
        for request in &busy {
            request.passage().passed();
        }
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

    #[test]
    fn a_request_not_yet_authenticated_does_not_shield_its_connection() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let peer: IpAddr = "10.0.0.66".parse().unwrap();
        let registry = Arc::new(Mutex::new(Registry::new(2)));
        let requests = |slot: &Slot| Requests {
            registry: Arc::clone(&registry),
            id: slot.id,
        };
        let waiting = lock(&registry).admit(peer, at(0)).unwrap();
        let refused = lock(&registry).admit(peer, at(1)).unwrap();
        // Both have a request in flight: one waits for its bcrypt check,
        // the other's credentials were refused.
        let (first, second) = (requests(&waiting).begin(), requests(&refused).begin());
        second.passage().refused();
        let probe = lock(&registry).admit(peer, at(2)).unwrap();
        assert!(
            !lock(&registry).open.contains_key(&refused.id),
            "the refused one goes first, though younger"
        );
        let _probe_request = requests(&probe).begin();
        let scrape = lock(&registry).admit(peer, at(3));
        assert!(scrape.is_some(), "the waiting one goes next");
        assert!(!lock(&registry).open.contains_key(&waiting.id));
        drop((first, second));
    }

    #[test]
    fn a_peer_holding_every_slot_shielded_gives_one_up_to_another() {
        let t0 = Instant::now();
        let (hog, probe): (IpAddr, IpAddr) =
            ("10.0.0.66".parse().unwrap(), "10.0.0.7".parse().unwrap());
        let registry = Arc::new(Mutex::new(Registry::new(4)));
        let slots: Vec<Slot> = (0..4)
            .map(|_| lock(&registry).admit(hog, t0).unwrap())
            .collect();
        // An authenticated request in flight on the slot's connection.
        let shielded = |slot: &Slot| {
            let request = Requests {
                registry: Arc::clone(&registry),
                id: slot.id,
            }
            .begin();
            request.passage().passed();
            request
        };
        let busy: Vec<InFlight> = slots.iter().map(&shielded).collect();
        // The hog holds 4 of 4, over its fair share of 2: its newest goes.
        let admitted = lock(&registry).admit(probe, t0).unwrap();
        let first = shielded(&admitted);
        assert!(!lock(&registry).open.contains_key(&slots[3].id));
        let admitted = lock(&registry).admit(probe, t0).unwrap();
        let second = shielded(&admitted);
        assert!(!lock(&registry).open.contains_key(&slots[2].id));
        // Now 2 and 2: each holds its fair share; nobody else goes.
        assert!(lock(&registry).admit(probe, t0).is_none());
        drop((busy, first, second));
    }

    #[test]
    fn a_connection_between_two_pipelined_requests_is_not_idle() {
        let t0 = Instant::now();
        let peer: IpAddr = "10.0.0.66".parse().unwrap();
        let registry = Arc::new(Mutex::new(Registry::new(1)));
        let slot = lock(&registry).admit(peer, t0).unwrap();
        let request = Requests {
            registry: Arc::clone(&registry),
            id: slot.id,
        }
        .begin();
        drop(request);
        // Its response just ended: not idle yet.
        assert!(lock(&registry).admit(peer, Instant::now()).is_none());
        let later = Instant::now() + IDLE_GRACE;
        assert!(lock(&registry).admit(peer, later).is_some());
    }
}
