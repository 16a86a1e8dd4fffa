//! Property-based fuzzing (proptest) of every parser that takes outside
//! input: CPU lists, durations, the `?window=` query parameter (parsed
//! alone and through the router with arbitrary query strings), the web
//! configuration file, and `Authorization` headers. None may panic, and
//! what they accept must be what they claim.
//!
//! The suite runs a bounded pass (proptest's 256 cases per property, or
//! fewer where a case is expensive); `PROPTEST_CASES=100000 cargo test
//! --test fuzz` fuzzes longer.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use latencyd::cpulist::{MAX_CPUS, format_cpu_list, parse_cpu_list};
use latencyd::daemon::http::parse_window;
use latencyd::daemon::http::webconfig;
use latencyd::units::{format_duration_ns, parse_duration_ns};
use proptest::prelude::*;

const S: u64 = 1_000_000_000;

/// `n` cases, or `PROPTEST_CASES` when set (for longer runs).
fn cases(n: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(n)
}

/// Strings made of the characters these parsers care about, so that
/// cases reach past the first check more often than random text would.
fn cpu_list_like() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9,\\- ]{0,24}",
        "[0-9]{1,6}(-[0-9]{1,6})?(,[0-9]{1,6}(-[0-9]{1,6})?){0,4}",
        any::<String>(),
    ]
}

fn duration_like() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{0,22}(ns|us|ms|s|m|h|d|µs|x|)",
        "[ 0-9.,+\\-]{0,8}[a-zµ]{0,3}",
        any::<String>(),
    ]
}

proptest! {
    #[test]
    fn cpu_lists_parse_to_what_they_format_to(text in cpu_list_like()) {
        if let Ok(cpus) = parse_cpu_list(&text) {
            prop_assert!(!cpus.is_empty());
            prop_assert!(cpus.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates: {cpus:?}");
            prop_assert!(cpus.iter().all(|&c| c < MAX_CPUS));
            let formatted = format_cpu_list(&cpus);
            prop_assert_eq!(parse_cpu_list(&formatted), Ok(cpus));
        }
    }

    #[test]
    fn durations_round_trip(text in duration_like(), bare in proptest::option::of(1u64..=S)) {
        if let Ok(ns) = parse_duration_ns(&text, bare) {
            prop_assert_eq!(parse_duration_ns(&format_duration_ns(ns), None), Ok(ns));
        }
    }

    #[test]
    fn window_parameters_are_whole_seconds_within_the_window(
        pairs in proptest::collection::vec(
            (prop_oneof![Just("window".to_string()), any::<String>()], duration_like()),
            0..3,
        ),
        max_s in 1u64..=86_400,
    ) {
        if let Ok(Some(ns)) = parse_window(&pairs, max_s * S) {
            prop_assert!(ns >= S && ns <= max_s * S && ns % S == 0, "{ns}");
            prop_assert_eq!(pairs.len(), 1);
        }
    }
}

/// YAML-ish text built from the web configuration's own words.
fn web_config_like() -> impl Strategy<Value = String> {
    let word = prop_oneof![
        Just("tls_server_config:"),
        Just("basic_auth_users:"),
        Just("  cert_file: c.pem"),
        Just("  key_file: k.pem"),
        Just("  client_ca_file: ca.pem"),
        Just("  client_auth_type: RequireAndVerifyClientCert"),
        Just("  client_auth_type: VerifyClientCertIfGiven"),
        Just("  min_version: TLS13"),
        Just("  max_version: TLS12"),
        Just("  alice: $2y$04$GaaVZTkHhvmuAuAjJFV0GOqdYh8I6YyHjAsOc4ac52rxFDRhkhFDq"),
        Just("  bob: secret"),
        Just("  cipher_suites: []"),
        Just("http_server_config: {}"),
        Just("- x"),
        Just("  ? [1, 2]"),
        Just("&a [*a]"),
        Just("{"),
        Just("  : :"),
        Just(""),
    ];
    prop_oneof![
        proptest::collection::vec(word, 0..8).prop_map(|lines| lines.join("\n")),
        any::<String>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(512), ..ProptestConfig::default() })]

    #[test]
    fn web_configurations_parse_or_say_why(text in web_config_like()) {
        match webconfig::parse(&text, Path::new("/etc/latencyd")) {
            Ok(config) => {
                if let Some(tls) = config.tls {
                    prop_assert!(tls.cert_file.is_absolute() && tls.key_file.is_absolute());
                    prop_assert!(tls.min_version <= tls.max_version);
                }
                for user in config.users.keys() {
                    prop_assert!(!user.is_empty() && !user.contains(':'));
                }
            }
            Err(message) => prop_assert!(!message.is_empty()),
        }
    }
}

