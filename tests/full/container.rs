//! The container image (deploy/container/build.sh), built with Debian's
//! buildah into a private storage and checked: its configuration
//! (entrypoint, user, port, labels with version and revision), its
//! contents (the binary, the libraries it links, the font, the example
//! configuration, and nothing else: no shell), and the binary run from the
//! image's root filesystem — `--version`, `check-config` on the shipped
//! file, and the daemon itself serving `/plot.svg`, which needs the font.
//!
//! Needs root (buildah's storage, mount and chroot). `podman run` is tried
//! too; where this sandbox refuses it (root here lacks CAP_SYS_RESOURCE,
//! which podman needs to set the container's rlimits) the test says so.

#[path = "../common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{privileged, report_skip, require_tool, stderr_of, stdout_of};

const TEST: &str = "the_image_holds_the_binary_and_what_it_needs_and_runs";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A private containers-storage (vfs: no overlay mounts needed) under `dir`.
fn storage_conf(dir: &Path) -> PathBuf {
    let conf = dir.join("storage.conf");
    std::fs::write(
        &conf,
        format!(
            "[storage]\ndriver = \"vfs\"\ngraphroot = \"{}\"\nrunroot = \"{}\"\n",
            dir.join("graph").display(),
            dir.join("run").display()
        ),
    )
    .unwrap();
    conf
}

fn buildah(conf: &Path, args: &[&str]) -> Output {
    let output = Command::new("buildah")
        .env("CONTAINERS_STORAGE_CONF", conf)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "buildah {args:?}: {}",
        stderr_of(&output)
    );
    output
}

/// Every file and symlink under `dir`, as absolute paths in the image.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let kind = std::fs::symlink_metadata(&path).unwrap().file_type();
            if kind.is_dir() {
                stack.push(path);
            } else {
                out.push(format!("/{}", path.strip_prefix(dir).unwrap().display()));
            }
        }
    }
    out.sort();
    out
}

/// Unmounts on drop, lazily, whatever the test did meanwhile.
struct Mounted(Vec<PathBuf>);

impl Drop for Mounted {
    fn drop(&mut self) {
        for path in self.0.iter().rev() {
            let _ = Command::new("umount").arg("-l").arg(path).status();
        }
    }
}

