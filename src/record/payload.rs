//! An entry's histogram, checked before it is decoded. HdrHistogram's
//! compressed V2 encoding declares its lengths and bounds up front, and a
//! decoder that trusts them allocates what they say: a 200-byte line that
//! declared a 4 GiB payload made `latencyd report` allocate 4.2 GB. Here
//! every declared size is checked against the bytes actually there, the
//! decompressed form is bounded, and the precision and range are bounded
//! before the `hdrhistogram` crate builds anything.

use std::io::Read;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use flate2::read::ZlibDecoder;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;

/// The compressed V2 encoding's cookie (with the 8-byte word size).
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
/// The uncompressed V2 encoding's cookie, inside the compressed one.
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
/// Cookie, payload length, offset, digits, lowest, highest, ratio.
const V2_HEADER_BYTES: usize = 40;
/// The largest decompressed histogram read: a 3-digit histogram of 0 ns
/// to a day has about 30,000 counters, at most 9 bytes each in varints.
const MAX_DECOMPRESSED: u64 = 1 << 20;
/// The most significant digits read: 3 (HdrHistogram's usual) keeps a
/// histogram to about a megabyte of counters whatever its range.
const MAX_DIGITS: u32 = 3;

/// Decodes the base64 payload of an entry line, or says why it cannot.
pub fn decode(payload: &str) -> Result<Histogram<u64>, String> {
    let bytes = STANDARD
        .decode(payload.trim())
        .map_err(|e| format!("the histogram is not base64: {e}"))?;
    let (cookie, rest) = split_u32(&bytes).ok_or("the histogram is shorter than its header")?;
    if cookie != V2_COMPRESSED_COOKIE {
        return Err(format!(
            "the histogram is not HdrHistogram's compressed V2 encoding (cookie {cookie:#x})"
        ));
    }
    let (compressed_len, compressed) =
        split_u32(rest).ok_or("the histogram is shorter than its header")?;
    if compressed_len as usize > compressed.len() {
        return Err(format!(
            "the histogram declares {compressed_len} compressed bytes and has {}",
            compressed.len()
        ));
    }
    let mut inner = Vec::new();
    ZlibDecoder::new(&compressed[..compressed_len as usize])
        .take(MAX_DECOMPRESSED + 1)
        .read_to_end(&mut inner)
        .map_err(|e| format!("the histogram does not decompress: {e}"))?;
    if inner.len() as u64 > MAX_DECOMPRESSED {
        return Err(format!(
            "the histogram decompresses to more than {MAX_DECOMPRESSED} bytes"
        ));
    }
    check_v2(&inner)?;
    Deserializer::new()
        .deserialize(&mut inner.as_slice())
        .map_err(|e| format!("the histogram cannot be decoded: {e:?}"))
}

/// The uncompressed V2 header's claims, checked against what is there.
fn check_v2(inner: &[u8]) -> Result<(), String> {
    if inner.len() < V2_HEADER_BYTES {
        return Err("the histogram is shorter than its header".to_string());
    }
    let word =
        |at: usize| u32::from_be_bytes([inner[at], inner[at + 1], inner[at + 2], inner[at + 3]]);
    if word(0) != V2_COOKIE {
        return Err("the histogram's inner cookie is not V2's".to_string());
    }
    let payload_len = word(4) as usize;
    if payload_len > inner.len() - V2_HEADER_BYTES {
        return Err(format!(
            "the histogram declares {payload_len} bytes of counts and has {}",
            inner.len() - V2_HEADER_BYTES
        ));
    }
    let digits = word(12);
    if digits > MAX_DIGITS {
        return Err(format!(
            "the histogram keeps {digits} significant digits; latencyd reads at most {MAX_DIGITS}"
        ));
    }
    Ok(())
}

fn split_u32(bytes: &[u8]) -> Option<(u32, &[u8])> {
    let (head, rest) = bytes.split_first_chunk::<4>()?;
    Some((u32::from_be_bytes(*head), rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};

    fn encode(h: &Histogram<u64>) -> Vec<u8> {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new().serialize(h, &mut bytes).unwrap();
        bytes
    }

    /// A compressed payload around `inner` (an uncompressed V2 encoding).
    fn wrap(inner: &[u8]) -> String {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut z, inner).unwrap();
        let compressed = z.finish().unwrap();
        let mut bytes = V2_COMPRESSED_COOKIE.to_be_bytes().to_vec();
        bytes.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&compressed);
        STANDARD.encode(bytes)
    }

    #[test]
    fn a_histogram_decodes_and_forged_sizes_are_refused_before_allocating() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 17_179_869_184, 2).unwrap();
        h.record_n(12_345, 7).unwrap();
        let good = encode(&h);
        assert_eq!(decode(&STANDARD.encode(&good)).unwrap().len(), 7);
        // A compressed length past the bytes there.
        let mut long = good.clone();
        long[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        let err = decode(&STANDARD.encode(&long)).unwrap_err();
        assert!(
            err.contains("declares 4294967295 compressed bytes"),
            "{err}"
        );
        // A payload length of 4 GiB inside: refused, nothing allocated.
        let mut inner = Vec::new();
        V2Serializer::new().serialize(&h, &mut inner).unwrap();
        inner[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        let err = decode(&wrap(&inner)).unwrap_err();
        assert!(err.contains("declares 4294967295 bytes of counts"), "{err}");
        // Five significant digits of a huge range: refused.
        let mut inner = Vec::new();
        V2Serializer::new().serialize(&h, &mut inner).unwrap();
        inner[12..16].copy_from_slice(&5u32.to_be_bytes());
        assert!(
            decode(&wrap(&inner))
                .unwrap_err()
                .contains("5 significant digits")
        );
        // A zlib bomb: far more zeros than any histogram.
        let bomb = vec![0u8; 4 << 20];
        assert!(
            decode(&wrap(&bomb))
                .unwrap_err()
                .contains("decompresses to more than")
        );
        for bad in ["", "@@@", "AAAA", "HISTFAAAAAAAAAAA"] {
            assert!(decode(bad).is_err(), "{bad}");
        }
    }
}
