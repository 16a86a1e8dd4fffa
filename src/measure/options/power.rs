//! `/dev/cpu_dma_latency` as cyclictest asks for it: held at `--latency`
//! (0 by default) for the run, unless `--default-system` or `--laptop`.

use super::PmQos;
use super::values::{Notes, UsageError, integer, usage};
use crate::cli::MeasureArgs;

/// cyclictest holds `/dev/cpu_dma_latency` at `--latency` (default 0)
/// unless `--default-system` or `--laptop`.
pub fn pm_qos(args: &MeasureArgs, notes: &mut Notes) -> Result<PmQos, UsageError> {
    let latency = args
        .latency
        .as_deref()
        .map(|text| integer("--latency", text, notes))
        .transpose()?;
    if args.laptop {
        notes.add(
            "--laptop",
            "not holding /dev/cpu_dma_latency, to save battery power",
        );
    }
    if args.laptop || args.default_system {
        let option = if args.laptop {
            "--laptop"
        } else {
            "--default-system"
        };
        if latency.is_some() {
            notes.add(
                "--latency",
                format!("not held: {option} leaves power management alone"),
            );
        }
        return Ok(PmQos::Off);
    }
    Ok(match latency {
        Some(us) if us < 0 => {
            notes.add("--latency", format!("{us} held as 0, as cyclictest does"));
            PmQos::Hold(0)
        }
        Some(us) => PmQos::Hold(i32::try_from(us).map_err(|_| usage("--latency", "too large"))?),
        None => PmQos::Hold(0),
    })
}