#[test]
// Full tier: root, buildah and podman.
fn the_image_holds_the_binary_and_what_it_needs_and_runs() {
    if !privileged() {
        report_skip(
            TEST,
            "not root: buildah needs root here (rootless buildah needs subordinate uids)",
        );
        return;
    }
    require_tool("buildah", "--version", "buildah");
    let dir = tempfile::tempdir().unwrap();
    let conf = storage_conf(dir.path());
    let version = env!("CARGO_PKG_VERSION");
    let image = format!("localhost/latencyd-test:{version}");
    let archive = dir.path().join("latencyd.oci.tar");

    let output = Command::new(root().join("deploy/container/build.sh"))
        .arg("--oci-archive")
        .arg(&archive)
        .env("CONTAINERS_STORAGE_CONF", &conf)
        .env("LATENCYD_BINARY", env!("CARGO_BIN_EXE_latencyd"))
        .env("IMAGE", &image)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "build.sh: {}{}",
        stdout_of(&output),
        stderr_of(&output)
    );
    assert!(
        archive.metadata().unwrap().len() > 1_000_000,
        "the OCI archive"
    );

    // The image's configuration.
    let inspect = buildah(&conf, &["inspect", "--type", "image", &image]);
    let doc: serde_json::Value = serde_json::from_slice(&inspect.stdout).unwrap();
    let config = &doc["OCIv1"]["config"];
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/bin/latencyd"])
    );
    assert_eq!(
        config["Cmd"],
        serde_json::json!(["run", "--config", "/etc/latencyd/latencyd.toml"])
    );
    assert_eq!(config["User"], "0:0", "uid 0, for the added capabilities");
    assert!(config["ExposedPorts"]["9479/tcp"].is_object(), "{config}");
    let labels = &config["Labels"];
    assert_eq!(labels["org.opencontainers.image.version"], version);
    let git = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(root())
        .output()
        .unwrap();
    let revision = if git.status.success() {
        stdout_of(&git).trim().to_string()
    } else {
        "unknown".to_string()
    };
    assert_eq!(
        labels["org.opencontainers.image.revision"],
        revision.as_str()
    );
    assert_eq!(labels["org.opencontainers.image.title"], "latencyd");

    // Its contents: the binary, its libraries, the font, the configuration.
    let container = stdout_of(&buildah(&conf, &["from", "--quiet", &image]))
        .trim()
        .to_string();
    let rootfs = PathBuf::from(
        stdout_of(&buildah(&conf, &["mount", &container]))
            .trim()
            .to_string(),
    );
    let mut mounted = Mounted(vec![rootfs.clone()]);
    let files = files_under(&rootfs);
    let libraries: Vec<&String> = files
        .iter()
        .filter(|f| f.starts_with("/lib") || f.starts_with("/usr/lib"))
        .collect();
    let expected_others = [
        "/etc/latencyd/latencyd.toml",
        "/usr/bin/latencyd",
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    ];
    let others: Vec<&str> = files
        .iter()
        .filter(|f| !libraries.contains(f))
        .map(String::as_str)
        .collect();
    assert_eq!(others, expected_others, "{files:?}");
    assert!(
        libraries.iter().any(|l| l.contains("libc.so")),
        "{libraries:?}"
    );
    assert!(libraries.iter().all(|l| l.contains(".so")), "{libraries:?}");
    assert!(!rootfs.join("bin/sh").exists(), "no shell in the image");

    // The binary runs from the image's root filesystem.
    let chroot = |args: &[&str]| {
        Command::new("/usr/sbin/chroot")
            .arg(&rootfs)
            .args(args)
            .env_clear()
            .output()
            .unwrap()
    };
    let out = chroot(&["/usr/bin/latencyd", "--version"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(stdout_of(&out).starts_with(&format!("latencyd {version}")));

    // The daemon, with /proc and /sys as a runtime would give it, serving
    // the plot: DejaVu Sans is in the image (without it /plot.svg is 500).
    for fs in ["proc", "sys"] {
        let target = rootfs.join(fs);
        let status = if fs == "proc" {
            Command::new("mount")
                .args(["-t", "proc", "proc"])
                .arg(&target)
                .status()
        } else {
            Command::new("mount")
                .args(["--rbind", "/sys"])
                .arg(&target)
                .status()
        };
        assert!(status.unwrap().success(), "mount {fs}");
        mounted.0.push(target);
    }
    let out = chroot(&[
        "/usr/bin/latencyd",
        "check-config",
        "/etc/latencyd/latencyd.toml",
    ]);
    assert!(
        out.status.success(),
        "{}{}",
        stdout_of(&out),
        stderr_of(&out)
    );
    let mut cmd = Command::new("/usr/sbin/chroot");
    cmd.arg(&rootfs)
        .args([
            "/usr/bin/latencyd",
            "run",
            "--config",
            "/etc/latencyd/latencyd.toml",
            "--web.listen-address",
            "127.0.0.1:0",
        ])
        .env_clear()
        .env("LATENCYD_MEASURE__WARMUP", "0s");
    let daemon = common::Daemon::start(&mut cmd);
    common::wait_until(
        "samples from the image's daemon",
        std::time::Duration::from_millis(100),
        std::time::Duration::from_secs(10),
        || {
            let (_, body) = daemon.get("/api/v1/latency");
            body.contains("\"count\":") && !body.contains("\"count\":0,")
        },
    );
    let (status, svg) = daemon.get("/plot.svg");
    assert_eq!(status, 200, "{svg}");
    assert!(svg.contains("<svg"), "{svg}");
    assert_eq!(daemon.get("/livez").0, 200);
    drop(daemon);
    drop(mounted);
    buildah(&conf, &["rm", &container]);

    // podman, where the sandbox lets it run a container.
    let podman = Command::new("podman")
        .env("CONTAINERS_STORAGE_CONF", &conf)
        .args(["run", "--rm", "--network=none", &image, "--version"])
        .output();
    match podman {
        Ok(out) if out.status.success() => {
            assert!(stdout_of(&out).starts_with(&format!("latencyd {version}")));
        }
        Ok(out) => report_skip(
            TEST,
            &format!(
                "podman run refused here (the sandbox's root lacks CAP_SYS_RESOURCE for the \
                 container's rlimits): {}",
                stderr_of(&out).trim()
            ),
        ),
        Err(e) => report_skip(TEST, &format!("podman is not installed: {e}")),
    }
}
