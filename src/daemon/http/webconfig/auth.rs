//! HTTP basic authentication against bcrypt hashes, at the same cost
//! for every refusal.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::watch;

use super::parse::bcrypt_cost;

/// How many verified credentials are remembered, so that a scraper does
/// not pay a bcrypt run per scrape; past this the memory starts afresh.
const AUTH_CACHE_LIMIT: usize = 1024;

/// HTTP basic authentication against bcrypt hashes.
///
/// Every check of a credential that is not already known to be good runs
/// one bcrypt verification of the same cost, whether the header is
/// malformed, the user unknown or the password wrong: an unknown user is
/// checked against a dummy hash of the highest configured cost, and user
/// names are compared in constant time. Good credentials are remembered
/// by a SHA-256 digest (never in clear) for later requests.
///
/// One check per credential at a time: requests that carry a credential
/// whose check is under way wait for its answer (`turn`). A scraper
/// that opens 40 connections at once with a password not yet verified
/// costs one bcrypt run, not 40, and is not refused for having more
/// checks under way than its share of the queue (busy.rs).
pub struct BasicAuth {
    users: Vec<(String, String)>,
    dummy_hash: String,
    good: Mutex<HashSet<[u8; 32]>>,
    under_way: UnderWay,
}

/// Checks under way by credential digest, each with its answer to come;
/// an entry lives as long as its `Lead`, so the map holds no more entries
/// than checks running or waiting for a permit.
type UnderWay = Arc<Mutex<HashMap<[u8; 32], watch::Receiver<Option<bool>>>>>;

/// Whose turn it is to check a credential.
pub enum Turn {
    /// Nobody is checking it: this request does, and answers the others.
    Lead(Lead),
    /// Another request is checking it: wait for its answer
    /// (`Lead::wait`); none comes when that check was refused or dropped.
    Follow(watch::Receiver<Option<bool>>),
}

/// The right and duty to check a credential; dropping it without an
/// answer lets the waiting requests check for themselves.
pub struct Lead {
    under_way: UnderWay,
    digest: [u8; 32],
    answer: watch::Sender<Option<bool>>,
}

impl Lead {
    /// Tells every request waiting on this credential the outcome.
    pub fn answer(self, ok: bool) {
        self.answer.send_replace(Some(ok));
    }

    /// The answer of the check another request leads, or `None` when it
    /// ended without one.
    pub async fn wait(mut follow: watch::Receiver<Option<bool>>) -> Option<bool> {
        follow.wait_for(Option::is_some).await.ok().and_then(|v| *v)
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        self.under_way
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.digest);
    }
}

impl BasicAuth {
    /// How many users may log in.
    pub fn n_users(&self) -> usize {
        self.users.len()
    }

    /// `users` must have been checked by `parse`.
    pub(super) fn new(users: BTreeMap<String, String>) -> BasicAuth {
        let cost = users
            .values()
            .filter_map(|hash| bcrypt_cost(hash).ok())
            .max()
            .unwrap_or(bcrypt::DEFAULT_COST);
        BasicAuth {
            dummy_hash: dummy_hash(cost),
            users: users.into_iter().collect(),
            good: Mutex::new(HashSet::new()),
            under_way: UnderWay::default(),
        }
    }

    /// Whether this request checks the header's credential or waits for
    /// the check of the same credential under way (a SHA-256, no bcrypt).
    pub fn turn(&self, authorization: Option<&[u8]>) -> Turn {
        let (_, _, _, digest) = self.credential(authorization);
        let mut under_way = self.under_way.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(follow) = under_way.get(&digest) {
            return Turn::Follow(follow.clone());
        }
        let (answer, follow) = watch::channel(None);
        under_way.insert(digest, follow);
        Turn::Lead(Lead {
            under_way: Arc::clone(&self.under_way),
            digest,
            answer,
        })
    }

    /// The header's user and password, the hash to check them against
    /// (the user's, or the dummy one), whether the user exists, and the
    /// digest a good credential is remembered by.
    fn credential(&self, authorization: Option<&[u8]>) -> (Vec<u8>, &str, bool, [u8; 32]) {
        let (user, password) = authorization
            .and_then(decode_basic)
            .unwrap_or_else(|| (Vec::new(), Vec::new()));
        // Every configured name is compared, in constant time.
        let mut found: Option<&str> = None;
        for (name, hash) in &self.users {
            if bool::from(name.as_bytes().ct_eq(&user)) {
                found = Some(hash);
            }
        }
        let hash = found.unwrap_or(&self.dummy_hash);
        let digest: [u8; 32] = Sha256::new()
            .chain_update(&user)
            .chain_update([0])
            .chain_update(&password)
            .chain_update([0])
            .chain_update(hash.as_bytes())
            .finalize()
            .into();
        (password, hash, found.is_some(), digest)
    }

