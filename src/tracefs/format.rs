//! Trace events in their binary form: the layout each event's `format`
//! file gives (its ID and every field's offset and size), and a record's
//! fields read by that layout. The observer decodes the scheduler's and
//! interrupts' events with it (`observe::events`), the kernel's timerlat
//! and hwlat records too (`instruments::event`).
//!
//! Offsets are read from the kernel at start, never assumed: they differ
//! between kernel versions (`sched_switch` gained and lost fields over
//! the years) and architectures.

use std::collections::HashMap;

/// One field of an event's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    /// `__data_loc`: the field holds a 32-bit (length << 16 | offset) to
    /// a string elsewhere in the record.
    pub data_loc: bool,
}

/// An event's `format` file, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    pub id: u16,
    pub fields: HashMap<String, Field>,
}

impl Format {
    pub fn parse(text: &str) -> Result<Format, String> {
        let mut id = None;
        let mut fields = HashMap::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("ID:") {
                id = v.trim().parse().ok();
                continue;
            }
            let Some(rest) = line.strip_prefix("field:") else {
                continue;
            };
            let mut parts = rest.split(';');
            let decl = parts.next().unwrap_or("").trim();
            let mut offset = None;
            let mut size = None;
            let mut signed = false;
            for part in parts {
                let part = part.trim();
                if let Some(v) = part.strip_prefix("offset:") {
                    offset = v.parse().ok();
                } else if let Some(v) = part.strip_prefix("size:") {
                    size = v.parse().ok();
                } else if let Some(v) = part.strip_prefix("signed:") {
                    signed = v == "1";
                }
            }
            // `char prev_comm[16]` names `prev_comm`; `__data_loc char[] name`
            // names `name`.
            let name = decl
                .split_whitespace()
                .last()
                .unwrap_or("")
                .split('[')
                .next()
                .unwrap_or("");
            if let (false, Some(offset), Some(size)) = (name.is_empty(), offset, size) {
                fields.insert(
                    name.to_string(),
                    Field {
                        offset,
                        size,
                        signed,
                        data_loc: decl.starts_with("__data_loc"),
                    },
                );
            }
        }
        let id = id.ok_or_else(|| "no ID: line in the event's format".to_string())?;
        Ok(Format { id, fields })
    }

    /// The field `name`, or why `event` lacks it in this kernel.
    pub fn field(&self, event: &str, name: &str) -> Result<Field, String> {
        self.fields
            .get(name)
            .copied()
            .ok_or_else(|| format!("the {event} event has no field {name} in this kernel"))
    }
}

/// The task current when a record was written (`common_pid`: the same
/// place in every event's format, after the type, flags and preemption
/// count), or 0 for a record too short to say.
pub fn common_pid(record: &[u8]) -> i32 {
    record
        .get(4..8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, i32::from_ne_bytes)
}

impl Field {
    /// This integer field of `record` (1, 2, 4 or 8 bytes, sign-extended
    /// when signed); None when it does not fit the record.
    pub fn int(&self, record: &[u8]) -> Option<i64> {
        Record(record).int(self)
    }
}

/// A record, its fields read by their `Field`s.
pub struct Record<'a>(pub &'a [u8]);

impl<'a> Record<'a> {
    pub fn bytes(&self, field: &Field) -> Option<&'a [u8]> {
        self.0.get(field.offset..field.offset + field.size)
    }

    /// An integer field of 1, 2, 4 or 8 bytes, sign-extended when signed.
    pub fn int(&self, field: &Field) -> Option<i64> {
        let b = self.bytes(field)?;
        Some(match (b.len(), field.signed) {
            (1, true) => i64::from(b[0] as i8),
            (1, false) => i64::from(b[0]),
            (2, true) => i64::from(i16::from_ne_bytes(b.try_into().ok()?)),
            (2, false) => i64::from(u16::from_ne_bytes(b.try_into().ok()?)),
            (4, true) => i64::from(i32::from_ne_bytes(b.try_into().ok()?)),
            (4, false) => i64::from(u32::from_ne_bytes(b.try_into().ok()?)),
            (8, _) => i64::from_ne_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }

    /// A fixed `char[N]`, up to its first NUL.
    pub fn comm(&self, field: &Field) -> Option<&'a [u8]> {
        let b = self.bytes(field)?;
        Some(&b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())])
    }

    /// A `__data_loc` string, up to its first NUL.
    pub fn string(&self, field: &Field) -> Option<&'a [u8]> {
        if !field.data_loc {
            return self.comm(field);
        }
        let loc = self.int(&Field {
            size: 4,
            signed: false,
            ..*field
        })? as u32;
        let (offset, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
        let b = self.0.get(offset..offset + len)?;
        Some(&b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())])
    }
}