fn router() -> axum::Router {
    let mut config = latencyd::instruments::registry::builtin_config();
    config.export.max_window_ns = 60 * S;
    let sampler = latencyd::daemon::state::SamplerView {
        tid: 1,
        policy: latencyd::rt::sys::Policy::Fifo,
        priority: 80,
        realtime: true,
        last_sample_ns: 0,
        alive: true,
        online: true,
        sampling: true,
        unsampled_since_ns: None,
        running_since_ns: 0,
        stalls: 0,
        scheduling: Default::default(),
        scheduling_changes: 0,
    };
    let state = latencyd::daemon::state::MonitorState {
        host: common::synthetic_host(&[0], &[0]),
        started_ns: 0,
        cpus: vec![latencyd::daemon::state::CpuView::new(0, &config, sampler)],
        non_rt_reasons: vec![],
        unmeasured: vec![],
        reload: latencyd::daemon::state::ReloadRecord::started(0),
        listen: vec!["127.0.0.1:9479".parse().unwrap()],
        record: Default::default(),
        pm_qos_held_us: None,
        parts: {
            let mut parts = latencyd::daemon::state::Parts::new(&config);
            parts
                .of_mut::<latencyd::instruments::host_facts::HostFactsPart>()
                .expect("the host facts are registered")
                .track = common::synthetic_fingerprint(0);
            parts
        },
        gaps: Default::default(),
        config,
    };
    latencyd::daemon::http::router(latencyd::daemon::http::AppState::new(
        Arc::new(Mutex::new(state)),
        false,
        latencyd::daemon::render::metrics::SYSTEM_CLOCKS,
    ))
}

/// Query strings: raw bytes a client could send, percent-encoded or not.
fn query_like() -> impl Strategy<Value = String> {
    prop_oneof![
        "(window|span|w)=[0-9]{0,6}(s|m|h|ms|)(&window=[0-9]{1,3}s)?",
        "[a-z%=&0-9+;]{0,24}",
        proptest::collection::vec(any::<u8>(), 0..24).prop_map(|bytes| {
            bytes
                .iter()
                .map(|b| format!("%{b:02X}"))
                .collect::<String>()
        }),
    ]
}

proptest! {
    // Each case may draw a plot: fewer cases.
    #![proptest_config(ProptestConfig { cases: cases(64), ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_queries_get_200_or_a_json_400(
        query in query_like(),
        path in prop_oneof![Just("/plot.svg"), Just("/"), Just("/api/v1/latency/0")],
    ) {
        use tower::ServiceExt as _;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let uri = format!("{path}?{query}");
        let Ok(request) = axum::http::Request::get(&uri).body(axum::body::Body::empty()) else {
            // Not a URI a client could send.
            return Ok(());
        };
        let response = runtime.block_on(router().oneshot(request)).unwrap();
        let status = response.status().as_u16();
        prop_assert!(status == 200 || status == 400, "{uri}: {status}");
        if status == 400 {
            let body = runtime
                .block_on(http_body_util::BodyExt::collect(response.into_body()))
                .unwrap()
                .to_bytes();
            let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
            prop_assert!(json["error"].is_string());
        }
    }

    #[test]
    fn authorization_headers_never_panic(header in proptest::collection::vec(any::<u8>(), 0..64)) {
        let auth = auth();
        prop_assert!(!auth.check(Some(&header)));
        let mut basic = b"Basic ".to_vec();
        basic.extend_from_slice(&header);
        prop_assert!(!auth.check(Some(&basic)));
    }
}

/// A basic-auth checker for user `alice` whose password no generated
/// header can carry.
fn auth() -> &'static webconfig::BasicAuth {
    static AUTH: std::sync::OnceLock<webconfig::Security> = std::sync::OnceLock::new();
    AUTH.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let hash = bcrypt::hash("a password longer than any generated header", 4).unwrap();
        let path = dir.path().join("web.yml");
        std::fs::write(&path, format!("basic_auth_users:\n  alice: '{hash}'\n")).unwrap();
        webconfig::load(&path).unwrap()
    })
    .auth
    .as_ref()
    .unwrap()
}
