//! Files latencyd reads are opened as from a stranger: a symbolic link
//! dropped into the capture directory is not served (it once served
//! /etc/shadow), nor one in the record directory read; a forged `.hlog`
//! line that declares a 4 GiB histogram is skipped without allocating it
//! (it once took 4.2 GB of memory).

mod common;

use std::io::Write as _;
use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use common::*;

/// A secret only root could read, standing for /etc/shadow.
fn secret(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("secret");
    std::fs::write(&path, "root:$6$not-for-you").unwrap();
    path
}

#[test]
fn a_link_in_the_capture_directory_is_not_served() {
    let dir = tempfile::tempdir().unwrap();
    let spikes = dir.path().join("spikes");
    std::fs::create_dir(&spikes).unwrap();
    // The unprivileged pass runs the daemon as nobody: it must write here.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&spikes, std::fs::Permissions::from_mode(0o777)).unwrap();
    let secret = secret(dir.path());
    let id = "1795315538123-cpu0";
    std::os::unix::fs::symlink(&secret, spikes.join(format!("{id}.json"))).unwrap();
    let config = daemon_config(
        dir.path(),
        "",
        "",
        &format!(
            "[forensics]\nenabled = true\ndir = \"{}\"\n",
            spikes.display()
        ),
    );
    let daemon = Daemon::start(latencyd().args(["run", "--config"]).arg(config));
    // Not a capture: answered as none, saying what is there.
    let (status, body) = daemon.get(&format!("/api/v1/spikes/{id}"));
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("is a symbolic link"), "{body}");
    assert!(!body.contains("not-for-you"), "{body}");
    let (status, page) = daemon.get(&format!("/spikes/{id}"));
    assert_eq!(status, 404);
    assert!(!page.contains("not-for-you"));
    // Not listed either, and the open directory is said by name.
    let (_, list) = daemon.get("/api/v1/spikes");
    assert!(!list.contains(id), "{list}");
    wait_until(
        "the open directory to be said",
        std::time::Duration::from_millis(50),
        std::time::Duration::from_secs(3),
        || daemon.log_text().contains("is writable by everyone"),
    );
}

/// A `.hlog` entry whose histogram says it holds 4 GiB of counts.
fn forged_entry() -> String {
    // The uncompressed V2 header: cookie, payload length, normalizing
    // offset, significant digits, lowest, highest, conversion ratio.
    let mut inner = Vec::new();
    inner.extend_from_slice(&(0x1c84_9303u32 | 0x10).to_be_bytes());
    inner.extend_from_slice(&u32::MAX.to_be_bytes());
    inner.extend_from_slice(&0u32.to_be_bytes());
    inner.extend_from_slice(&2u32.to_be_bytes());
    inner.extend_from_slice(&1u64.to_be_bytes());
    inner.extend_from_slice(&1_000_000u64.to_be_bytes());
    inner.extend_from_slice(&1.0f64.to_be_bytes());
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&inner).unwrap();
    let compressed = z.finish().unwrap();
    let mut bytes = (0x1c84_9304u32 | 0x10).to_be_bytes().to_vec();
    bytes.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
    bytes.extend_from_slice(&compressed);
    let payload = base64::engine::general_purpose::STANDARD.encode(bytes);
    let start = latencyd::units::unix_now_ns() / 1_000_000_000 - 600;
    format!("Tag=cpu0,{start}.000,60.000,0.010000,{payload}\n")
}

#[test]
fn a_forged_hlog_line_is_skipped_without_allocating_it() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("record");
    std::fs::create_dir(&record).unwrap();
    let line = forged_entry();
    assert!(line.len() < 300, "a short line: {} bytes", line.len());
    let start = latencyd::units::unix_now_ns() - 700_000_000_000;
    let name = latencyd::record::writer::file_name(start);
    let mut text = latencyd::record::format::header(start, None);
    text.push_str(&line);
    std::fs::write(record.join(&name), &text).unwrap();
    // A link among the record's files, named as one: not followed.
    let secret = secret(dir.path());
    let link_name = latencyd::record::writer::file_name(start + 1_000_000);
    std::os::unix::fs::symlink(&secret, record.join(link_name)).unwrap();
    // With 1 GB of address space: allocating what the line declares would
    // fail (and abort) the report.
    let output = Command::new("prlimit")
        .arg("--as=1073741824")
        .arg(env!("CARGO_BIN_EXE_latencyd"))
        .arg("report")
        .arg(&record)
        .args(["--from", "-1d"])
        .output()
        .unwrap();
    let (stdout, stderr) = (stdout_of(&output), stderr_of(&output));
    // Nothing readable in the range is an error that says why.
    assert_ne!(output.status.code(), Some(134), "aborted: {stderr}");
    assert!(
        stderr.contains("declares 4294967295 bytes of counts"),
        "the forged line is named as skipped:\n{stdout}\n{stderr}"
    );
    assert!(!stdout.contains("not-for-you") && !stderr.contains("not-for-you"));
}
