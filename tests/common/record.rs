//! What tests/record.rs and tests/full/record.rs share.

use super::{Daemon, daemon_config, latencyd};
use serde_json::Value;
use std::path::Path;

pub fn json_of(daemon: &Daemon, path: &str) -> Value {
    let (status, body) = daemon.get(path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

pub fn record_daemon(dir: &Path, record_dir: &Path) -> Daemon {
    let config = daemon_config(
        dir,
        "interval = \"1ms\"",
        "",
        &format!(
            "[record]\nenabled = true\ndir = \"{}\"\ninterval = \"1s\"\n",
            record_dir.display()
        ),
    );
    Daemon::start(latencyd().args(["run", "--config"]).arg(config))
}

pub fn written(daemon: &Daemon) -> u64 {
    json_of(daemon, "/api/v1/status")["record"]["intervals_written"]
        .as_u64()
        .unwrap()
}