/// Builds records as the kernel writes them, for tests.
#[cfg(test)]
pub(crate) mod build {
    /// The common fields of every record (type, flags, preempt count, pid).
    pub fn common(id: u16, pid: i32, size: usize) -> Vec<u8> {
        let mut r = vec![0u8; size];
        r[..2].copy_from_slice(&id.to_ne_bytes());
        r[4..8].copy_from_slice(&pid.to_ne_bytes());
        r
    }

    pub fn put(r: &mut [u8], offset: usize, bytes: &[u8]) {
        r[offset..offset + bytes.len()].copy_from_slice(bytes);
    }

    pub fn comm(r: &mut [u8], offset: usize, name: &str) {
        put(r, offset, name.as_bytes());
    }
}

#[cfg(test)]
pub(crate) mod samples {
    //! `format` files as this project's development kernel (6.18, x86-64)
    //! prints them, trimmed to the fields.
    pub const COMMON: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n";

    pub fn format(id: u16, fields: &str) -> String {
        format!("name: x\nID: {id}\nformat:\n{COMMON}{fields}\nprint fmt: \"\"\n")
    }

    pub fn sched_switch() -> String {
        format(
            372,
            "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
             \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
             \tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n\
             \tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
             \tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\
             \tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\
             \tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n",
        )
    }

    pub fn sched_wakeup() -> String {
        format(
            374,
            "\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
             \tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\
             \tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;\n\
             \tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;\n",
        )
    }

    pub fn irq_handler_entry() -> String {
        format(
            225,
            "\tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n\
             \tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;\n",
        )
    }

    pub fn irq_handler_exit() -> String {
        format(
            226,
            "\tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n\
             \tfield:int ret;\toffset:12;\tsize:4;\tsigned:1;\n",
        )
    }

    pub fn softirq(id: u16) -> String {
        format(
            id,
            "\tfield:unsigned int vec;\toffset:8;\tsize:4;\tsigned:0;\n",
        )
    }

    pub fn vector(id: u16) -> String {
        format(id, "\tfield:int vector;\toffset:8;\tsize:4;\tsigned:1;\n")
    }

    pub fn nmi_handler() -> String {
        format(
            170,
            "\tfield:void * handler;\toffset:8;\tsize:8;\tsigned:0;\n\
             \tfield:s64 delta_ns;\toffset:16;\tsize:8;\tsigned:1;\n\
             \tfield:int handled;\toffset:24;\tsize:4;\tsigned:1;\n",
        )
    }

    pub fn hrtimer_start() -> String {
        format(
            460,
            "\tfield:void * hrtimer;\toffset:8;\tsize:8;\tsigned:0;\n\
             \tfield:void * function;\toffset:16;\tsize:8;\tsigned:0;\n\
             \tfield:s64 expires;\toffset:24;\tsize:8;\tsigned:1;\n\
             \tfield:s64 softexpires;\toffset:32;\tsize:8;\tsigned:1;\n",
        )
    }

    pub fn hrtimer_expire_entry() -> String {
        format(
            459,
            "\tfield:void * hrtimer;\toffset:8;\tsize:8;\tsigned:0;\n\
             \tfield:s64 now;\toffset:16;\tsize:8;\tsigned:1;\n\
             \tfield:void * function;\toffset:24;\tsize:8;\tsigned:0;\n",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::samples;
    use super::*;

    #[test]
    fn a_format_file_gives_the_id_and_every_fields_place() {
        let f = Format::parse(&samples::irq_handler_entry()).unwrap();
        assert_eq!(f.id, 225);
        assert_eq!(
            f.fields["name"],
            Field {
                offset: 12,
                size: 4,
                signed: false,
                data_loc: true
            }
        );
        assert!(f.fields["common_pid"].signed);
        assert!(Format::parse("format:\n").unwrap_err().contains("ID"));
    }
}
