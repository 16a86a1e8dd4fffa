//! The container, pod or systemd unit a task's cgroup path names.

/// What a cgroup path says the task runs in: a Kubernetes pod's container
/// (`pod<uid>/<container id, 12 characters>`), a container engine's
/// scope (`docker-<id>`, `libpod-<id>`, 12 characters of the id), or a
/// systemd service (`name.service`); empty for anything else (a login
/// session, the root cgroup).
pub fn container_of(cgroup: &str) -> String {
    // cgroup v2's line `0::/path`, else the first v1 hierarchy's path.
    let path = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .or_else(|| cgroup.lines().find_map(|l| l.splitn(3, ':').nth(2)))
        .unwrap_or("");
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let short = |id: &str| id.chars().take(12).collect::<String>();
    let container_id = |part: &str| -> Option<String> {
        let id = part.strip_suffix(".scope").unwrap_or(part);
        let id = id.rsplit_once('-').map_or(id, |(_, id)| id);
        (id.len() >= 12 && id.chars().all(|c| c.is_ascii_hexdigit())).then(|| short(id))
    };
    if let Some(at) = parts
        .iter()
        .position(|p| p.starts_with("pod") || p.contains("-pod"))
    {
        let pod = parts[at];
        // systemd driver: kubepods-besteffort-pod<uid with _>.slice;
        // cgroupfs driver: pod<uid>.
        let uid = pod
            .strip_suffix(".slice")
            .unwrap_or(pod)
            .rsplit_once("pod")
            .map_or(pod, |(_, uid)| uid)
            .replace('_', "-");
        if !uid.is_empty() && parts[0].starts_with("kubepods") {
            return match parts.get(at + 1).and_then(|p| container_id(p)) {
                Some(id) => format!("pod{uid}/{id}"),
                None => format!("pod{uid}"),
            };
        }
    }
    if let Some(last) = parts.last() {
        for engine in ["docker-", "libpod-", "cri-containerd-", "crio-"] {
            if last.starts_with(engine)
                && let Some(id) = container_id(last)
            {
                return format!("{}{id}", engine);
            }
        }
        if last.ends_with(".service") {
            return last.to_string();
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_paths_name_pods_engines_and_units() {
        assert_eq!(
            container_of(
                "0::/kubepods.slice/kubepods-pod1234abcd_5678_90ab_cdef_001122334455.slice/\
                 cri-containerd-0123456789abcdef0123.scope\n"
            ),
            "pod1234abcd-5678-90ab-cdef-001122334455/0123456789ab"
        );
        assert_eq!(
            container_of("0::/kubepods/burstable/podaaaa-bbbb/fedcba9876543210fedc\n"),
            "podaaaa-bbbb/fedcba987654"
        );
        assert_eq!(
            container_of("0::/system.slice/docker-0123456789abcdef99.scope\n"),
            "docker-0123456789ab"
        );
        assert_eq!(
            container_of("0::/system.slice/latencyd.service\n"),
            "latencyd.service"
        );
        assert_eq!(
            container_of("0::/user.slice/user-0.slice/session-3.scope\n"),
            ""
        );
        assert_eq!(
            container_of("12:cpuset:/system.slice/rtapp.service\n"),
            "rtapp.service"
        );
        assert_eq!(container_of(""), "");
    }
}
