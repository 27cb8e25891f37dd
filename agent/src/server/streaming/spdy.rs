//! The few SPDY/3.1 frames the agent needs as a client of the runtime's streaming server, to
//! serve kubectl's WebSocket exec/attach (which the runtime does not speak in its v5 form):
//! SYN_STREAM to open the error/stdin/stdout/stderr/resize streams, DATA both ways, PING
//! answered, GOAWAY at the end. Flow control is not enforced by either side (as with
//! spdystream, the runtime's and kubectl's SPDY library).

/// DATA and SYN_STREAM flag: the sender's half of the stream is done.
pub const FLAG_FIN: u8 = 0x01;
pub const SYN_STREAM: u16 = 1;
pub const PING: u16 = 6;
pub const GOAWAY: u16 = 7;
const VERSION: u16 = 3;
/// Frames larger than this are refused (the 24-bit length allows 16 MiB; the runtime's are
/// at most 32 KiB).
pub const MAX_FRAME: usize = 1 << 20;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SpdyError {
    #[error("SPDY frame of {0} bytes is over the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    #[error("SPDY control frame of version {0}, not 3")]
    Version(u16),
}

#[derive(Debug, PartialEq)]
pub enum Frame {
    Data {
        stream: u32,
        flags: u8,
        data: Vec<u8>,
    },
    Control {
        kind: u16,
        flags: u8,
        payload: Vec<u8>,
    },
}

/// One frame from the start of `buf`, and how many bytes it took; None while incomplete.
pub fn parse(buf: &[u8]) -> Result<Option<(Frame, usize)>, SpdyError> {
    let Some(head) = buf.get(..8).and_then(|h| <[u8; 8]>::try_from(h).ok()) else {
        return Ok(None);
    };
    let word = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    let flags = head[4];
    let len = u32::from_be_bytes([0, head[5], head[6], head[7]]) as usize;
    if len > MAX_FRAME {
        return Err(SpdyError::TooLarge(len));
    }
    let Some(body) = buf.get(8..8 + len) else {
        return Ok(None);
    };
    let frame = if word & 0x8000_0000 == 0 {
        Frame::Data {
            stream: word,
            flags,
            data: body.to_vec(),
        }
    } else {
        let version = ((word >> 16) & 0x7fff) as u16;
        if version != VERSION {
            return Err(SpdyError::Version(version));
        }
        Frame::Control {
            kind: (word & 0xffff) as u16,
            flags,
            payload: body.to_vec(),
        }
    };
    Ok(Some((frame, 8 + len)))
}

fn head(word: u32, flags: u8, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + len);
    out.extend_from_slice(&word.to_be_bytes());
    out.push(flags);
    // Lengths here are ours: header blocks and chunks far below 16 MiB.
    let [_, a, b, c] = (len as u32).to_be_bytes();
    out.extend_from_slice(&[a, b, c]);
    out
}

/// A DATA frame.
pub fn data(stream: u32, fin: bool, data: &[u8]) -> Vec<u8> {
    let mut out = head(
        stream & 0x7fff_ffff,
        if fin { FLAG_FIN } else { 0 },
        data.len(),
    );
    out.extend_from_slice(data);
    out
}

fn control(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let word = 0x8000_0000 | (u32::from(VERSION) << 16) | u32::from(kind);
    let mut out = head(word, flags, payload.len());
    out.extend_from_slice(payload);
    out
}

/// A PING answer (the same frame back).
pub fn ping(payload: &[u8]) -> Vec<u8> {
    control(PING, 0, payload)
}

/// GOAWAY: no new streams; `last` is the last stream the peer opened (none here: 0).
pub fn goaway() -> Vec<u8> {
    control(GOAWAY, 0, &[0, 0, 0, 0, 0, 0, 0, 0])
}

/// The empty non-final stored block a zlib sync flush writes.
const SYNC_FLUSH: [u8; 5] = [0, 0, 0, 0xff, 0xff];

/// Header blocks of one connection. SPDY deflates them as one zlib stream; the receiver only
/// inflates, so stored (uncompressed) deflate blocks are valid and need no compressor. The
/// dictionary SPDY names is only needed to inflate the peer's blocks, which are not read.
#[derive(Default)]
pub struct Headers {
    started: bool,
}