    /// Whether the header carries a credential already verified (a SHA-256
    /// of it, no bcrypt): fine on the async runtime.
    pub fn remembered(&self, authorization: Option<&[u8]>) -> bool {
        let (_, _, known_user, digest) = self.credential(authorization);
        known_user
            && self
                .good
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&digest)
    }

    /// Whether an `Authorization` header value carries a configured user and
    /// that user's password. Runs bcrypt, so call it off the async runtime.
    pub fn check(&self, authorization: Option<&[u8]>) -> bool {
        let (password, hash, known_user, digest) = self.credential(authorization);
        let mut good = self.good.lock().unwrap_or_else(|e| e.into_inner());
        if known_user && good.contains(&digest) {
            return true;
        }
        drop(good);
        let verified = bcrypt::verify(&password, hash).unwrap_or(false);
        let ok = verified && known_user;
        if ok {
            good = self.good.lock().unwrap_or_else(|e| e.into_inner());
            if good.len() >= AUTH_CACHE_LIMIT {
                good.clear();
            }
            good.insert(digest);
        }
        ok
    }
}

/// A hash of `cost` that no password matches, made once per cost for the
/// life of the process (a reload storm must not run bcrypt each time).
fn dummy_hash(cost: u32) -> String {
    static MADE: Mutex<BTreeMap<u32, String>> = Mutex::new(BTreeMap::new());
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    made.entry(cost)
        .or_insert_with(|| {
            // A random salt each time; the password is never a user's.
            bcrypt::hash("latencyd: no such user", cost).unwrap_or_default()
        })
        .clone()
}

/// `Basic base64(user:password)` → (user, password).
fn decode_basic(header: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let text = std::str::from_utf8(header).ok()?;
    let (scheme, encoded) = text.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    Some((decoded[..colon].to_vec(), decoded[colon + 1..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_accepts_only_the_right_pair() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let other = bcrypt::hash("other", 4).unwrap();
        let auth = BasicAuth::new(BTreeMap::from([
            ("prometheus".to_string(), hash),
            ("grafana".to_string(), other),
        ]));
        let header = |user: &str, password: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )
        };
        let check = |value: &str| auth.check(Some(value.as_bytes()));
        assert!(check(&header("prometheus", "s3cret")));
        assert!(check(&header("prometheus", "s3cret")), "remembered");
        assert!(check(&header("grafana", "other")));
        assert!(check(&format!(
            "basic  {}",
            &header("grafana", "other")[6..]
        )));
        assert!(!check(&header("prometheus", "S3cret")));
        assert!(
            !check(&header("prometheus", "other")),
            "another user's password"
        );
        assert!(!check(&header("nobody", "s3cret")));
        assert!(!check(&header("", "")));
        assert!(!check("Bearer abc"));
        assert!(!check("Basic !!!"));
        assert!(!check("Basic"));
        assert!(!auth.check(None));
        assert!(!auth.check(Some(&[0xff, 0xfe])));
    }

    #[test]
    fn a_wrong_user_costs_what_a_wrong_password_costs() {
        // Every refusal runs one bcrypt verification against a hash of the
        // configured cost: the user's for a wrong password, the dummy one
        // for an unknown user, a malformed header or another scheme.
        // Checked on the hash each check verifies against, not by timing
        // (which a loaded machine makes noisy).
        let auth = BasicAuth::new(BTreeMap::from([(
            "prometheus".to_string(),
            bcrypt::hash("s3cret", 6).unwrap(),
        )]));
        let header = |credentials: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(credentials)
            )
        };
        for value in [
            header("prometheus:guess"),
            header("nobody:guess"),
            header("prometheu:s3cret"),
            header("no colon"),
            "Bearer token".to_string(),
        ] {
            let (_, hash, _, _) = auth.credential(Some(value.as_bytes()));
            assert_eq!(bcrypt_cost(hash), Ok(6), "{value}: verified at cost 6");
            assert!(!auth.check(Some(value.as_bytes())), "{value}");
        }
        let (_, hash, known, _) = auth.credential(Some(header("nobody:x").as_bytes()));
        assert!(
            !known && hash == auth.dummy_hash,
            "an unknown user meets the dummy hash"
        );
    }

    #[tokio::test]
    async fn one_check_per_credential_answers_every_request_that_carries_it() {
        let hash = bcrypt::hash("right", 4).unwrap();
        let auth = BasicAuth::new(BTreeMap::from([("alice".to_string(), hash)]));
        let header = b"Basic YWxpY2U6cmlnaHQ=".as_slice(); // alice:right
        let Turn::Lead(lead) = auth.turn(Some(header)) else {
            panic!("the first request checks");
        };
        let Turn::Follow(follow) = auth.turn(Some(header)) else {
            panic!("the second waits for the first");
        };
        // Another credential is checked on its own.
        assert!(matches!(auth.turn(Some(b"Basic Ym9iOng=")), Turn::Lead(_)));
        lead.answer(true);
        assert_eq!(Lead::wait(follow).await, Some(true));
        // The answer given, the next request checks (or finds it remembered).
        let Turn::Lead(lead) = auth.turn(Some(header)) else {
            panic!("no check under way any more");
        };
        let Turn::Follow(follow) = auth.turn(Some(header)) else {
            panic!("the second waits for the first");
        };
        drop(lead);
        assert_eq!(
            Lead::wait(follow).await,
            None,
            "a dropped check answers nothing"
        );
    }
}
