//! What an Arm CPU is. arm64's `/proc/cpuinfo` has no model name, and
//! 32-bit Arm's names only the architecture (`ARMv7 Processor rev 0
//! (v7l)`): each CPU gives its implementer and part numbers (the MIDR
//! register's fields), which name the core; the board is named by the
//! device tree.

/// Part numbers (MIDR bits 15:4) and the names their vendor gives them.
type Parts = &'static [(u32, &'static str)];

/// Implementers (MIDR bits 31:24) and, for the common ones, their parts.
const IMPLEMENTERS: &[(u32, &str, Parts)] = &[
    (
        0x41,
        "Arm",
        &[
            // 32-bit cores (ARMv7-A), common on industrial boards.
            (0xc05, "Cortex-A5"),
            (0xc07, "Cortex-A7"),
            (0xc08, "Cortex-A8"),
            (0xc09, "Cortex-A9"),
            (0xc0d, "Cortex-A12"),
            (0xc0e, "Cortex-A17"),
            (0xc0f, "Cortex-A15"),
            (0xd01, "Cortex-A32"),
            (0xd02, "Cortex-A34"),
            (0xd03, "Cortex-A53"),
            (0xd04, "Cortex-A35"),
            (0xd05, "Cortex-A55"),
            (0xd06, "Cortex-A65"),
            (0xd07, "Cortex-A57"),
            (0xd08, "Cortex-A72"),
            (0xd09, "Cortex-A73"),
            (0xd0a, "Cortex-A75"),
            (0xd0b, "Cortex-A76"),
            (0xd0c, "Neoverse-N1"),
            (0xd0d, "Cortex-A77"),
            (0xd0e, "Cortex-A76AE"),
            (0xd40, "Neoverse-V1"),
            (0xd41, "Cortex-A78"),
            (0xd42, "Cortex-A78AE"),
            (0xd44, "Cortex-X1"),
            (0xd46, "Cortex-A510"),
            (0xd47, "Cortex-A710"),
            (0xd48, "Cortex-X2"),
            (0xd49, "Neoverse-N2"),
            (0xd4a, "Neoverse-E1"),
            (0xd4b, "Cortex-A78C"),
            (0xd4d, "Cortex-A715"),
            (0xd4e, "Cortex-X3"),
            (0xd4f, "Neoverse-V2"),
            (0xd80, "Cortex-A520"),
            (0xd81, "Cortex-A720"),
            (0xd82, "Cortex-X4"),
            (0xd84, "Neoverse-V3"),
            (0xd8e, "Neoverse-N3"),
        ],
    ),
    (0x42, "Broadcom", &[(0x516, "Vulcan")]),
    (
        0x43,
        "Cavium",
        &[(0x0af, "ThunderX2"), (0x0b8, "ThunderX3")],
    ),
    (0x46, "Fujitsu", &[(0x001, "A64FX")]),
    (0x48, "HiSilicon", &[(0xd01, "TSV110")]),
    (0x4e, "NVIDIA", &[(0x004, "Carmel")]),
    (
        0x51,
        "Qualcomm",
        &[(0x800, "Kryo 2xx Gold"), (0x801, "Kryo 2xx Silver")],
    ),
    (0x61, "Apple", &[]),
    (0x6d, "Microsoft", &[(0xd49, "Azure Cobalt 100")]),
    (
        0xc0,
        "Ampere",
        &[(0xac3, "AmpereOne"), (0xac4, "AmpereOne AC04")],
    ),
];

/// The cores of an Arm `/proc/cpuinfo`, e.g. `Arm Cortex-A72 r0p3
/// (0x41/0xd08)`, distinct kinds joined with ` + ` (big.LITTLE), or None
/// when the text has no `CPU implementer` line (not an Arm CPU).
pub fn core_names(cpuinfo: &str) -> Option<String> {
    let mut kinds: Vec<String> = Vec::new();
    for block in cpuinfo.split("\n\n") {
        let field = |name: &str| {
            block.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                (key.trim() == name).then(|| value.trim())
            })
        };
        let number = |name: &str| -> Option<u32> {
            let text = field(name)?;
            match text.strip_prefix("0x") {
                Some(hex) => u32::from_str_radix(hex, 16).ok(),
                None => text.parse().ok(),
            }
        };
        let Some(implementer) = number("CPU implementer") else {
            continue;
        };
        let part = number("CPU part").unwrap_or(0);
        let (vendor, parts) = IMPLEMENTERS
            .iter()
            .find(|(id, _, _)| *id == implementer)
            .map_or(("unlisted implementer", &[][..]), |(_, v, p)| (*v, *p));
        let core = parts
            .iter()
            .find(|(id, _)| *id == part)
            .map_or("unlisted part", |(_, name)| *name);
        let revision = match (number("CPU variant"), number("CPU revision")) {
            (Some(variant), Some(revision)) => format!(" r{variant}p{revision}"),
            _ => String::new(),
        };
        let kind = format!("{vendor} {core}{revision} (0x{implementer:02x}/0x{part:03x})");
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    (!kinds.is_empty()).then(|| kinds.join(" + "))
}

/// The board's name from the device tree's `model` (NUL-terminated), e.g.
/// `Raspberry Pi 4 Model B Rev 1.4`.
pub fn board_model(device_tree_model: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(device_tree_model);
    let model = text.trim_end_matches('\0').trim();
    (!model.is_empty()).then(|| model.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_are_named_from_implementer_and_part() {
        // /proc/cpuinfo of Debian's 6.1 arm64 kernel on QEMU's Cortex-A72,
        // as the kernel matrix captured it.
        let cpuinfo = include_str!("../../../tests/data/kernels/6.1-rt-arm64/cpuinfo");
        assert_eq!(
            core_names(cpuinfo).as_deref(),
            Some("Arm Cortex-A72 r0p3 (0x41/0xd08)")
        );
        // big.LITTLE: each kind once, in the order of the CPUs.
        let mixed = "processor\t: 0\nCPU implementer\t: 0x41\nCPU variant\t: 0x2\n\
                     CPU part\t: 0xd05\nCPU revision\t: 0\n\n\
                     processor\t: 1\nCPU implementer\t: 0x41\nCPU variant\t: 0x2\n\
                     CPU part\t: 0xd05\nCPU revision\t: 0\n\n\
                     processor\t: 4\nCPU implementer\t: 0x41\nCPU variant\t: 0x4\n\
                     CPU part\t: 0xd0b\nCPU revision\t: 0\n";
        assert_eq!(
            core_names(mixed).as_deref(),
            Some("Arm Cortex-A55 r2p0 (0x41/0xd05) + Arm Cortex-A76 r4p0 (0x41/0xd0b)")
        );
        // Numbers nobody listed are still told, never "unknown".
        let new = "processor\t: 0\nCPU implementer\t: 0x99\nCPU part\t: 0x123\n";
        assert_eq!(
            core_names(new).as_deref(),
            Some("unlisted implementer unlisted part (0x99/0x123)")
        );
        // x86's cpuinfo is not an Arm CPU's.
        assert_eq!(core_names("processor\t: 0\nmodel name\t: Test CPU\n"), None);
    }

    #[test]
    fn the_board_is_the_device_tree_model() {
        assert_eq!(
            board_model(b"Raspberry Pi 4 Model B Rev 1.4\0").as_deref(),
            Some("Raspberry Pi 4 Model B Rev 1.4")
        );
        assert_eq!(board_model(b"\0"), None);
    }
}