impl Headers {
    /// The header block of `pairs` (names lower case, as SPDY/3 requires).
    pub fn block(&mut self, pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut raw = Vec::new();
        raw.extend_from_slice(&(pairs.len() as u32).to_be_bytes());
        for (name, value) in pairs {
            for s in [name.to_ascii_lowercase().as_str(), value] {
                raw.extend_from_slice(&(s.len() as u32).to_be_bytes());
                raw.extend_from_slice(s.as_bytes());
            }
        }
        let mut out = Vec::new();
        if !self.started {
            // zlib header: deflate, 32 KiB window, no preset dictionary (0x7801 % 31 == 0).
            out.extend_from_slice(&[0x78, 0x01]);
            self.started = true;
        }
        for chunk in raw.chunks(0xffff) {
            // A non-final stored block: BFINAL=0, BTYPE=00, then LEN and its complement.
            let len = chunk.len() as u16;
            out.push(0);
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&(!len).to_le_bytes());
            out.extend_from_slice(chunk);
        }
        // An empty stored block, as a sync flush ends each block: inflaters (Go's among them)
        // hand out a block's bytes only when the next block starts.
        out.extend_from_slice(&SYNC_FLUSH);
        out
    }

    /// A SYN_STREAM opening `stream` with these headers.
    pub fn syn_stream(&mut self, stream: u32, pairs: &[(&str, &str)]) -> Vec<u8> {
        let block = self.block(pairs);
        let mut payload = Vec::with_capacity(10 + block.len());
        payload.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
        payload.extend_from_slice(&0u32.to_be_bytes());
        payload.extend_from_slice(&[0, 0]);
        payload.extend_from_slice(&block);
        control(SYN_STREAM, 0, &payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_frames_round_trip_and_partial_input_waits() {
        let frame = data(5, true, b"hello");
        assert_eq!(&frame[..8], &[0, 0, 0, 5, FLAG_FIN, 0, 0, 5]);
        assert_eq!(parse(&frame[..7]), Ok(None));
        assert_eq!(parse(&frame[..12]), Ok(None));
        let (f, used) = parse(&frame).unwrap().unwrap();
        assert_eq!(used, 13);
        assert_eq!(
            f,
            Frame::Data {
                stream: 5,
                flags: FLAG_FIN,
                data: b"hello".to_vec()
            }
        );
    }

    #[test]
    fn control_frames_carry_version_three_and_their_type() {
        let (f, _) = parse(&ping(&[0, 0, 0, 7])).unwrap().unwrap();
        assert_eq!(
            f,
            Frame::Control {
                kind: PING,
                flags: 0,
                payload: vec![0, 0, 0, 7]
            }
        );
        let mut v2 = ping(&[0, 0, 0, 7]);
        v2[1] = 2;
        assert_eq!(parse(&v2), Err(SpdyError::Version(2)));
        let huge = [0, 0, 0, 1, 0, 0xff, 0xff, 0xff];
        assert!(matches!(parse(&huge), Err(SpdyError::TooLarge(_))));
    }

    #[test]
    fn header_blocks_are_one_zlib_stream_of_stored_blocks() {
        let mut h = Headers::default();
        let first = h.block(&[("streamType", "error")]);
        // zlib header, then a stored block holding: 1 pair, "streamtype", "error".
        let raw: Vec<u8> = [
            &1u32.to_be_bytes()[..],
            &10u32.to_be_bytes(),
            b"streamtype",
            &5u32.to_be_bytes(),
            b"error",
        ]
        .concat();
        let len = raw.len() as u16;
        let expected: Vec<u8> = [
            &[0x78, 0x01, 0][..],
            &len.to_le_bytes(),
            &(!len).to_le_bytes(),
            &raw,
            &SYNC_FLUSH,
        ]
        .concat();
        assert_eq!(first, expected);
        assert_eq!((0x78u32 * 256 + 0x01) % 31, 0, "a valid zlib header");
        // The next block continues the stream: no second zlib header.
        let second = h.block(&[("streamType", "error")]);
        assert_eq!(second, expected[2..]);
    }

    #[test]
    fn syn_stream_names_the_stream_with_no_association() {
        let mut h = Headers::default();
        let frame = h.syn_stream(3, &[("streamtype", "stdin")]);
        let (f, used) = parse(&frame).unwrap().unwrap();
        assert_eq!(used, frame.len());
        let Frame::Control { kind, payload, .. } = f else {
            panic!("{f:?}")
        };
        assert_eq!(kind, SYN_STREAM);
        assert_eq!(&payload[..10], &[0, 0, 0, 3, 0, 0, 0, 0, 0, 0]);
    }
}
