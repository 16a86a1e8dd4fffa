//! Expensive work, bounded: range reads of the record, plots and bcrypt
//! checks run on the blocking pool, a few at a time, and nothing a client
//! does makes more of them run or makes them outlive their request.
//!
//! - **A few at a time.** Each kind has its own permits (`Work`). A
//!   request that finds none free is answered 503 with `Retry-After: 1` at
//!   once: a flood of them costs a refusal each, not a thread each (40
//!   concurrent range reads once left 40 blocking threads reading for
//!   100 s and 364 MB locked; 256 wrong passwords, 515 threads and 1 GB).
//!   bcrypt waits up to `BCRYPT_WAIT` for its permit before it refuses,
//!   as Prometheus' exporter-toolkit serialises it, so that a burst of
//!   honest first logins is served. One peer holds at most
//!   `BCRYPT_PER_PEER` checks running or waiting, its further ones 503 at
//!   once: the permits are handed out in turn, so another peer's check
//!   waits for at most that many checks, whatever the first one sends.
//! - **Not past their request.** The work gets a `Cancel` that turns true
//!   when the request is dropped (its client went away, or
//!   `export.request_timeout` passed and the server aborted it); a range
//!   read asks it every 256 lines and stops. Its permit is held until the
//!   work has really stopped, so abandoned work still counts.
//! - **No memory left behind.** After each piece of work the heap's free
//!   memory goes back to the kernel (`sys::trim_heap`): under `mlockall`
//!   what a burst allocated would otherwise stay resident and locked.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::ApiError;
use crate::rt::sys;

/// Range reads and plots running at once; the rest are refused.
pub const HEAVY_AT_ONCE: usize = 2;
/// bcrypt checks running at once.
pub const BCRYPT_AT_ONCE: usize = 2;
/// How long a credential check waits for a bcrypt permit.
pub const BCRYPT_WAIT: Duration = Duration::from_secs(2);
/// bcrypt checks one peer may have running or waiting at once.
pub const BCRYPT_PER_PEER: usize = BCRYPT_AT_ONCE;

/// The permits of each kind of expensive work.
#[derive(Clone)]
pub struct Work {
    heavy: Arc<Semaphore>,
    bcrypt: Arc<Semaphore>,
    /// Checks running or waiting, by peer; a peer with none has no entry,
    /// so the map holds at most as many entries as checks under way.
    bcrypt_by_peer: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl Default for Work {
    fn default() -> Work {
        Work {
            heavy: Arc::new(Semaphore::new(HEAVY_AT_ONCE)),
            bcrypt: Arc::new(Semaphore::new(BCRYPT_AT_ONCE)),
            bcrypt_by_peer: Arc::default(),
        }
    }
}

/// A peer's share of the bcrypt queue, given back when dropped.
struct PeerShare {
    by_peer: Arc<Mutex<HashMap<IpAddr, usize>>>,
    peer: IpAddr,
}

impl PeerShare {
    fn take(by_peer: &Arc<Mutex<HashMap<IpAddr, usize>>>, peer: IpAddr) -> Option<PeerShare> {
        let mut held = by_peer.lock().unwrap_or_else(|e| e.into_inner());
        let count = held.entry(peer).or_default();
        if *count >= BCRYPT_PER_PEER {
            return None;
        }
        *count += 1;
        Some(PeerShare {
            by_peer: Arc::clone(by_peer),
            peer,
        })
    }
}

impl Drop for PeerShare {
    fn drop(&mut self) {
        let mut held = self.by_peer.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = held.get_mut(&self.peer) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.peer);
            }
        }
    }
}

/// Whether the request the work is for was dropped. Relaxed: a flag
/// that only ever turns true, read as a hint to stop early.
#[derive(Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Sets the flag when the request's future is dropped.
struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        (self.0).0.store(true, Ordering::Relaxed);
    }
}

impl Work {
    /// Runs `work` (a range read, a plot) on the blocking pool if one of
    /// the `HEAVY_AT_ONCE` permits is free, else answers 503 at once.
    pub async fn heavy<T: Send + 'static>(
        &self,
        what: &str,
        work: impl FnOnce(&Cancel) -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let Ok(permit) = Arc::clone(&self.heavy).try_acquire_owned() else {
            return Err(ApiError::Unavailable(format!(
                "{HEAVY_AT_ONCE} range reads and plots are under way, the most latencyd runs \
                 at once; retry {what} in a second"
            )));
        };
        run(permit, work).await
    }

    /// Runs a bcrypt check for `peer` on the blocking pool once a permit
    /// is free, waiting at most `BCRYPT_WAIT`, else answers 503; at once
    /// when the peer has its share under way already.
    pub async fn bcrypt<T: Send + 'static>(
        &self,
        peer: Option<IpAddr>,
        work: impl FnOnce(&Cancel) -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let share = match peer {
            Some(peer) => Some(PeerShare::take(&self.bcrypt_by_peer, peer).ok_or_else(|| {
                ApiError::Unavailable(format!(
                    "{BCRYPT_PER_PEER} credential checks from {peer} are under way, the most \
                     latencyd runs for one client; retry in a second"
                ))
            })?),
            None => None,
        };
        let permit = tokio::time::timeout(BCRYPT_WAIT, Arc::clone(&self.bcrypt).acquire_owned())
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or_else(|| {
                ApiError::Unavailable(
                    "too many credential checks are waiting; retry in a second".to_string(),
                )
            })?;
        let result = run(permit, work).await;
        drop(share);
        result
    }
}

async fn run<T: Send + 'static>(
    permit: OwnedSemaphorePermit,
    work: impl FnOnce(&Cancel) -> T + Send + 'static,
) -> Result<T, ApiError> {
    let cancel = Cancel::default();
    let _cancel_on_drop = CancelOnDrop(cancel.clone());
    tokio::task::spawn_blocking(move || {
        let result = work(&cancel);
        if let Err(err) = sys::trim_heap() {
            tracing::error!("{err}");
        }
        drop(permit);
        result
    })
    .await
    .map_err(|e| ApiError::Internal(format!("the work failed inside latencyd: {e}")))
}
